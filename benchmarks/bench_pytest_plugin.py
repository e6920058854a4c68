"""A pytest cassette's replayed request, beside the recording transport it runs on.

The plugin hands each request an httpx transport receives to its cassette
(``HTTPCassette.send``), which answers it through a ``RecordingTransport`` in
replay mode. Measured in the same run: a hit through the cassette, and a hit
through a ``RecordingTransport`` on the same records; the ratio is the
cassette's own cost (the request's bookkeeping and its interaction noted).

Run: python benchmarks/bench_pytest_plugin.py
"""

from __future__ import annotations

import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _timing import median_us, row

from intentusnet import FileExecutionStore, HTTPCassette, ReplayCache
from intentusnet.integrations.httpx import RecordingTransport


class _Answer(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = b'{"choices": [{"text": "' + b"x" * 400 + b'"}]}'
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    body = b'{"model": "m", "messages": [{"role": "user", "content": "' + b"y" * 900
    body += b'"}]}'

    def request() -> httpx.Request:
        return httpx.Request(
            "POST", url, content=body, headers={"content-type": "application/json"}
        )

    original = httpx.HTTPTransport.handle_request
    real = httpx.HTTPTransport()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cassette"
        recording = HTTPCassette(path, "once", cache_dir=Path(tmp) / "c1")
        recording.send("httpx", original, real, request())
        recording.close()
        server.shutdown()
        server.server_close()
        thread.join()

        print("pytest cassette replay (1 KB JSON body; rough: a shared, busy machine)")
        cassette = HTTPCassette(path, "none", cache_dir=Path(tmp) / "c2")
        asked = request()
        us_cassette = median_us(lambda: cassette.send("httpx", original, real, asked))
        assert cassette.misses == 0
        row("hit through the cassette (HTTPCassette.send)", us_cassette)
        cassette.close()

        store = FileExecutionStore(path)
        cache = ReplayCache(Path(tmp) / "c3", store=store, record_hits=False)
        transport = RecordingTransport(store, "replay", real, cache=cache)
        us_transport = median_us(lambda: transport.handle_request(asked))
        row("hit through RecordingTransport(mode='replay')", us_transport)
        row("  cassette / transport", us_cassette / us_transport, unit="x ")
        transport.close()
        cache.close()
        store.close()
    real.close()


if __name__ == "__main__":
    main()
