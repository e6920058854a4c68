"""What a recording transport tells observers about one HTTP call.

A transport's own observers (``RecordingTransport.add_observer``) are told
about every call; when an agent makes the call, the observers of the router
running that agent are told too, with the agent's execution and attempt.
"""

from __future__ import annotations

import time
from typing import TypeAlias

from ...routing import observing
from ...routing.agents import current_context, running_observers
from ...routing.seams import ExecutionObserver, ObservedCall

__all__ = [
    "Observed",
    "Observers",
    "observers_of_call",
    "tell_call",
]

#: Who to tell about a call (the transport's observers, then the running
#: router's), and the execution and attempt of the agent making it.
Observed: TypeAlias = tuple[tuple[observing.Observers, ...], str | None, int | None]


class Observers:
    """A transport's observers: added and removed, read once per call.

    What they raise is logged and counted (``errors``), never passed on.
    """

    __slots__ = ("_observers",)

    def __init__(self) -> None:
        self._observers = observing.Observers()

    @property
    def errors(self) -> int:
        """How many times one of them raised."""
        return self._observers.errors.count

    def add(self, observer: ExecutionObserver) -> None:
        """Tell ``observer`` about every call from now on (once if added twice)."""
        self._observers = self._observers.adding(observer)

    def remove(self, observer: ExecutionObserver) -> None:
        """Stop telling ``observer``; one not there is ignored."""
        self._observers = self._observers.removing(observer)

    def __call__(self) -> observing.Observers:
        """The observers to tell about the call being made now."""
        return self._observers


def observers_of_call(own: observing.Observers) -> Observed:
    """Who to tell about a call made now, and the agent's execution and attempt.

    ``own`` (the transport's) and the observers of the router whose agent is
    running, each once (an observer of both is the transport's: what it raises
    is counted there); none when nobody observes.
    """
    ctx = current_context()
    theirs = running_observers()
    if ctx is None or not theirs:
        return ((own,) if own else ()), None, None
    told = (own, theirs.removing(*own.members))
    return tuple(o for o in told if o), ctx.execution_id, ctx.attempt


def tell_call(
    request: tuple[str, str, bytes],
    response: tuple[int, tuple[tuple[str, str], ...], bytes],
    cache: str,
    record: str | None,
    started_ns: int,
    observed: Observed,
) -> None:
    """Tell the observers of ``observed`` about a call and its answer.

    ``request`` is its method, URL and body; ``response`` its status, headers
    and body; ``cache`` and ``record`` as the transport's headers say.
    """
    observers, execution_id, attempt = observed
    method, url, request_body = request
    status, headers, content = response
    content_type = next((v for k, v in headers if k.lower() == "content-type"), None)
    call = ObservedCall(
        record_id=record,
        execution_id=execution_id,
        attempt=attempt,
        method=method,
        url=url,
        status=status,
        content_type=content_type,
        request_body=request_body,
        response_body=content,
        cache=cache,
        started_ns=started_ns,
        ended_ns=time.time_ns(),
    )
    for told in observers:
        told.call_made(call)
