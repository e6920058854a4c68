"""The HTTP service on loopback: intents per second, latency, a remote agent hop.

Run: python benchmarks/bench_server.py [--clients 50] [--requests 5000] [--runs 3]
     [--only compare|details]

First, side by side (``compare``): the same load generator against a bare
FastAPI app on uvicorn answering every POST with a constant JSON object, and
against ``intentusnet serve`` (recording on, file store) with one and with two
workers; all three run at once and are measured in turn, round after round, so
the machine's load hits each alike. It prints each one's median intents/s and
the ratios to the bare app (the issue's targets: at least 0.5x with one worker,
and two workers faster than one). The load generator runs on the same machine,
so on 2 cores it competes with the workers: two workers cannot double anything.

Then (``details``) it starts ``intentusnet serve`` (one worker, recording on,
durability "flush", the store in a temporary directory) with an async echo
agent, and measures:
  * throughput: --clients keep-alive connections routing --requests intents in
    all, with the latency of each request under that load (p50/p99);
  * latency of one caller at a time (p50/p99);
  * a remote agent round trip: a RemoteAgent calling an agent_app served by
    uvicorn, in-process (router.route) and through the service (two HTTP hops).
The load generator speaks minimal HTTP/1.1 on asyncio streams, so the client
costs little next to the server. Each figure is the median over --runs runs.
Everything stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import orjson

APP = """
import os
from intentusnet import IntentRouter
from intentusnet import RemoteAgent
from intentusnet.http import RemotePool
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(os.environ["BENCH_STORE"]))

@router.agent("echo", name="echo")
async def echo(env, ctx):
    return {"echo": env.payload}

remote = RemoteAgent("far", os.environ["BENCH_AGENT_URL"], intents=["remote"],
                     pool=RemotePool(trust_env=False))
router.register(remote.definition, remote)
"""
BARE = """
from fastapi import FastAPI

app = FastAPI()
ANSWER = {"status": "success", "payload": {"echo": "constant"}}

@app.post("/v1/intents")
async def intents():
    return ANSWER

@app.get("/healthz")
async def health():
    return {"status": "ok"}
"""
ECHO_APP = """
import os
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(os.environ["BENCH_STORE"]))

@router.agent("echo", name="echo")
async def echo(env, ctx):
    return {"echo": env.payload}
"""
AGENT = """
from intentusnet import agent_app

async def echo(env, ctx):
    return {"echo": env.payload}

