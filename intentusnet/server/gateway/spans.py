"""The gateway's OpenTelemetry spans (``intentusnet gateway --otel``, the otel extra).

Every request to an upstream is a server span, ``METHOD /NAME/{path}``, whose
parent is the W3C ``traceparent`` the caller sent (read by the global
propagator, so ``OTEL_PROPAGATORS`` can change it), current while the request
is answered: the recording transports, instrumented with the same provider
(``intentusnet.integrations.opentelemetry``), make the upstream call's client
span inside it, ``chat MODEL`` with the GenAI attributes for an LLM call, a
cache hit priced 0. The server span holds the method, the path without its
query string, the status, the cache state and the record: never a header, a
query or a body, so no credential. ``/healthz`` and ``/metrics`` make none.
"""

from __future__ import annotations

import os
from typing import Final

from opentelemetry import propagate, trace
from opentelemetry.context import attach, detach
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor
from opentelemetry.trace import SpanKind, Status, StatusCode
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ... import __version__
from ...integrations.opentelemetry import TRACER_NAME
from .traffic import OWN_PATHS, Seen

__all__ = ["SERVICE", "Spans", "otlp_provider"]

#: The ``service.name`` of the gateway's spans unless ``OTEL_SERVICE_NAME`` says.
SERVICE: Final = "intentusnet-gateway"
_PATH_SHOWN: Final = 512


def otlp_provider() -> TracerProvider:
    """A provider sending spans over OTLP/HTTP, set up by the standard variables.

    The exporter reads ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`` (or
    ``OTEL_EXPORTER_OTLP_ENDPOINT``; ``http://localhost:4318/v1/traces`` by
    default), its headers and timeout; the batch processor its
    ``OTEL_BSP_*``; the resource ``OTEL_SERVICE_NAME`` and
    ``OTEL_RESOURCE_ATTRIBUTES``.
    """
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter,
    )

    resource = Resource.create()
    if not os.environ.get("OTEL_SERVICE_NAME") and str(
        resource.attributes.get(SERVICE_NAME, "")
    ).startswith("unknown_service"):
        resource = resource.merge(Resource({SERVICE_NAME: SERVICE}))
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
    return provider


class Spans:
    """ASGI middleware: a server span per request, current while it is answered.

    Args:
        app: the gateway's app.
        upstreams: the upstream names (a path's first segment, when it names one).
        tracer_provider: where the spans go.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        upstreams: frozenset[str],
        tracer_provider: trace.TracerProvider,
    ) -> None:
        self.app = app
        self.upstreams = upstreams
        self.tracer = trace.get_tracer(
            TRACER_NAME, __version__, tracer_provider=tracer_provider
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request inside its span."""
        if scope["type"] != "http" or scope["path"] in OWN_PATHS:
            await self.app(scope, receive, send)
            return
        carrier = {
            name.decode("latin-1").lower(): value.decode("latin-1")
            for name, value in scope["headers"]
            if name.lower() in (b"traceparent", b"tracestate", b"baggage")
        }
        parent = propagate.extract(carrier)
        method: str = scope["method"]
        path: str = scope["path"]
        name = path.lstrip("/").partition("/")[0]
        attributes: dict[str, str | int | bool] = {
            "openinference.span.kind": "CHAIN",
            "http.request.method": method,
            "url.path": path[:_PATH_SHOWN],
            "url.scheme": scope.get("scheme", "http"),
        }
        client = scope.get("client")
        if client:
            attributes["client.address"] = client[0]
        if name in self.upstreams:
            route = f"/{name}/{{path}}"
            attributes["http.route"] = route
            attributes["intentusnet.upstream"] = name
            span_name = f"{method} {route}"
        else:
            span_name = method
        span = self.tracer.start_span(
            span_name, context=parent, kind=SpanKind.SERVER, attributes=attributes
        )
        seen = Seen(0.0)

        async def sending(message: Message) -> None:
            seen.saw(message)
            if message["type"] == "http.response.start":
                span.set_attributes(
                    {
                        "http.response.status_code": seen.status,
                        "intentusnet.cache": seen.cache,
                        "intentusnet.cache.hit": seen.cache == "hit",
                    }
                )
                if seen.record is not None:
                    span.set_attribute("intentusnet.execution_id", seen.record)
            await send(message)

        token = attach(trace.set_span_in_context(span, parent))
        try:
            await self.app(scope, receive, sending)
        except BaseException as exc:
            span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            raise
        finally:
            detach(token)
            _ended(span, scope, seen)


def _ended(span: trace.Span, scope: Scope, seen: Seen) -> None:
    """End a request's span: an error for a 5xx or a stream the upstream cut.

    ``intentusnet.complete`` is the access log's ``complete``: false when the
    body was cut short, by the client or the upstream.
    """
    cut = bool(scope.get("state", {}).get("cut"))
    if cut:
        span.set_status(
            Status(StatusCode.ERROR, "the upstream broke the stream off before its end")
        )
    elif seen.status >= 500:
        span.set_status(Status(StatusCode.ERROR, f"HTTP {seen.status}"))
    span.set_attribute("intentusnet.complete", seen.complete and not cut)
    span.end()
