"""A fake OpenAI- and Anthropic-compatible API on 127.0.0.1, for the real SDKs.

``POST /v1/chat/completions`` answers as OpenAI's chat completions API and
``POST /v1/messages`` as Anthropic's messages API, in the shapes their SDKs
parse, with ``"stream": true`` as server-sent events (sent event by event; a
``FakeAPI(held=True)`` sends each stream's first event, then waits until its
``release`` event is set, ten seconds at most, before the rest). A prompt
``"fail 429"`` or ``"fail 500"`` gets that status with the API's error body.
Requests without the key get a 401 (``FakeAPI(any_key=True)``
answers every request, whatever its credentials). A prompt starting ``"cut"``
gets a stream cut after two events (the connection closes mid-body).
``FakeAPI(by_model=True)`` answers differently per model: the text ends ``by
MODEL``. ``hits`` counts requests;
``seen`` keeps each request's headers; ``finished`` counts bodies sent to their
end. Every answer reports its usage as each API does (see :func:`tokens`; a
streamed OpenAI answer only when the request asks with
``stream_options.include_usage``, a streamed Anthropic one its output tokens in
``message_delta``).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

API_KEY = "sk-fake-SECRET-9876543210"


def tokens(ask: dict[str, object], text: str) -> tuple[int, int]:
    """The usage the fake reports: words asked (input) and words answered."""
    asked = " ".join(str(m["content"]) for m in ask["messages"])
    return len(asked.split()), len(text.split())


def _openai(n: int, ask: dict[str, object], text: str) -> list[bytes] | bytes:
    model = ask["model"]
    used = tokens(ask, text)
    if not ask.get("stream"):
        return json.dumps(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion",
                "created": 1700000000,
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {
                    "prompt_tokens": used[0],
                    "completion_tokens": used[1],
                    "total_tokens": used[0] + used[1],
                },
            }
        ).encode()
    events = []
    for i, word in enumerate(text.split(" ")):
        delta = (
            {"role": "assistant", "content": word}
            if i == 0
            else {"content": " " + word}
        )
        events.append(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": None}],
            }
        )
    options = ask.get("stream_options")
    if isinstance(options, dict) and options.get("include_usage"):
        # As OpenAI does: one more chunk, without choices, with the usage.
        events.append(
            {
                "id": f"chatcmpl-{n}",
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": model,
                "choices": [],
                "usage": {
                    "prompt_tokens": used[0],
                    "completion_tokens": used[1],
                    "total_tokens": used[0] + used[1],
                },
            }
        )
    return [b"data: " + json.dumps(e).encode() + b"\n\n" for e in events] + [
        b"data: [DONE]\n\n"
    ]


def _anthropic(n: int, ask: dict[str, object], text: str) -> list[bytes] | bytes:
    model = ask["model"]
    used = tokens(ask, text)
    message = {
        "id": f"msg_{n}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": used[0], "output_tokens": 1},
    }
    if not ask.get("stream"):
        whole = {
            **message,
            "usage": {"input_tokens": used[0], "output_tokens": used[1]},
        }
        return json.dumps(whole).encode()
    start = {**message, "content": [], "stop_reason": None}
    events: list[tuple[str, dict[str, object]]] = [
        ("message_start", {"type": "message_start", "message": start}),
        (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        ),
    ]
    for i, word in enumerate(text.split(" ")):
        events.append(
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {
                        "type": "text_delta",
                        "text": word if i == 0 else " " + word,
                    },
                },
            )
        )
    events += [
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": used[1]},
            },
        ),
        ("message_stop", {"type": "message_stop"}),
    ]
    return [
        f"event: {name}\ndata: {json.dumps(data)}\n\n".encode() for name, data in events
    ]


class FakeAPI:
    """Serve the fake API on an ephemeral port (a context manager)."""

    def __init__(
        self, held: bool = False, by_model: bool = False, any_key: bool = False
    ) -> None:
        self.hits = 0
        self.seen: list[dict[str, str]] = []
        self.finished = 0
        self.release = threading.Event()
        if not held:
            self.release.set()
        self.lock = threading.Lock()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet

            def do_POST(self) -> None:
                with owner.lock:
                    owner.hits += 1
                    n = owner.hits
                    owner.seen.append({k.lower(): v for k, v in self.headers.items()})
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                path = urlsplit(self.path).path
                keyed = self.headers.get("x-api-key") == API_KEY or self.headers.get(
                    "authorization"
                ) == (f"Bearer {API_KEY}")
                if not keyed and not any_key:
                    self._send(401, b'{"error": {"message": "bad key"}}')
                    return
                ask = json.loads(body)
                content = ask["messages"][-1]["content"]
                prompt = content if isinstance(content, str) else json.dumps(content)
                if prompt.startswith("fail "):
                    status = int(prompt.split()[1])
                    error = {"type": "error", "error": {"type": "x", "message": "no"}}
                    self._send(status, json.dumps(error).encode())
                    return
                text = f"echo {prompt} t={ask.get('temperature')}"
                if by_model:
                    text += f" by {ask.get('model')}"
                if path == "/v1/chat/completions":
                    answer = _openai(n, ask, text)
                elif path == "/v1/messages":
                    answer = _anthropic(n, ask, text)
                else:
                    self._send(404, b"{}")
                    return
                if isinstance(answer, bytes):
                    self._send(200, answer)
                else:
                    self._stream(answer, cut=prompt.startswith("cut"))

            def _send(self, status: int, body: bytes) -> None:
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.send_header("x-request-id", "req-fake")
                self.end_headers()
                self.wfile.write(body)

            def _stream(self, events: list[bytes], cut: bool) -> None:
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                for i, event in enumerate(events):
                    if i == 1:
                        owner.release.wait(10)  # bounded: a failing test still ends
                    if cut and i == 2:
                        self.close_connection = True
                        return  # no end chunk: the client sees the body cut
                    try:
                        self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                        self.wfile.flush()
                    except OSError:  # the client went away
                        self.close_connection = True
                        return
                self.wfile.write(b"0\r\n\r\n")
                with owner.lock:
                    owner.finished += 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(
            target=self.server.serve_forever, args=(0.02,), daemon=True
        )

    def __enter__(self) -> FakeAPI:
        self.thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)