app = agent_app(echo)
"""


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait(url: str) -> None:
    deadline = time.monotonic() + 30
    with httpx.Client(trust_env=False, timeout=1) as http:
        while time.monotonic() < deadline:
            try:
                http.get(url + "/healthz")
                return
            except httpx.TransportError:
                time.sleep(0.05)
    raise RuntimeError(f"{url} did not start")


async def _client(port: int, count: int, intent: str, latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for i in range(count):
            body = orjson.dumps({"intent": {"name": intent}, "payload": {"i": i}})
            started = time.perf_counter()
            writer.write(
                b"POST /v1/intents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            answer = orjson.loads(await reader.readexactly(length))
            latencies.append(time.perf_counter() - started)
            if answer["status"] != "success":
                raise RuntimeError(answer)
    finally:
        writer.close()
        await writer.wait_closed()


def _load(
    port: int, clients: int, total: int, intent: str
) -> tuple[float, list[float]]:
    latencies: list[float] = []

    async def run() -> None:
        per = total // clients
        await asyncio.gather(
            *(_client(port, per, intent, latencies) for _ in range(clients))
        )

    started = time.perf_counter()
    asyncio.run(run())
    return len(latencies) / (time.perf_counter() - started), latencies


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def _in_process_remote(agent_url: str, count: int) -> list[float]:
    from intentusnet import IntentRouter
    from intentusnet.http.remote import RemoteAgent, RemotePool

    pool = RemotePool(trust_env=False)
    agent = RemoteAgent("far", agent_url, intents=["remote"], pool=pool)
    latencies: list[float] = []
    with IntentRouter() as router:
        router.register(agent.definition, agent)

        async def run() -> None:
            try:
                for i in range(count):
                    started = time.perf_counter()
                    await router.route(
                        {"intent": {"name": "remote"}, "payload": {"i": i}}
                    )
                    latencies.append(time.perf_counter() - started)
            finally:
                await pool.aclose()

        asyncio.run(run())
    return latencies


def _start(argv: list[str], work: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-m", *argv],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def compare(clients: int, requests: int, runs: int) -> None:
    """Bare FastAPI against ``serve`` with 1 and 2 workers, interleaved."""
    work = Path(tempfile.mkdtemp(prefix="bench-compare-"))
    (work / "bareapp.py").write_text(BARE)
    (work / "echoapp.py").write_text(ECHO_APP)
    ports = {"bare FastAPI, constant JSON": _port()}
    ports["serve --workers 1, recording"] = _port()
    ports["serve --workers 2, recording"] = _port()
    env = {**os.environ, "BENCH_STORE": str(work / "records")}
    bare_port, one_port, two_port = ports.values()
    quiet = ["--log-level", "warning"]
    serve = ["intentusnet.cli", "serve", "--app", "echoapp:router", *quiet]
    processes = [
        _start(["uvicorn", "bareapp:app", "--port", str(bare_port), *quiet], work, env),
        _start([*serve, "--port", str(one_port)], work, env),
        _start([*serve, "--port", str(two_port), "--workers", "2"], work, env),
    ]
    rates: dict[str, list[float]] = {label: [] for label in ports}
    try:
        for port in ports.values():
            _wait(f"http://127.0.0.1:{port}")
            _load(port, 10, 500, "echo")  # warm up
        for _ in range(runs):
            for label, port in ports.items():
                rates[label].append(_load(port, clients, requests, "echo")[0])
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median
    bare = med(rates["bare FastAPI, constant JSON"])
    print(
        f"side by side, {clients} connections x {requests // clients} requests, "
        f"{runs} rounds (medians; rough: the machine is shared):"
    )
    for label, found in rates.items():
        low, high = min(found), max(found)
        print(
            f"  {label:<30} {med(found):7.0f} intents/s  ({low:.0f}-{high:.0f})"
            f"  {med(found) / bare:5.2f}x bare"
        )
    one = med(rates["serve --workers 1, recording"])
    two = med(rates["serve --workers 2, recording"])
    print(f"  2 workers / 1 worker: {two / one:.2f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("compare", "details"), default=None)
    args = parser.parse_args()
    if args.only != "details":
        compare(args.clients, args.requests, args.runs)
    if args.only == "compare":
        return
    work = Path(tempfile.mkdtemp(prefix="bench-server-"))
    (work / "benchapp.py").write_text(APP)
    (work / "benchagent.py").write_text(AGENT)
    agent_port, port = _port(), _port()
    agent_url = f"http://127.0.0.1:{agent_port}"
    env = {
        **os.environ,
        "BENCH_STORE": str(work / "records"),
        "BENCH_AGENT_URL": agent_url + "/",
    }
    quiet = {
        "cwd": work,
        "env": env,
        "stdout": subprocess.DEVNULL,
        "stderr": subprocess.DEVNULL,
    }
    agent = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "uvicorn",
            "benchagent:app",
            "--port",
            str(agent_port),
            "--log-level",
            "warning",
        ],
        **quiet,  # type: ignore[call-overload]
    )
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "intentusnet.cli",
            "serve",
            "--app",
            "benchapp:router",
            "--port",
            str(port),
            "--log-level",
            "warning",
        ],
        **quiet,  # type: ignore[call-overload]
    )
    try:
        _wait(agent_url)
        _wait(f"http://127.0.0.1:{port}")
        _load(port, 10, 500, "echo")  # warm up
        rates, p50s, p99s, s50, s99, r50, r99, h50, h99 = ([] for _ in range(9))
        for _ in range(args.runs):
            rate, lat = _load(port, args.clients, args.requests, "echo")
            rates.append(rate)
            p50s.append(_pct(lat, 0.5))
            p99s.append(_pct(lat, 0.99))
            _, seq = _load(port, 1, 500, "echo")
            s50.append(_pct(seq, 0.5))
            s99.append(_pct(seq, 0.99))
            rem = _in_process_remote(agent_url + "/", 500)
            r50.append(_pct(rem, 0.5))
            r99.append(_pct(rem, 0.99))
            _, hop = _load(port, 1, 500, "remote")
            h50.append(_pct(hop, 0.5))
            h99.append(_pct(hop, 0.99))
    finally:
        for process in (server, agent):
            process.terminate()
            process.wait(timeout=60)
    med = statistics.median
    print(f"cores: {os.cpu_count()}, runs: {args.runs} (medians shown), recording on")
    print(
        f"throughput, {args.clients} connections x {args.requests // args.clients}: "
        f"{med(rates):8.0f} intents/s   p50 {med(p50s):6.2f} ms   "
        f"p99 {med(p99s):6.2f} ms"
    )
    print(
        f"one caller at a time:                 "
        f"        p50 {med(s50):6.2f} ms   p99 {med(s99):6.2f} ms"
    )
    print(
        f"remote agent, router.route in-process:"
        f"        p50 {med(r50):6.2f} ms   p99 {med(r99):6.2f} ms"
    )
    print(
        f"remote agent through the service:     "
        f"        p50 {med(h50):6.2f} ms   p99 {med(h99):6.2f} ms"
    )


if __name__ == "__main__":
    main()
