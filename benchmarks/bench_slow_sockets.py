"""Slow clients against ``intentusnet serve``: are they closed, are others served?

Starts ``serve`` (one worker, an echo router recording to a temporary store,
``--body-timeout 5``) on 127.0.0.1 and, in turn:

* ``bodies``: ``--count`` connections send a complete header block announcing
  a 1 MB body, then one body byte every 2 s. Prints when the server closed
  them (seconds after their headers: median and max) and how many were
  answered 408.
* ``headers``: ``--count`` connections send the start of a header block, then
  one header byte every 2 s, for ``--hold`` seconds. Prints how many the server
  closed (uvicorn 0.55 has no header deadline: none is expected).

Meanwhile one client sends ``POST /v1/intents`` (echo) one after the other;
its p50 and p99 are printed for each part. Bounded: ``--count`` (default 600)
connections, each part at most ``--hold`` (default 15) seconds.

    python benchmarks/bench_slow_sockets.py [--count 600] [--hold 15]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).parent))

from _serving import free_port, pct_ms, start_module, wait_ready
from slowkit import SlowClients, body_head, header_head

BODY_SECONDS = 5
EVERY = 2.0
APP = """
import os
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(os.environ["BENCH_STORE"]))
router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
"""
ASK = {"intent": {"name": "echo"}, "payload": {"n": 1}}


def _normal(url: str, slow: SlowClients, hold: float) -> list[float]:
    """Echo requests one after the other until the slow ones close or ``hold``."""
    took: list[float] = []
    end = time.monotonic() + hold
    with httpx.Client(trust_env=False, timeout=10) as http:
        while time.monotonic() < end and (slow.open_now() or len(took) < 50):
            start = time.perf_counter()
            answer = http.post(url + "/v1/intents", json=ASK)
            took.append(time.perf_counter() - start)
            if answer.status_code != 200:
                raise RuntimeError(f"a normal request got {answer.status_code}")
    return took


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--count", type=int, default=600)
    parser.add_argument("--hold", type=float, default=15.0)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-slow-"))
    (work / "slowapp.py").write_text(APP)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = ["intentusnet.cli", "serve", "--app", "slowapp:router", "--port"]
    limits = ["--body-timeout", str(BODY_SECONDS), "--log-level", "warning"]
    env = {**os.environ, "BENCH_STORE": str(work / "records")}
    server = start_module([*argv, str(port), *limits], work, env)
    try:
        wait_ready(url)
        head = body_head("/v1/intents")
        with SlowClients(
            port, args.count, head, every=EVERY, seconds=args.hold
        ) as slow:
            took = _normal(url, slow, args.hold)
        closed = [t for t in slow.closed_after if t is not None]
        refused = sum(1 for a in slow.answers if bytes(a).startswith(b"HTTP/1.1 408"))
        print(
            f"bodies: {args.count} slow, {len(closed)} closed "
            f"(median {statistics.median(closed):.2f} s, max {max(closed):.2f} s "
            f"after their headers; deadline {BODY_SECONDS} s), {refused} answered 408; "
            f"normal requests: {len(took)}, p50 {pct_ms(took, 0.5):.1f} ms, "
            f"p99 {pct_ms(took, 0.99):.1f} ms"
        )
        head = header_head("/healthz")
        with SlowClients(
            port, args.count, head, every=EVERY, seconds=args.hold
        ) as slow:
            took = _normal(url, slow, args.hold)
            still = slow.open_now()
        print(
            f"headers: {args.count} slow, {args.count - still} closed after "
            f"{args.hold:g} s; normal requests: {len(took)}, "
            f"p50 {pct_ms(took, 0.5):.1f} ms, p99 {pct_ms(took, 0.99):.1f} ms"
        )
    finally:
        server.terminate()
        server.wait(timeout=30)


if __name__ == "__main__":
    main()
