"""Each request's passage through the gateway: its limit, its metrics, its log line.

:class:`Traffic` wraps the gateway's ASGI app. Beyond ``max_concurrency``
requests being answered at once, a request gets **503** ``overloaded`` with a
``Retry-After`` header at once, before its body is read. Every other request is
timed to its response's head (a stream's first byte) and to its body's end,
counted in the metrics, and written as one JSON line to the access log:

``{"time", "client", "method", "upstream", "path", "status", "cache",
"record", "bytes", "headMs", "ms", "complete"}``

The path is logged without its query string (a query may carry a key), and no
header is logged, so no credential reaches the log. ``complete`` is false when
the body was cut short (the client left mid-stream, or the upstream broke off:
the app sets ``cut`` in the request's state, as it ends the client's stream
cleanly). ``/healthz`` and ``/metrics`` are neither limited, counted nor logged.
"""

from __future__ import annotations

import json
import time
from typing import IO, Final

from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..._util.time import utc_now
from .metrics import CACHE_STATES, GatewayMetrics

__all__ = ["OWN_PATHS", "AccessLog", "Seen", "Traffic"]

#: Paths of the gateway itself: never limited, counted nor logged.
OWN_PATHS: Final = frozenset({"/healthz", "/metrics"})
#: Seconds a refused client is asked to wait (``Retry-After``).
RETRY_AFTER: Final = 1
_PATH_LOGGED: Final = 512


class AccessLog:
    """Writes one JSON line per request to ``stream`` (flushed at once)."""

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream

    def write(self, entry: dict[str, object]) -> None:
        """Write ``entry`` as one line of JSON."""
        self._stream.write(json.dumps(entry, separators=(",", ":")) + "\n")
        self._stream.flush()


class Traffic:
    """ASGI middleware: the concurrency limit, the metrics and the access log.

    Args:
        app: the gateway's app.
        upstreams: the upstream names (a path's first segment, when it names one).
        metrics: where requests are counted.
        log: where each request's line goes; ``None`` logs nothing.
        max_concurrency: requests answered at once at most; ``None``: no limit.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        upstreams: frozenset[str],
        metrics: GatewayMetrics,
        log: AccessLog | None,
        max_concurrency: int | None,
    ) -> None:
        self.app = app
        self.upstreams = upstreams
        self.metrics = metrics
        self.log = log
        self.max_concurrency = max_concurrency
        #: requests being answered now (``/healthz`` and ``/metrics`` aside)
        self.active = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request through the app, or refuse it when too many are."""
        if scope["type"] != "http" or scope["path"] in OWN_PATHS:
            await self.app(scope, receive, send)
            return
        limit = self.max_concurrency
        if limit is not None and self.active >= limit:
            self.metrics.error("overloaded")
            refused = JSONResponse(
                {
                    "error": {
                        "type": "overloaded",
                        "message": f"the gateway is answering its limit of {limit} "
                        f"requests at once; retry after {RETRY_AFTER} s",
                        "limit": limit,
                    }
                },
                status_code=503,
                headers={"retry-after": str(RETRY_AFTER)},
            )
            await refused(scope, receive, send)
            return
        self.active += 1
        self.metrics.started()
        seen = Seen(time.perf_counter())

        async def sending(message: Message) -> None:
            seen.saw(message)
            if seen.complete:
                self._done(scope, seen)  # before the client can see the end
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            self._done(scope, seen)

    def _done(self, scope: Scope, seen: Seen) -> None:
        """Free the request's place for the next one; count and log it (once)."""
        if seen.done:
            return
        seen.done = True
        self.active -= 1
        whole = time.perf_counter() - seen.started
        path: str = scope["path"]
        name = path.lstrip("/").partition("/")[0]
        upstream = name if name in self.upstreams else ""
        head = whole if seen.head is None else seen.head
        self.metrics.answered(upstream, seen.cache, seen.status, head, whole)
        if self.log is None:
            return
        client = scope.get("client")
        self.log.write(
            {
                "time": utc_now()[0],
                "client": None if client is None else client[0],
                "method": scope["method"],
                "upstream": upstream or None,
                "path": path[:_PATH_LOGGED],
                "status": seen.status,
                "cache": seen.cache,
                "record": seen.record,
                "bytes": seen.size,
                "headMs": round(head * 1000, 3),
                "ms": round(whole * 1000, 3),
                "complete": seen.complete and not scope.get("state", {}).get("cut"),
            }
        )


class Seen:
    """What a response sent: its status, cache state, record, size, timing."""

    def __init__(self, started: float) -> None:
        self.started = started
        self.status = 500  # until a head is sent: the app failed
        self.cache = "none"
        self.record: str | None = None
        self.head: float | None = None
        self.size = 0
        self.complete = False
        self.done = False

    def saw(self, message: Message) -> None:
        """Note what ``message`` (a response's head or a part of its body) says."""
        if message["type"] == "http.response.start":
            self.head = time.perf_counter() - self.started
            self.status = message["status"]
            for name, value in message.get("headers", ()):
                lower = name.lower()
                if lower == b"x-intentusnet-cache":
                    state = value.decode("latin-1")
                    self.cache = state if state in CACHE_STATES else "none"
                elif lower == b"x-intentusnet-record":
                    self.record = value.decode("latin-1")
        elif message["type"] == "http.response.body":
            self.size += len(message.get("body", b""))
            self.complete = not message.get("more_body", False)
