"""A fake LLM API on 127.0.0.1 for the transport tests: OpenAI- and Anthropic-style.

``POST /v1/chat/completions`` (Bearer key) answers like OpenAI's chat API, or with
server-sent events when the body says ``"stream": true``; ``POST /v1/messages``
(``x-api-key``) like Anthropic's. ``POST /v1/fail/<status>`` answers that status.
Every other body is echoed. Each answer sets a session cookie carrying the key,
so that a test can prove neither ever reaches the store. ``headers`` keeps
the headers of each request received.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

API_KEY = "sk-test-SECRET-0123456789"
COOKIE = "session-SECRET-cookie"


class FakeLLM:
    """Serve the fake API on an ephemeral port; ``calls`` counts requests."""

    def __init__(self) -> None:
        self.calls = 0
        self.headers: list[dict[str, str]] = []  # each request's, lower-cased
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet

            def do_POST(self) -> None:
                with owner.lock:
                    owner.calls += 1
                    n = owner.calls
                    owner.headers.append(
                        {k.lower(): v for k, v in self.headers.items()}
                    )
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                path = urlsplit(self.path).path
                if path.startswith("/v1/fail/"):
                    self._send(int(path.rsplit("/", 1)[1]), b'{"error":"no"}')
                    return
                if path == "/v1/messages":
                    if self.headers.get("x-api-key") != API_KEY:
                        self._send(401, b'{"error":"bad key"}')
                        return
                    ask = json.loads(body)
                    text = ask["messages"][-1]["content"]
                    answer = {"id": f"msg_{n}", "content": [{"text": f"echo: {text}"}]}
                    self._send(200, json.dumps(answer).encode())
                    return
                if path != "/v1/chat/completions":
                    self._send(200, body, "application/octet-stream")
                    return
                if self.headers.get("authorization") != f"Bearer {API_KEY}":
                    self._send(401, b'{"error":"bad key"}')
                    return
                ask = json.loads(body)
                text = ask["messages"][-1]["content"]
                if ask.get("stream"):
                    events = [
                        {"id": f"c{n}", "choices": [{"delta": {"content": word}}]}
                        for word in ("echo:", " ", text)
                    ]
                    stream = b"".join(
                        b"data: " + json.dumps(e).encode() + b"\n\n" for e in events
                    )
                    self._send(200, stream + b"data: [DONE]\n\n", "text/event-stream")
                    return
                answer = {
                    "id": f"chatcmpl-{n}",
                    "object": "chat.completion",
                    "choices": [
                        {
                            "index": 0,
                            "message": {
                                "role": "assistant",
                                "content": f"echo: {text}",
                            },
                        }
                    ],
                }
                self._send(200, json.dumps(answer).encode())

            def _send(
                self, status: int, body: bytes, kind: str = "application/json"
            ) -> None:
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(body)))
                self.send_header("set-cookie", f"session={COOKIE}; {API_KEY}")
                self.send_header("x-request-id", "req-fake")
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(0.02,), daemon=True
        )

    def __enter__(self) -> FakeLLM:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
