"""The gateway's ASGI app: ``/NAME/rest`` forwarded to upstream NAME, recorded.

Every request goes through the recording transports (``forward``), so its
answer carries ``x-intentusnet-cache`` and ``x-intentusnet-record``. A
``text/event-stream`` answer is streamed: on a miss as the upstream sends it
(and recorded once whole), on a hit event by event from its record. The
gateway's own errors are JSON ``{"error": {"type", "message"}}``:

* 400 ``bad_path``: a dot segment or an encoded slash in the path;
* 400 ``bad_cache_header``: an ``x-intentusnet-cache`` naming no directive;
* 401 ``unauthorized``: gateway keys are configured and none valid was sent;
* 404 ``unknown_upstream``: the first path segment names no upstream;
* 404 ``intentusnet_cache_miss``: replay mode, and no record answers (the
  nearest recorded requests are named);
* 413 ``body_too_large``; 502 ``upstream_unreachable``; 504
  ``upstream_timeout``.

An upstream's own error statuses are passed on as it sent them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ...errors import CacheMiss
from .forward import HOP_BY_HOP, KEY_HEADER, Forwarder
from .misses import miss_body
from .settings import GatewaySettings

if TYPE_CHECKING:
    from ...store import ExecutionStore

_log = logging.getLogger("intentusnet.gateway")
_METHODS: Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
#: A dot segment (``.``/``..``, written plainly or percent-encoded) or an
#: encoded slash or backslash: refused, so a path cannot leave its upstream.
_BAD_PATH: Final = re.compile(r"(^|/)(\.|%2e){1,2}(/|$)|%2f|%5c|\\", re.IGNORECASE)


def error(status: int, kind: str, message: str, **more: object) -> JSONResponse:
    """A gateway error: ``{"error": {"type", "message", ...}}`` with ``status``."""
    return JSONResponse(
        {"error": {"type": kind, "message": message, **more}}, status_code=status
    )


def create_gateway(store: ExecutionStore, settings: GatewaySettings) -> Starlette:
    """The gateway's ASGI app, recording to ``store`` (the caller closes it).

    Args:
        store: where calls are recorded and answered from.
        settings: upstreams, mode, tenancy and limits.
    """
    forwarder = Forwarder(store, settings)
    names = sorted(settings.upstreams)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "mode": settings.mode.value})

    async def proxy(request: Request) -> Response:
        raw = request.scope.get("raw_path") or request.scope["path"].encode()
        path = raw.decode("latin-1").partition("?")[0]
        name, slash, rest = path.lstrip("/").partition("/")
        if name not in settings.upstreams:
            return error(
                404,
                "unknown_upstream",
                f"no upstream {name[:64]!r}; the gateway forwards "
                + ", ".join(f"/{n}/..." for n in names),
                upstreams=names,
            )
        if _BAD_PATH.search(rest):
            return error(
                400,
                "bad_path",
                "the path holds a dot segment or an encoded slash; the gateway "
                "forwards only plain paths under an upstream",
            )
        denied = _denied(request, settings)
        if denied is not None:
            return denied
        body = await _body(request, settings.max_body)
        if isinstance(body, Response):
            return body
        query = request.scope.get("query_string", b"").decode("latin-1")
        target = slash + rest + ("?" + query if query else "")
        headers = list(request.headers.raw)
        try:
            response = await forwarder.send(name, request.method, target, headers, body)
        except CacheMiss as miss:
            tenant = forwarder.tenant(headers)
            return JSONResponse(miss_body(miss, store, tenant, body), status_code=404)
        except ValueError as exc:
            return error(400, "bad_cache_header", str(exc))
        except httpx.TimeoutException:
            return error(
                504,
                "upstream_timeout",
                f"upstream {name!r} did not answer within {settings.timeout:g}s",
            )
        except httpx.TransportError as exc:
            return error(
                502,
                "upstream_unreachable",
                f"upstream {name!r} could not be reached or broke off: "
                f"{type(exc).__name__}",
            )
        return await _answer(response)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await forwarder.aclose()

    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/{rest:path}", proxy, methods=_METHODS),
        ],
        lifespan=lifespan,
    )
    app.state.forwarder = forwarder
    return app


def _denied(request: Request, settings: GatewaySettings) -> Response | None:
    """A 401 when gateway keys are configured and the request has no valid one."""
    if not settings.keys:
        return None
    token = request.headers.get(KEY_HEADER)
    if token is not None and settings.keys.access_of(token) is not None:
        return None
    return error(
        401,
        "unauthorized",
        f"this gateway needs its API key in the {KEY_HEADER} header",
    )


async def _body(request: Request, limit: int) -> bytes | Response:
    """The request's body, or a 413 once it is larger than ``limit`` bytes."""
    too_large = error(
        413,
        "body_too_large",
        f"the request body is larger than the gateway's limit of {limit} bytes",
        limit=limit,
    )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return too_large
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return too_large
        parts.append(chunk)
    return b"".join(parts)


async def _answer(response: httpx.Response) -> Response:
    """The client's response: an event stream streamed, any other body whole."""
    headers = [
        (name, value)
        for name, value in response.headers.raw
        if name.lower() not in HOP_BY_HOP
    ]
    content_type = response.headers.get("content-type", "")
    if content_type.lower().startswith("text/event-stream"):
        streamed = StreamingResponse(
            _chunks(response), status_code=response.status_code
        )
        streamed.raw_headers.extend(headers)
        return streamed
    try:
        body = await response.aread()
    finally:
        await response.aclose()
    whole = Response(body, status_code=response.status_code)
    whole.raw_headers.extend(headers)
    return whole


async def _chunks(response: httpx.Response) -> AsyncIterator[bytes]:
    """The body as it comes; closing it (the client left) records the cut."""
    try:
        async for chunk in response.aiter_raw():
            yield chunk
    finally:
        await response.aclose()
