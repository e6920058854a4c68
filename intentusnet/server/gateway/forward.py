"""Forwarding a request through the recording transports, one per upstream.

Every upstream has one ``AsyncRecordingTransport`` wrapping its own connection
pool (an ``httpx.AsyncHTTPTransport``), all made at start. A request is handed
to the transport itself, not sent through an ``httpx.AsyncClient``: the
gateway follows no redirect, keeps no cookie and adds no auth, so a client's
layers for those would only cost time (about a fifth of a hit's CPU); the
timeouts a client would set are set on the request.

A request's tenant is made of the credentials the client sent (headers,
``Proxy-Authorization`` and ``Cookie`` included, and query parameters; never
the gateway's own key) and handed to the transport with the request, so any
number of credentials share the transports: memory does not grow with them. The
transports share one ``ReplayCache``, so the gateway hashes, redacts, records
and answers requests exactly as a Python client with the same transport does:
a request recorded through one is answered through the other.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, Protocol

import httpx

from ...cache.replay_cache import ReplayCache
from ...integrations.httpx import AsyncRecordingTransport, TransportMode
from .settings import GatewaySettings, tenant_of

if TYPE_CHECKING:
    from ...store import ExecutionStore

#: Headers that belong to one connection (RFC 9110 §7.6.1), never forwarded,
#: with those the HTTP library sets itself and the gateway's own key.
HOP_BY_HOP: Final = frozenset(
    {
        b"connection",
        b"keep-alive",
        b"proxy-authenticate",
        b"proxy-authorization",
        b"proxy-connection",
        b"te",
        b"trailer",
        b"trailers",
        b"transfer-encoding",
        b"upgrade",
        b"host",
        b"content-length",
    }
)
#: The header a caller sends the gateway's own API key in (never forwarded).
KEY_HEADER: Final = "x-intentusnet-key"
#: The request extension that carries a request's tenant to the transport.
_TENANT: Final = "intentusnet_tenant"
_CONNECT_TIMEOUT: Final = 10.0
#: Parsed URLs kept (dropped all at once beyond), and the longest one kept.
URLS_KEPT: Final = 256
_URL_KEPT_CHARS: Final = 2048


class _Extended(Protocol):
    """A request as the transports' tenant function gets it: its extensions."""

    @property
    def extensions(self) -> Mapping[str, object]: ...


def forwarded(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """The headers to forward: no hop-by-hop one, none the ``Connection`` names."""
    named = {
        token.strip().lower()
        for name, value in headers
        if name.lower() == b"connection"
        for token in value.split(b",")
    }
    own = KEY_HEADER.encode()
    return [
        (name, value)
        for name, value in headers
        if (lower := name.lower()) not in HOP_BY_HOP
        and lower not in named
        and lower != own
    ]


class Forwarder:
    """Sends requests to the upstreams through the recording transports.

    Args:
        store: where calls are recorded (and answered from).
        settings: the gateway's settings.
    """

    def __init__(self, store: ExecutionStore, settings: GatewaySettings) -> None:
        self.store = store
        self.settings = settings
        self.cache = ReplayCache(store=store)
        #: the timeouts of every upstream call, as a request's extension
        self._timeout = httpx.Timeout(
            settings.timeout, connect=_CONNECT_TIMEOUT
        ).as_dict()
        #: parsed URLs, by the URL as sent (immutable: shared safely)
        self._urls: dict[str, httpx.URL] = {}
        #: every recording transport (instrumented for spans)
        self.transports: list[AsyncRecordingTransport] = []
        #: one transport per upstream, whatever the number of credentials
        self.sending = {
            name: self._transport(settings.mode) for name in settings.upstreams
        }
        #: the transports of read-only callers: answered from records only
        self.replaying = (
            self.sending
            if settings.mode is TransportMode.REPLAY
            else {
                name: self._transport(TransportMode.REPLAY)
                for name in settings.upstreams
            }
        )

    def _transport(self, mode: TransportMode) -> AsyncRecordingTransport:
        settings = self.settings
        transport = AsyncRecordingTransport(
            self.store,
            mode,
            httpx.AsyncHTTPTransport(),
            cache=self.cache,
            tenant=_tenant,
            credentials=settings.credentials,
            redactor=settings.redactor,
        )
        self.transports.append(transport)
        return transport

    def tenant(self, headers: list[tuple[bytes, bytes]], query: str) -> str | None:
        """The tenant of a request (``None``: shared cache).

        ``headers`` are the ones the client sent (the gateway's own key is
        not a credential of the caller's), ``query`` its query string.
        """
        key = self.settings.tenant_key
        if key is None:
            return None
        own = KEY_HEADER.encode()
        sent = [(name, value) for name, value in headers if name.lower() != own]
        return tenant_of(key, sent, query, self.settings.credentials)

    async def send(
        self,
        name: str,
        method: str,
        target: str,
        headers: list[tuple[bytes, bytes]],
        body: bytes,
        *,
        tenant: str | None,
        replay_only: bool = False,
    ) -> httpx.Response:
        """Send a request to upstream ``name``; its response, body not yet read.

        ``target`` is the path and query after the upstream's name, as the
        client wrote them; ``tenant`` the request's (:meth:`tenant`);
        ``replay_only``: answer from the records only, as in replay mode (a
        read-only caller). The caller closes the response.

        Raises:
            CacheMiss: replay mode, and no record answers the request.
            ValueError: the request's ``x-intentusnet-cache`` header names no
                directive.
            httpx.TimeoutException, httpx.TransportError: the upstream did not
                answer.
        """
        transport = (self.replaying if replay_only else self.sending)[name]
        request = httpx.Request(
            method,
            self._url(self.settings.upstreams[name].url + target),
            headers=forwarded(headers),
            content=body,
            extensions={_TENANT: tenant, "timeout": self._timeout},
        )
        return await transport.handle_async_request(request)

    def _url(self, text: str) -> httpx.URL:
        """``text`` parsed (and checked) by httpx, once while it is kept."""
        url = self._urls.get(text)
        if url is None:
            url = httpx.URL(text)  # raises on a URL httpx refuses: never kept
            if len(text) <= _URL_KEPT_CHARS:
                if len(self._urls) >= URLS_KEPT:
                    self._urls.clear()
                self._urls[text] = url
        return url

    async def aclose(self) -> None:
        """Close every transport (writing the cache's counts), its pool, the cache."""
        for transport in self.transports:
            await transport.aclose()
        self.cache.close()


def _tenant(request: _Extended) -> str | None:
    """The tenant the gateway gave a request (the transports' tenant function)."""
    tenant = request.extensions.get(_TENANT)
    return tenant if isinstance(tenant, str) else None
