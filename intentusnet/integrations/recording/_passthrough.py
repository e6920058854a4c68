"""A live response body read by the client as it arrives, and kept for the record.

On a miss, a streamed response (``text/event-stream``) is handed to the client at
once; the call's job waits on the tee until the client has read the body to its
end (``body()`` returns it, and it is recorded) or stopped early (``None``: the
call fails, and an interrupted stream is never served later). Closing the tee
waits (a bounded time) until the call is settled, so when the client is done
with the response its record is complete or failed, never still in progress.

A client may close a body it has read all the events of before the upstream
said it ended (an SDK stops at ``data: [DONE]``): closing makes one more read,
and if the body ends there it is complete. If more comes, it was cut short.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from bisect import bisect_left
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from typing import Final

#: How long closing a passed-through body waits for its record to be written.
SETTLE_S: Final = 30.0


class Interrupted(RuntimeError):
    """A streamed response was closed or failed before its end.

    Raised inside the call's job only, after the client has the response, so it
    is recorded as the call's failure (the partial body is never served) and
    never reaches the client, which saw the stream end or fail itself.
    """


class Arrivals:
    """The parts of a body as they came, when (to replay it at its pace), its end."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self._started = time.monotonic()
        #: (bytes received so far, milliseconds since the head) per part
        self._arrived: list[tuple[int, int]] = []
        self._size = 0
        self.complete = False
        #: reading the body failed (the upstream broke off); else, when not
        #: complete, the client stopped reading it
        self.failed = False

    def add(self, part: bytes) -> None:
        """Keep one part of the body, noting when it came."""
        self.parts.append(part)
        self._size += len(part)
        elapsed = int((time.monotonic() - self._started) * 1000)
        self._arrived.append((self._size, elapsed))

    def at_ms(self, ends: list[int]) -> list[int]:
        """When the body's byte at each offset in ``ends`` (exclusive) had come."""
        sizes = [size for size, _ in self._arrived]
        last = len(sizes) - 1
        return [self._arrived[min(bisect_left(sizes, end), last)][1] for end in ends]


class Outcome(Arrivals):
    """What became of a passed-through body; the call's job waits on it.

    Kept apart from the tee so that the job does not keep the tee alive: a
    response the client drops unclosed frees its tee, which ends the outcome.
    """

    def __init__(self) -> None:
        super().__init__()
        self.done = threading.Event()

    def body(self) -> bytes | None:
        """Wait until the client is done: the whole body, or None if cut short."""
        self.done.wait()
        return b"".join(self.parts) if self.complete else None


class AsyncOutcome(Arrivals):
    """The async ``Outcome``."""

    def __init__(self) -> None:
        super().__init__()
        #: a read was cancelled: its reader (the client) gave up waiting
        self.stopped = False
        self.done = asyncio.Event()

    async def body(self) -> bytes | None:
        """Wait until the client is done: the whole body, or None if cut short."""
        await self.done.wait()
        return b"".join(self.parts) if self.complete else None


class Tee:
    """The body of a live response, passed to the client chunk by chunk."""

    def __init__(
        self,
        chunks: Iterator[bytes],
        close: Callable[[], None],
        settled: threading.Event,
    ) -> None:
        self._chunks = chunks
        self._close = close
        self._settled = settled
        self.outcome = Outcome()

    def __iter__(self) -> Iterator[bytes]:
        outcome = self.outcome
        try:
            for chunk in self._chunks:
                outcome.add(chunk)
                yield chunk
            outcome.complete = True
        except Exception:
            outcome.failed = True
            raise
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading (an unfinished body is never recorded); wait for the record."""
        self._stop(probe=True)
        self._settled.wait(SETTLE_S)

    def _stop(self, *, probe: bool) -> None:
        outcome = self.outcome
        if outcome.done.is_set():
            return
        try:
            if probe and not (outcome.complete or outcome.failed):
                # One more read: a body whose end the client did not wait for.
                outcome.complete = next(self._chunks, None) is None
            self._close()
        except Exception:
            outcome.complete = False
            outcome.failed = True
        finally:
            outcome.done.set()

    def __del__(self) -> None:
        # A response dropped without being closed must not hold its call open;
        # no reading nor waiting here: this may run on the thread that records it.
        self._stop(probe=False)


class AsyncTee:
    """The async ``Tee``."""

    def __init__(
        self,
        chunks: AsyncIterator[bytes],
        close: Callable[[], Awaitable[None]],
        settled: asyncio.Event,
    ) -> None:
        self._chunks = chunks
        self._close = close
        self._settled = settled
        self.outcome = AsyncOutcome()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        outcome = self.outcome
        try:
            async for chunk in self._chunks:
                outcome.add(chunk)
                yield chunk
            outcome.complete = True
        except asyncio.CancelledError:
            outcome.stopped = True
            raise
        except Exception:
            outcome.failed = True
            raise
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Stop reading (an unfinished body is never recorded); wait for the record."""
        outcome = self.outcome
        if not outcome.done.is_set():
            try:
                if not (outcome.complete or outcome.failed or outcome.stopped):
                    outcome.complete = await anext(self._chunks, None) is None
                await self._close()
            except Exception:
                outcome.complete = False
                # Closing a body whose read was cancelled may fail: not the
                # upstream's doing.
                outcome.failed = not outcome.stopped
            finally:
                outcome.done.set()
        # A record later than that is left to finish; the client goes on.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), SETTLE_S)

    def __del__(self) -> None:
        # A response dropped without being closed must not hold its call open
        # (its body is then incomplete: nothing is recorded as the answer).
        self.outcome.done.set()
