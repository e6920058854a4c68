"""httpx2 transports that record HTTP calls and answer repeats from the records.

::

    store = FileExecutionStore()
    client = httpx2.Client(transport=RecordingTransport(store, mode="cache"))
    claude = anthropic.Anthropic(http_client=client)

The twins of ``intentusnet.integrations.httpx`` for clients and SDKs built on
``httpx2`` (the Anthropic SDK among them), with the same arguments, modes and
records: both run one recording core, so a request recorded through one is
answered through the other. Needs the ``httpx2`` extra
(``pip install intentusnet[httpx2]``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import httpx2

from ._passthrough import AsyncTee, Tee
from ._recording import (
    CACHE_HEADER,
    DEFAULT_HASH_HEADERS,
    DEFAULT_SECRET_PARAMS,
    RECORD_HEADER,
    STEP_HEADER,
    HitHeaders,
    HTTPResponse,
    Served,
    TransportMode,
)
from ._shell import RecordingShell

__all__ = [
    "CACHE_HEADER",
    "DEFAULT_HASH_HEADERS",
    "DEFAULT_SECRET_PARAMS",
    "RECORD_HEADER",
    "STEP_HEADER",
    "AsyncRecordingTransport",
    "RecordingTransport",
    "TransportMode",
]


class _Replayed(httpx2.SyncByteStream, httpx2.AsyncByteStream):
    """A recorded body replayed as a stream of chunks."""

    def __init__(self, chunks: tuple[bytes, ...]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class _Passed(httpx2.SyncByteStream):
    """A live body passed to the client as it arrives (recorded once whole)."""

    def __init__(self, tee: Tee) -> None:
        self._tee = tee

    def __iter__(self) -> Iterator[bytes]:
        yield from self._tee

    def close(self) -> None:
        self._tee.close()


class _APassed(httpx2.AsyncByteStream):
    """The async ``_Passed``."""

    def __init__(self, tee: AsyncTee) -> None:
        self._tee = tee

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._tee:
            yield chunk

    async def aclose(self) -> None:
        await self._tee.aclose()


def _response(
    served: Served, request: httpx2.Request, headers: HitHeaders[httpx2.Headers]
) -> httpx2.Response:
    """The httpx2 response to serve (a hit's headers are made once, by ``headers``)."""
    ready, tee = served.ready, served.tee
    stream: httpx2.SyncByteStream | httpx2.AsyncByteStream
    if isinstance(tee, Tee):
        stream = _Passed(tee)
    elif isinstance(tee, AsyncTee):
        stream = _APassed(tee)
    elif ready.chunks:
        stream = _Replayed(ready.chunks)
    else:
        stream = httpx2.ByteStream(ready.content)
    return httpx2.Response(
        ready.status,
        headers=headers(served),
        stream=stream,
        request=request,
        extensions=served.extensions(),
    )


class RecordingTransport(RecordingShell[httpx2.BaseTransport], httpx2.BaseTransport):
    """An httpx2 transport that records calls and answers repeats from records.

    Takes the arguments of :class:`intentusnet.integrations.httpx.RecordingTransport`
    (documented there and in docs/cache.md), and works the same way over the
    same recording core; ``wrapped`` is an httpx2 transport
    (``httpx2.HTTPTransport()`` by default). Calls recorded through either
    library are answered through the other.

    Raises:
        ValueError: an unknown mode, or a credential header in ``hash_headers``.

    Added in 0.1.0.
    """

    _library = "httpx2"
    _is_async = False
    _headers_type = httpx2.Headers

    def _default_wrapped(self) -> httpx2.BaseTransport:
        return httpx2.HTTPTransport()

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        """Answer a request from the records, or call and record it."""
        wrapped = self._wrapped

        def open_() -> tuple[HTTPResponse, Iterator[bytes], Callable[[], None]]:
            response = wrapped.handle_request(request)
            return response, response.iter_bytes(), response.close

        served = self._core.handle(request, request.read(), open_)
        return _response(served, request, self._headers)

    def close(self) -> None:
        """Close the wrapped transport and the recording router.

        The cache's hit and miss counts are written, so ``cache.stats()`` and
        ``intentusnet stats`` count this transport's calls at once (a cache the
        transport made is closed too; it reopens on use).
        """
        self._wrapped.close()
        self._core.close()


class AsyncRecordingTransport(
    RecordingShell[httpx2.AsyncBaseTransport], httpx2.AsyncBaseTransport
):
    """The async twin of :class:`RecordingTransport`, for ``httpx2.AsyncClient``.

    Takes the same arguments; ``wrapped`` is an async transport
    (``httpx2.AsyncHTTPTransport()`` by default). Added in 0.1.0.
    """

    _library = "httpx2"
    _is_async = True
    _headers_type = httpx2.Headers

    def _default_wrapped(self) -> httpx2.AsyncBaseTransport:
        return httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        """Answer a request from the records, or call and record it."""
        wrapped = self._wrapped

        async def open_() -> tuple[
            HTTPResponse, AsyncIterator[bytes], Callable[[], Awaitable[None]]
        ]:
            response = await wrapped.handle_async_request(request)
            return response, response.aiter_bytes(), response.aclose

        body = await request.aread()
        served = await self._core.ahandle(request, body, open_)
        return _response(served, request, self._headers)

    async def aclose(self) -> None:
        """Close the wrapped transport and the recording router.

        The cache's hit and miss counts are written, so ``cache.stats()`` and
        ``intentusnet stats`` count this transport's calls at once (a cache the
        transport made is closed too; it reopens on use).
        """
        await self._wrapped.aclose()
        self._core.close()
