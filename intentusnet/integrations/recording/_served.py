"""A response served by a recording transport, and the headers that say how."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Generic, NamedTuple, TypeVar

from ...envelope import AgentResponse
from ._passthrough import AsyncTee, Tee
from ._response import Ready

#: On a response: ``hit``, ``miss`` or ``bypass``. On a request: ``bypass`` or
#: ``no-store`` for this call (stripped before the request is hashed or sent).
#: Added in 0.1.0.
CACHE_HEADER: Final = "x-intentusnet-cache"
#: On a response: the id of the record it was answered from, or recorded as
#: (inside an agent too; in a re-run serving the agent's step, the re-run's).
#: Added in 0.1.0.
RECORD_HEADER: Final = "x-intentusnet-record"
#: On a response to a request made inside an agent: the number of the step it
#: is recorded as in the agent's execution (``AgentContext.execution_id``).
#: Added in 0.1.0.
STEP_HEADER: Final = "x-intentusnet-step"


class Served(NamedTuple):
    """A response to serve, whether it is a hit, and its record."""

    ready: Ready
    #: ``hit`` (from a record), ``miss`` (called and recorded) or ``bypass``
    #: (called and recorded without reading the cache)
    cache: str
    record: str | None
    #: a live body passed through as it arrives (``ready`` has no body then)
    tee: Tee | AsyncTee | None = None
    #: inside an agent: the step of the agent's execution it is recorded as
    step: int | None = None

    def headers(self) -> list[tuple[str, str]]:
        """The response's headers: the cache state, the record id, the step."""
        headers = [*self.ready.headers, (CACHE_HEADER, self.cache)]
        if self.record is not None:
            headers.append((RECORD_HEADER, self.record))
        if self.step is not None:
            headers.append((STEP_HEADER, str(self.step)))
        return headers

    def extensions(self) -> dict[str, object]:
        """The response's extensions: the cache state, the record id, the step.

        A recorded event stream's ``intentusnet_event_ms`` says when each of
        its events had come after the head (empty when not recorded).
        """
        return {
            **self.ready.extensions,
            "intentusnet_cache": self.cache,
            "intentusnet_record": self.record,
            "intentusnet_step": self.step,
            "intentusnet_event_ms": self.ready.event_ms,
        }


def record_of(answer: AgentResponse) -> str | None:
    """The record an answer comes from: the one it was served from, for a hit."""
    metadata = answer.metadata
    return metadata.original_execution_id or metadata.execution_id


_H = TypeVar("_H")


class HitHeaders(Generic[_H]):
    """A hit's headers in a transport's own type, made once per served answer.

    A hit serves the same ``Served`` each time, so its headers are built on
    the first hit only. Only hits outside agents are kept (a live stream's
    ``Served`` holds its tee, which a memo must not keep alive; a step's is
    new each time), at most ``kept`` of them.
    """

    def __init__(
        self, make: Callable[[list[tuple[str, str]]], _H], kept: int = 1024
    ) -> None:
        self._make = make
        self._kept = kept
        self._memo: dict[int, tuple[Served, _H]] = {}

    def __call__(self, served: Served) -> _H | list[tuple[str, str]]:
        """The headers to serve ``served`` with."""
        if served.cache != "hit" or served.step is not None:
            return served.headers()  # a step's answer is made anew each time
        found = self._memo.get(id(served))
        if found is not None and found[0] is served:
            return found[1]
        headers = self._make(served.headers())
        if len(self._memo) >= self._kept:
            self._memo.clear()
        self._memo[id(served)] = (served, headers)
        return headers
