"""The names of an HTTP library a recording transport is built of.

``httpx`` and ``httpx2`` have the same names (``Response``, ``Headers``, the
byte stream classes, the default transports), so one function reads them from
either module. A response's body stream must be an instance of its own
library's stream classes, so the three bodies a transport serves (a recorded
body replayed, a live body passed through, sync and async) are written once
below and each library's classes are made from them and its stream bases.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from types import ModuleType
from typing import Any, NamedTuple, Protocol, TypeVar

from ._http import HTTPRequest, HTTPResponse
from ._passthrough import AsyncTee, Tee

__all__ = [
    "AsyncSends",
    "Library",
    "LibraryRequest",
    "LibraryResponse",
    "Sends",
    "library",
]


class LibraryRequest(HTTPRequest, Protocol):
    """A library's request, as a transport reads its body."""

    def read(self) -> bytes: ...
    async def aread(self) -> bytes: ...


class LibraryResponse(HTTPResponse, Protocol):
    """A library's response, as a transport reads its body and closes it."""

    def iter_bytes(self) -> Iterator[bytes]: ...
    def close(self) -> None: ...
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


_Req_contra = TypeVar("_Req_contra", contravariant=True)
_Resp_co = TypeVar("_Resp_co", covariant=True)


class Sends(Protocol[_Req_contra, _Resp_co]):
    """The transport a sync recording transport wraps: it makes real calls."""

    def handle_request(self, request: _Req_contra, /) -> _Resp_co: ...
    def close(self) -> None: ...


class AsyncSends(Protocol[_Req_contra, _Resp_co]):
    """The transport an async recording transport wraps."""

    async def handle_async_request(self, request: _Req_contra, /) -> _Resp_co: ...
    async def aclose(self) -> None: ...


class Library(NamedTuple):
    """What a recording transport uses of its library (see :func:`library`)."""

    #: the library's name, recorded as the agent that made the calls
    name: str
    headers: Callable[[list[tuple[str, str]]], object]
    response: Callable[..., Any]
    byte_stream: Callable[[bytes], object]
    replayed: Callable[[tuple[bytes, ...]], object]
    passed: Callable[[Tee], object]
    apassed: Callable[[AsyncTee], object]
    #: the transports that make real calls when none is given
    transport: Callable[[], Any]
    async_transport: Callable[[], Any]


def library(module: ModuleType) -> Library:
    """The names of ``httpx`` or ``httpx2``, and its three response bodies."""
    sync, async_ = module.SyncByteStream, module.AsyncByteStream
    return Library(
        name=module.__name__,
        headers=module.Headers,
        response=module.Response,
        byte_stream=module.ByteStream,
        replayed=type("Replayed", (_Replayed, sync, async_), {}),
        passed=type("Passed", (_Passed, sync), {}),
        apassed=type("APassed", (_APassed, async_), {}),
        transport=module.HTTPTransport,
        async_transport=module.AsyncHTTPTransport,
    )


class _Replayed:
    """A recorded body replayed as a stream of chunks."""

    def __init__(self, chunks: tuple[bytes, ...]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class _Passed:
    """A live body passed to the client as it arrives (recorded once whole)."""

    def __init__(self, tee: Tee) -> None:
        self._tee = tee

    def __iter__(self) -> Iterator[bytes]:
        yield from self._tee

    def close(self) -> None:
        self._tee.close()


class _APassed:
    """The async ``_Passed``."""

    def __init__(self, tee: AsyncTee) -> None:
        self._tee = tee

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._tee:
            yield chunk

    async def aclose(self) -> None:
        await self._tee.aclose()
