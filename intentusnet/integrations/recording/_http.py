"""What the recording transports see of an HTTP library, and their modes.

The core reads requests and responses through the small protocols below,
which both ``httpx`` and ``httpx2`` objects satisfy, so one recording core
serves both. The two libraries have the same names (``Response``, ``Headers``,
the byte stream classes, the default transports), so a :class:`Library` reads
them from either module. A response's body stream must be an instance of its
own library's stream classes: the three bodies a transport serves (a recorded
body replayed, a live body passed through, sync and async) are written once
below, and each library's classes are made of them and its stream bases.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from enum import StrEnum
from types import ModuleType
from typing import Protocol, TypeAlias, TypeVar

from ..._util.choices import choice
from ._passthrough import AsyncTee, Tee


class HTTPURL(Protocol):
    """The parts of a URL the core reads (``httpx.URL``, ``httpx2.URL``)."""

    @property
    def scheme(self) -> str: ...
    @property
    def raw_host(self) -> bytes: ...
    @property
    def port(self) -> int | None: ...
    @property
    def raw_path(self) -> bytes: ...
    @property
    def password(self) -> str | None: ...


class HTTPHeaders(Protocol):
    """The parts of a header collection the core reads."""

    @property
    def raw(self) -> list[tuple[bytes, bytes]]: ...
    def multi_items(self) -> list[tuple[str, str]]: ...
    def get(self, key: str, /) -> str | None: ...
    def __delitem__(self, key: str, /) -> None: ...


class HTTPRequest(Protocol):
    """The parts of a request the transports read."""

    @property
    def method(self) -> str: ...
    @property
    def url(self) -> HTTPURL: ...
    @property
    def headers(self) -> HTTPHeaders: ...
    @property
    def extensions(self) -> Mapping[str, object]: ...
    def read(self) -> bytes: ...
    async def aread(self) -> bytes: ...


class HTTPResponse(Protocol):
    """The parts of a response the transports read."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def http_version(self) -> str: ...
    @property
    def headers(self) -> HTTPHeaders: ...
    def iter_bytes(self) -> Iterator[bytes]: ...
    def close(self) -> None: ...
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


def authority(url: HTTPURL) -> str:
    """A URL's host and port, as the URL is written (an IPv6 host in brackets)."""
    host = url.raw_host.decode("ascii")
    if ":" in host:
        host = f"[{host}]"
    return host if url.port is None else f"{host}:{url.port}"


#: Makes the call: the response's head, its (decoded) body chunks, and how to
#: close it.
Open: TypeAlias = Callable[[], tuple[HTTPResponse, Iterator[bytes], Callable[[], None]]]
AsyncOpen: TypeAlias = Callable[
    [],
    Awaitable[tuple[HTTPResponse, AsyncIterator[bytes], Callable[[], Awaitable[None]]]],
]


class TransportMode(StrEnum):
    """What a recording transport does with a request (added in 0.1.0)."""

    RECORD = "record"
    REPLAY = "replay"
    CACHE = "cache"

    @classmethod
    def parse(cls, value: object) -> TransportMode:
        """Return the mode named by ``value``.

        Raises:
            ValueError: not a mode; the message lists the valid ones.
        """
        return choice(cls, value, "transport mode")


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


class Library:
    """What a recording transport uses of its library, ``httpx`` or ``httpx2``."""

    def __init__(self, module: ModuleType) -> None:
        #: the library's name, recorded as the agent that made the calls
        self.name: str = module.__name__
        self.headers = module.Headers
        self.response = module.Response
        self.byte_stream = module.ByteStream
        sync, async_ = module.SyncByteStream, module.AsyncByteStream
        self.replayed = type("Replayed", (_Replayed, sync, async_), {})
        self.passed = type("Passed", (_Passed, sync), {})
        self.apassed = type("APassed", (_APassed, async_), {})
        #: the transports that make real calls when none is given
        self.transport = module.HTTPTransport
        self.async_transport = module.AsyncHTTPTransport


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
