"""Single flight: identical requests in flight at once share one execution.

The first request for a key leads: it runs, and its answer is handed to every
request for the same key that arrived while it ran. Waiters may be threads
(``wait``) or coroutines (``await_``) in any event loop, because a flight is a
``concurrent.futures.Future``. A leader that fails or is cancelled cancels its
flight, and its waiters try again on their own.
"""

from __future__ import annotations

import asyncio
import concurrent.futures as cf
import contextlib
import threading
from typing import Generic, TypeVar

_T = TypeVar("_T")


class Flights(Generic[_T]):
    """The flights in progress, by key. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._running: dict[str, cf.Future[_T]] = {}

    def join(self, key: str, *, lead: bool) -> tuple[cf.Future[_T] | None, bool]:
        """Return the flight for ``key`` and whether the caller leads it.

        With no flight in progress, a new one is started if ``lead`` is true
        (``(flight, True)``); otherwise ``(None, False)``.
        """
        with self._lock:
            flight = self._running.get(key)
            if flight is not None:
                return flight, False
            if not lead:
                return None, False
            flight = self._running[key] = cf.Future()
            return flight, True

    def land(self, key: str, flight: cf.Future[_T], result: _T) -> None:
        """End a flight with its answer, which every waiter receives."""
        self._forget(key, flight)
        with contextlib.suppress(cf.InvalidStateError):
            flight.set_result(result)

    def abort(self, key: str, flight: cf.Future[_T]) -> None:
        """End a flight without an answer; its waiters run on their own."""
        self._forget(key, flight)
        flight.cancel()

    def _forget(self, key: str, flight: cf.Future[_T]) -> None:
        with self._lock:
            if self._running.get(key) is flight:
                del self._running[key]


def wait(flight: cf.Future[_T]) -> _T | None:
    """Block until the flight lands; ``None`` if it was aborted."""
    try:
        return flight.result()
    except cf.CancelledError:
        return None


async def await_(flight: cf.Future[_T]) -> _T | None:
    """Wait for the flight in a coroutine; ``None`` if it was aborted.

    Cancelling the waiting task cancels only the wait, never the flight.
    """
    try:
        return await asyncio.shield(asyncio.wrap_future(flight))
    except asyncio.CancelledError:
        if flight.cancelled():
            return None
        raise
