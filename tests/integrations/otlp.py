"""An OTLP/HTTP trace receiver on 127.0.0.1, for the tests that send spans over OTLP."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

TIMEOUT = 10  # seconds: the receiver's thread is joined within it


class Receiver:
    """An OTLP/HTTP trace receiver on 127.0.0.1: POST /v1/traces, protobuf bodies."""

    def __init__(self) -> None:
        self.requests: list[ExportTraceServiceRequest] = []
        self.got = threading.Event()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.path != "/v1/traces" or (
                    self.headers.get("content-type") != "application/x-protobuf"
                ):
                    self.send_response(404)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                owner.requests.append(request)
                owner.got.set()
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1/traces"
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(0.02,), daemon=True
        )

    def __enter__(self) -> Receiver:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(TIMEOUT)


def received(receiver: Receiver) -> dict[str, tuple]:
    """The intentusnet spans the receiver got, by name: (span, its attributes)."""
    found = {}
    for request in receiver.requests:
        for resource in request.resource_spans:
            for scope in resource.scope_spans:
                if scope.scope.name != "intentusnet":
                    continue
                for span in scope.spans:
                    values = {}
                    for a in span.attributes:
                        kind = a.value.WhichOneof("value")
                        values[a.key] = getattr(a.value, kind)
                    found.setdefault(span.name, []).append((span, values))
    return found
