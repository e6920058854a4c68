"""What a recording transport tells observers about one HTTP call.

A transport's own observers (``RecordingTransport.add_observer``) are told
about every call; when an agent makes the call, the observers of the router
running that agent are told too, with the agent's execution and attempt.
"""

from __future__ import annotations

import time
from typing import TypeAlias

from ..routing.agents import current_context
from ..routing.seams import ExecutionObserver, ObservedCall

__all__ = [
    "Observed",
    "Observers",
    "observers_of_call",
    "tell_call",
]

#: Who to tell about a call, and the execution and attempt of the agent making it.
Observed: TypeAlias = tuple[tuple[ExecutionObserver, ...], str | None, int | None]


class Observers:
    """A transport's observers: added and removed, read once per call."""

    __slots__ = ("_observers",)

    def __init__(self) -> None:
        self._observers: tuple[ExecutionObserver, ...] = ()

    def add(self, observer: ExecutionObserver) -> None:
        """Tell ``observer`` about every call from now on (once if added twice)."""
        if observer not in self._observers:
            self._observers = (*self._observers, observer)

    def remove(self, observer: ExecutionObserver) -> None:
        """Stop telling ``observer``; one not there is ignored."""
        self._observers = tuple(o for o in self._observers if o is not observer)

    def __call__(self) -> tuple[ExecutionObserver, ...]:
        """The observers to tell about the call being made now."""
        return self._observers


def observers_of_call(own: tuple[ExecutionObserver, ...]) -> Observed:
    """Who to tell about a call made now, and the agent's execution and attempt.

    ``own`` (the transport's) and the observers of the router whose agent is
    running, each once.
    """
    ctx = current_context()
    if ctx is None:
        return own, None, None
    theirs = ctx.observers
    if not theirs:
        return own, None, None
    both = tuple(dict.fromkeys((*own, *theirs)))
    return both, ctx.execution_id, ctx.attempt


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
    for observer in observers:
        observer.call_made(call)
