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
        self._parts: list[bytes] = []
        self._complete = False
        self._failed = False
        self._done = threading.Event()

    def __iter__(self) -> Iterator[bytes]:
        try:
            for chunk in self._chunks:
                self._parts.append(chunk)
                yield chunk
            self._complete = True
        except Exception:
            self._failed = True
            raise
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading (an unfinished body is never recorded); wait for the record."""
        self._stop()
        self._settled.wait(SETTLE_S)

    def _stop(self) -> None:
        if self._done.is_set():
            return
        try:
            if not (self._complete or self._failed):
                # One more read: a body whose end the client did not wait for.
                self._complete = next(self._chunks, None) is None
            self._close()
        except Exception:
            self._complete = False
        finally:
            self._done.set()

    def body(self) -> bytes | None:
        """Wait until the client is done: the whole body, or None if cut short."""
        self._done.wait()
        return b"".join(self._parts) if self._complete else None

    def __del__(self) -> None:
        # A response dropped without being closed must not hold its call open;
        # no waiting here: this may run on the thread that records it.
        self._stop()


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
        self._parts: list[bytes] = []
        self._complete = False
        self._failed = False
        self._done = asyncio.Event()

    async def __aiter__(self) -> AsyncIterator[bytes]:
        try:
            async for chunk in self._chunks:
                self._parts.append(chunk)
                yield chunk
            self._complete = True
        except Exception:
            self._failed = True
            raise
        finally:
            await self.aclose()

    async def aclose(self) -> None:
        """Stop reading (an unfinished body is never recorded); wait for the record."""
        if not self._done.is_set():
            try:
                if not (self._complete or self._failed):
                    self._complete = await anext(self._chunks, None) is None
                await self._close()
            except Exception:
                self._complete = False
            finally:
                self._done.set()
        # A record later than that is left to finish; the client goes on.
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._settled.wait(), SETTLE_S)

    async def body(self) -> bytes | None:
        """Wait until the client is done: the whole body, or None if cut short."""
        await self._done.wait()
        return b"".join(self._parts) if self._complete else None
