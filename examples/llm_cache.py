"""The replay cache in front of an LLM API, through an httpx transport.

Starts a fake OpenAI-style API on 127.0.0.1 (a chat completions endpoint that
answers with JSON, or with server-sent events when asked to stream, after a
pretend model latency), then talks to it through ``RecordingTransport``:

1. the first request is recorded, the repeat is answered from its record;
2. a streamed answer is recorded whole and replayed as a stream;
3. with the server stopped, ``mode="replay"`` still answers what was recorded,
   and names what was not.

Run: python examples/llm_cache.py [--store DIR]

The same transport works with SDKs that take an httpx client::

    openai.OpenAI(http_client=httpx.Client(transport=RecordingTransport(store)))
    anthropic.Anthropic(http_client=httpx.Client(transport=RecordingTransport(store)))
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from intentusnet import FileExecutionStore
from intentusnet.errors import CacheMiss
from intentusnet.integrations.httpx import RecordingTransport

API_KEY = "sk-example-not-a-real-key"
MODEL_LATENCY_S = 0.4


class FakeOpenAI(BaseHTTPRequestHandler):
    """``POST /v1/chat/completions``, OpenAI-style, with a pretend latency."""

    protocol_version = "HTTP/1.1"
    calls = 0

    def log_message(self, format: str, *args: object) -> None:
        pass  # keep the example's output readable

    def do_POST(self) -> None:
        FakeOpenAI.calls += 1
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.headers.get("authorization") != f"Bearer {API_KEY}":
            self._send(401, b'{"error": {"message": "invalid api key"}}')
            return
        time.sleep(MODEL_LATENCY_S)
        question = body["messages"][-1]["content"]
        answer = f"You asked: {question!r}. The answer is 42."
        if body.get("stream"):
            events = b""
            for word in answer.split(" "):
                delta = {"choices": [{"index": 0, "delta": {"content": word + " "}}]}
                events += b"data: " + json.dumps(delta).encode() + b"\n\n"
            self._send(200, events + b"data: [DONE]\n\n", "text/event-stream")
            return
        completion = {
            "id": f"chatcmpl-{FakeOpenAI.calls}",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": answer},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 9, "completion_tokens": 12, "total_tokens": 21},
        }
        self._send(200, json.dumps(completion).encode())

    def _send(self, status: int, body: bytes, kind: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def ask(http: httpx.Client, url: str, question: str) -> tuple[str, float]:
    """One chat completion; its text and how long it took."""
    started = time.perf_counter()
    response = http.post(
        f"{url}/v1/chat/completions",
        json={"model": "fake-1", "messages": [{"role": "user", "content": question}]},
        headers={"authorization": f"Bearer {API_KEY}"},
    )
    response.raise_for_status()
    text = response.json()["choices"][0]["message"]["content"]
    return text, (time.perf_counter() - started) * 1000


def stream(http: httpx.Client, url: str, question: str) -> list[str]:
    """One streamed chat completion; the text of each event."""
    words = []
    body = {
        "model": "fake-1",
        "stream": True,
        "messages": [{"role": "user", "content": question}],
    }
    headers = {"authorization": f"Bearer {API_KEY}"}
    with http.stream(
        "POST", f"{url}/v1/chat/completions", json=body, headers=headers
    ) as response:
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                words.append(json.loads(line[6:])["choices"][0]["delta"]["content"])
    return words


def main() -> None:
    """Run the three scenes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", help="store directory (default: a temporary one)")
    args = parser.parse_args()
    root = args.store or tempfile.mkdtemp(prefix="intentusnet-llm-cache-")
    store = FileExecutionStore(root)

    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeOpenAI)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    print(f"fake LLM API at {url}; store at {root}\n")

    # The two lines: a recording transport in an ordinary httpx client.
    with httpx.Client(transport=RecordingTransport(store, mode="cache")) as http:
        print("1. a question, then the same question again")
        for _ in range(2):
            text, ms = ask(http, url, "What is six times seven?")
            print(f"   {ms:7.1f} ms  {text}")
        print(f"   the model was called {FakeOpenAI.calls} time(s)\n")

        print("2. a streamed answer, then the same again (replayed as a stream)")
        for _ in range(2):
            started = time.perf_counter()
            words = stream(http, url, "Stream it, please.")
            ms = (time.perf_counter() - started) * 1000
            print(f"   {ms:7.1f} ms  {len(words)} events: {''.join(words).strip()}")
        print(f"   the model was called {FakeOpenAI.calls} time(s)\n")

    server.shutdown()
    server.server_close()
    print("3. the server is gone; replay mode answers from the records alone")
    with httpx.Client(transport=RecordingTransport(store, mode="replay")) as http:
        text, ms = ask(http, url, "What is six times seven?")
        print(f"   {ms:7.1f} ms  {text}")
        try:
            ask(http, url, "A question never asked before?")
        except CacheMiss as miss:
            print(f"   CacheMiss: {miss.request}")

    hits = store.cache_hits()
    print(f"\n{len(store.list())} calls recorded, {len(hits)} answered from records.")
    print(f"See them with: intentusnet --store {root} records list")
    store.close()


if __name__ == "__main__":
    main()
