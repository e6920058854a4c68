"""Time to first byte of a streamed response: direct, and through the transports.

A local server on 127.0.0.1 answers every POST with a server-sent event stream
of ``EVENTS`` events, the first at once and each next one ``GAP_S`` later (as an
LLM streams tokens). Medians over ``--calls`` requests of: the time to the first
body chunk and to the end, for a direct httpx call, a miss through
``RecordingTransport`` (each request new, so each is a miss: the stream is
passed through while it is recorded) and a hit. The issue's target: a miss's
time to first byte within 1.2x of the direct call's. ``--first-byte-ms`` makes
the server wait that long before its first event, as a model does before its
first token (0, the default, measures the transport's whole overhead against a
server that answers at once; the overhead is also printed in milliseconds).

Run: python benchmarks/bench_stream.py [--calls N] [--dir PATH] [--first-byte-ms MS]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _timing import row

from intentusnet import FileExecutionStore
from intentusnet.integrations.httpx import RecordingTransport

EVENTS = 5
GAP_S = 0.05
#: Seconds the server waits before its first event (``--first-byte-ms``).
FIRST_S = 0.0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Each event leaves at once (no waiting to fill a packet), as an API's do.
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        if FIRST_S:
            time.sleep(FIRST_S)
        for i in range(EVENTS):
            if i:
                time.sleep(GAP_S)
            event = b'data: {"token": %d}\n\n' % i
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")


def timed(http: httpx.Client, url: str, prompt: str) -> tuple[float, float]:
    """Milliseconds to the first body chunk and to the end."""
    start = time.perf_counter()
    with http.stream("POST", url, json={"prompt": prompt, "stream": True}) as r:
        chunks = r.iter_bytes()
        next(chunks)
        first = time.perf_counter() - start
        for _ in chunks:
            pass
    return first * 1e3, (time.perf_counter() - start) * 1e3


def main() -> None:
    """Print the medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--dir", help="where to put the store (default: a temp dir)")
    parser.add_argument("--first-byte-ms", type=float, default=0.0)
    args = parser.parse_args()
    global FIRST_S
    FIRST_S = args.first_byte_ms / 1e3
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/chat/completions"
    root = Path(tempfile.mkdtemp(prefix="bench-stream-", dir=args.dir))
    store = FileExecutionStore(root / "records")
    results: dict[str, list[tuple[float, float]]] = {"direct": [], "miss": []}
    hits: list[tuple[float, float]] = []
    with (
        httpx.Client() as direct,
        httpx.Client(transport=RecordingTransport(store)) as recording,
    ):
        timed(direct, url, "warm")  # connections and lazy imports
        timed(recording, url, "warm")
        for n in range(args.calls):  # interleaved, so noise hits both alike
            results["direct"].append(timed(direct, url, f"direct {n}"))
            results["miss"].append(timed(recording, url, f"miss {n}"))
            hits.append(timed(recording, url, "warm"))
    server.shutdown()
    server.server_close()
    store.close()

    def median(samples: list[tuple[float, float]], i: int) -> float:
        return statistics.median(s[i] for s in samples)

    print(
        f"stream of {EVENTS} events, {GAP_S * 1e3:.0f} ms apart, the first after "
        f"{args.first_byte_ms:g} ms; medians of {args.calls} calls"
    )
    row("direct httpx call: time to first byte", median(results["direct"], 0), "ms")
    row(
        "transport miss (passed through): time to first byte",
        median(results["miss"], 0),
        "ms",
    )
    row("transport hit: time to first byte", median(hits, 0), "ms")
    row("direct httpx call: time to the end", median(results["direct"], 1), "ms")
    row("transport miss: time to the end", median(results["miss"], 1), "ms")
    overhead = median(results["miss"], 0) - median(results["direct"], 0)
    row("miss - direct, time to first byte", overhead, "ms")
    ratio = median(results["miss"], 0) / median(results["direct"], 0)
    row("miss / direct, time to first byte", ratio, "x", "(target <= 1.2)")


if __name__ == "__main__":
    main()
