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
* 413 ``body_too_large``; 502 ``upstream_unreachable``; 503 ``overloaded``
  (``traffic``); 504 ``upstream_timeout``.

An upstream's own error statuses are passed on as it sent them. A read-only
gateway key is answered from the records only, whatever the mode: it never
forwards nor records. ``GET /metrics`` (``metrics``) needs a gateway key when
keys are configured; ``GET /healthz`` never does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Final

import httpx
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from ...cache.savings import UsageLedger
from ...errors import CacheMiss
from ...integrations.httpx import CACHE_HEADER, RECORD_HEADER, TransportMode
from ..auth import Access
from .forward import HOP_BY_HOP, KEY_HEADER, Forwarder
from .logs import FIELDS
from .metrics import CONTENT_TYPE, GatewayMetrics
from .misses import miss_body
from .settings import GatewaySettings, Pace
from .traffic import AccessLog, Traffic

if TYPE_CHECKING:
    from opentelemetry.trace import TracerProvider

    from ...store import ExecutionStore

_log = logging.getLogger("intentusnet.gateway")
#: What ends an event stream the upstream broke off: an ``error`` event, after
#: a blank line that ends whatever part of an event came before it.
CUT_EVENT: Final = (
    b"\n\nevent: error\ndata: "
    + json.dumps(
        {
            "type": "error",
            "error": {
                "type": "upstream_cut",
                "message": "the upstream broke the stream off before its end; this "
                "answer is incomplete and was not cached",
            },
        }
    ).encode()
    + b"\n\n"
)
#: The longest path written to the operator's log.
_PATH_LOGGED: Final = 512
_METHODS: Final = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"]
#: A dot segment (``.``/``..``, written plainly or percent-encoded) or an
#: encoded slash or backslash: refused, so a path cannot leave its upstream.
_BAD_PATH: Final = re.compile(r"(^|/)(\.|%2e){1,2}(/|$)|%2f|%5c|\\", re.IGNORECASE)


def error(status: int, kind: str, message: str, **more: object) -> JSONResponse:
    """A gateway error: ``{"error": {"type", "message", ...}}`` with ``status``."""
    return JSONResponse(
        {"error": {"type": kind, "message": message, **more}}, status_code=status
    )


def create_gateway(
    store: ExecutionStore,
    settings: GatewaySettings,
    *,
    access_log: AccessLog | None = None,
    tracer_provider: TracerProvider | None = None,
) -> Starlette:
    """The gateway's ASGI app, recording to ``store`` (the caller closes it).

    Args:
        store: where calls are recorded and answered from.
        settings: upstreams, mode, tenancy and limits.
        access_log: where one JSON line per request is written; none by
            default.
        tracer_provider: where OpenTelemetry spans go (a server span per
            request, a client span per upstream call: ``spans``); none are
            made by default. Needs the ``otel`` extra.
    """
    forwarder = Forwarder(store, settings)
    names = sorted(settings.upstreams)
    metrics = GatewayMetrics(names)
    ledger = UsageLedger(store)
    metrics.watch(lambda: ledger.report(settings.prices))
    middleware = [
        Middleware(
            Traffic,
            upstreams=frozenset(names),
            metrics=metrics,
            log=access_log,
            max_concurrency=settings.max_concurrency,
        )
    ]
    if tracer_provider is not None:
        middleware.insert(0, _traced(forwarder, names, tracer_provider, settings))

    def refused(status: int, kind: str, message: str, **more: object) -> Response:
        metrics.error(kind)
        return error(status, kind, message, **more)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok", "mode": settings.mode.value})

    async def metrics_text(request: Request) -> Response:
        access = _access(request, settings)
        if isinstance(access, Response):
            return access
        # Off the event loop: what caching saved is read from the store.
        return Response(
            await run_in_threadpool(metrics.render), media_type=CONTENT_TYPE
        )

    async def proxy(request: Request) -> Response:
        raw = request.scope.get("raw_path") or request.scope["path"].encode()
        path = raw.decode("latin-1").partition("?")[0]
        name, slash, rest = path.lstrip("/").partition("/")
        if name not in settings.upstreams:
            return refused(
                404,
                "unknown_upstream",
                f"no upstream {name[:64]!r}; the gateway forwards "
                + ", ".join(f"/{n}/..." for n in names),
                upstreams=names,
            )
        if _BAD_PATH.search(rest):
            return refused(
                400,
                "bad_path",
                "the path holds a dot segment or an encoded slash; the gateway "
                "forwards only plain paths under an upstream",
            )
        access = _access(request, settings)
        if isinstance(access, Response):
            metrics.error("unauthorized")
            return access
        body = await _body(request, settings.max_body)
        if isinstance(body, Response):
            metrics.error("body_too_large")
            return body
        query = request.scope.get("query_string", b"").decode("latin-1")
        target = slash + rest + ("?" + query if query else "")
        headers = list(request.headers.raw)
        tenant = forwarder.tenant(headers, query)

        def cut(exc: httpx.TransportError) -> None:
            """The upstream broke a stream off: counted, one log line, not complete."""
            request.state.cut = True  # read by the access log (``traffic``)
            timeout = isinstance(exc, httpx.TimeoutException)
            metrics.upstream_error(name, "timeout" if timeout else "unreachable")
            entry = {
                "event": "upstream_cut",
                "upstream": name,
                "method": request.method,
                "path": path[:_PATH_LOGGED],
                "record": response.headers.get(RECORD_HEADER),
                "error": type(exc).__name__,
            }
            _log.warning("upstream %r broke a stream off", name, extra={FIELDS: entry})

        try:
            response = await forwarder.send(
                name,
                request.method,
                target,
                headers,
                body,
                tenant=tenant,
                replay_only=access is Access.READ,
            )
            if response.status_code >= 500 and response.headers.get(CACHE_HEADER) in (
                "miss",
                "bypass",
            ):
                metrics.upstream_error(name, "status_5xx")
            return await _answer(response, settings.pace, cut)
        except CacheMiss as miss:
            metrics.error("intentusnet_cache_miss")
            _log.warning(
                "%s %s: %s",
                request.method,
                path[:_PATH_LOGGED],
                miss,
                extra={FIELDS: {"event": "cache_miss", "upstream": name}},
            )
            why = "read-only" if settings.mode is not TransportMode.REPLAY else "replay"
            return JSONResponse(
                await run_in_threadpool(miss_body, miss, store, tenant, body, why),
                status_code=404,
            )
        except ValueError as exc:
            return refused(400, "bad_cache_header", str(exc))
        except httpx.TimeoutException:
            metrics.upstream_error(name, "timeout")
            return refused(
                504,
                "upstream_timeout",
                f"upstream {name!r} did not answer within {settings.timeout:g}s",
            )
        except httpx.TransportError as exc:
            metrics.upstream_error(name, "unreachable")
            return refused(
                502,
                "upstream_unreachable",
                f"upstream {name!r} could not be reached or broke off: "
                f"{type(exc).__name__}",
            )

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await forwarder.aclose()
            flush = getattr(tracer_provider, "force_flush", None)
            if flush is not None:  # the SDK's: the spans batched are sent
                await run_in_threadpool(flush)

    app = Starlette(
        routes=[
            Route("/healthz", healthz, methods=["GET"]),
            Route("/metrics", metrics_text, methods=["GET"]),
            Route("/{rest:path}", proxy, methods=_METHODS),
        ],
        middleware=middleware,
        lifespan=lifespan,
    )
    app.state.forwarder = forwarder
    app.state.metrics = metrics
    return app


