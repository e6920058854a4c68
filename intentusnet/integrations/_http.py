"""What the recording transports see of an HTTP library, and their modes.

Requests and responses are seen through the small protocols below, which both
``httpx`` and ``httpx2`` objects satisfy, so one recording core serves both.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from enum import StrEnum
from typing import Protocol, TypeAlias

from .._util.choices import choice

__all__ = [
    "HTTPURL",
    "AsyncOpen",
    "HTTPHeaders",
    "HTTPRequest",
    "HTTPResponse",
    "Open",
    "TransportMode",
    "authority",
]


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
    """The parts of a request the core reads."""

    @property
    def method(self) -> str: ...
    @property
    def url(self) -> HTTPURL: ...
    @property
    def headers(self) -> HTTPHeaders: ...


class HTTPResponse(Protocol):
    """The parts of a response the core reads."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def http_version(self) -> str: ...
    @property
    def headers(self) -> HTTPHeaders: ...


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