def _traced(
    forwarder: Forwarder,
    names: list[str],
    tracer_provider: TracerProvider,
    settings: GatewaySettings,
) -> Middleware:
    """The spans' middleware, the forwarder's transports instrumented for calls."""
    from ...integrations.opentelemetry import instrument
    from .spans import Spans

    for transport in forwarder.transports:
        instrument(transport, tracer_provider, prices=settings.prices)
    return Middleware(
        Spans, upstreams=frozenset(names), tracer_provider=tracer_provider
    )


def _access(request: Request, settings: GatewaySettings) -> Access | Response:
    """What the request's gateway key allows; a 401 without a valid one.

    With no keys configured every request has full access.
    """
    if not settings.keys:
        return Access.ROUTE
    token = request.headers.get(KEY_HEADER)
    access = None if token is None else settings.keys.access_of(token)
    if access is not None:
        return access
    return error(
        401,
        "unauthorized",
        f"this gateway needs its API key in the {KEY_HEADER} header",
    )


async def _body(request: Request, limit: int) -> bytes | Response:
    """The request's body, or a 413 once it is larger than ``limit`` bytes."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        return _too_large(limit)
    parts: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            return _too_large(limit)
        parts.append(chunk)
    return b"".join(parts)


def _too_large(limit: int) -> Response:
    """The 413 of a body over ``limit`` bytes."""
    return error(
        413,
        "body_too_large",
        f"the request body is larger than the gateway's limit of {limit} bytes",
        limit=limit,
    )


async def _answer(
    response: httpx.Response, pace: Pace, cut: Callable[[httpx.TransportError], None]
) -> Response:
    """The client's response: an event stream streamed, any other body whole.

    With ``Pace.RECORDED`` a recorded stream's events are sent when they came
    (after the head) while it was recorded. ``cut`` is told when the upstream
    breaks a stream off.

    Raises:
        httpx.TransportError: the upstream broke a whole body off (its head
            is not sent yet: the caller answers 502 or 504).
    """
    headers = [
        (name, value)
        for name, value in response.headers.raw
        if name.lower() not in HOP_BY_HOP
    ]
    content_type = response.headers.get("content-type", "")
    if content_type.lower().startswith("text/event-stream"):
        streamed = StreamingResponse(
            _chunks(response, _times(response, pace), cut),
            status_code=response.status_code,
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


def _times(response: httpx.Response, pace: Pace) -> tuple[int, ...]:
    """When to send each event of a recorded stream (ms after the head), if paced."""
    extensions = response.extensions
    if pace is not Pace.RECORDED or extensions.get("intentusnet_cache") != "hit":
        return ()
    times = extensions.get("intentusnet_event_ms")
    return times if isinstance(times, tuple) else ()


async def _chunks(
    response: httpx.Response,
    times: tuple[int, ...],
    cut: Callable[[httpx.TransportError], None],
) -> AsyncIterator[bytes]:
    """The body as it comes, each chunk at its time if ``times`` are given.

    The client leaving cancels the read (recorded as such on a miss). The
    upstream breaking the stream off ends it cleanly for the client, with an
    ``error`` event (:data:`CUT_EVENT`, which the OpenAI and Anthropic SDKs
    raise as an API error), and tells ``cut``; the transport records it as a
    failure, never served.
    """
    started = time.monotonic()
    sent = 0
    try:
        async for chunk in response.aiter_raw():
            if sent < len(times):
                wait = started + times[sent] / 1000 - time.monotonic()
                if wait > 0:
                    await asyncio.sleep(wait)
            sent += 1
            yield chunk
    except httpx.TransportError as exc:
        cut(exc)
        yield CUT_EVENT
    finally:
        await response.aclose()
