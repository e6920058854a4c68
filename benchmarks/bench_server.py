"""The HTTP service on loopback: intents per second, latency, a remote agent hop.

Run: python benchmarks/bench_server.py [--only compare|details] [--runs 3]
     [--threads 1] [--connections 50] [--seconds 10] [--dir DIR]
     [--before CHECKOUT]
     [--clients 50] [--requests 5000]

First, side by side (``compare``): wrk (Debian's package, installed with
apt-get when missing) drives a bare FastAPI app on uvicorn answering every POST
with a constant JSON object, and ``intentusnet serve`` (an API key, recording
on, file store in ``--dir``) with one and with two workers, all with the same
POST of a JSON envelope (a different payload each time, from a Lua script) and
the same threads, connections and duration. All three run at once and are
measured in turn, round after round, so the machine's load hits each alike.
It prints each run's requests/s, p50 and p99 and its ratio to the bare app's
run of the same round, then the medians and the issue's target (one worker at
least 0.4x the bare app). wrk runs on the same machine: on 2 cores it competes
with the servers, so two workers cannot double anything. ``--before CHECKOUT``
(a checkout of the code before a change, e.g. ``git worktree add /tmp/before
main``) adds its ``serve`` with one worker to the same rounds, on a store of its
own.

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
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
from _serving import free_port, load, pct_ms, start_module, wait_ready

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


def _intent_request(intent: str) -> Callable[[int], bytes]:
    """The ``i``-th ``POST /v1/intents`` of one connection: payload ``{"i": i}``."""

    def request(i: int) -> bytes:
        body = orjson.dumps({"intent": {"name": intent}, "payload": {"i": i}})
        return (
            b"POST /v1/intents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )

    return request


def _succeeded(head: bytes, body: bytes) -> None:
    answer = orjson.loads(body)
    if answer["status"] != "success":
        raise RuntimeError(answer)


def _load(
    port: int, clients: int, total: int, intent: str
) -> tuple[float, list[float]]:
    return load(port, clients, total, _intent_request(intent), _succeeded)


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


LUA = """
-- Every request a different payload, so no two envelopes hash equal.
local counter = 0
local threads = 0

function setup(thread)
  threads = threads + 1
  thread:set("tid", threads)
end

function request()
  counter = counter + 1
  local body = '{"intent":{"name":"echo"},"payload":{"t":' .. tid ..
    ',"i":' .. counter .. '}}'
  return wrk.format("POST", nil, {
    ["Content-Type"] = "application/json",
    ["Authorization"] = "Bearer %s",
  }, body)
end
"""
#: The API key ``serve`` is started with; the bare app gets the same header.
API_KEY = "bench-key-0123456789abcdef"
#: The issue's target: ``serve`` (one worker, recording) / the bare app.
TARGET = 0.4
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3}
_LATENCY = re.compile(r"^\s*(50|99)%\s+([\d.]+)(us|ms|s|m)\s*$", re.MULTILINE)


def _ensure_wrk() -> str:
    """The path of ``wrk``; installed from Debian's packages when missing."""
    found = shutil.which("wrk")
    if found:
        return found
    if shutil.which("apt-get") is None:
        sys.exit(
            "wrk is not installed and there is no apt-get here to install it: "
            "install wrk (https://github.com/wg/wrk) and run again"
        )
    command = ["apt-get", "install", "-y", "wrk"]
    if os.geteuid() != 0:
        if shutil.which("sudo") is None:
            sys.exit(
                "wrk is not installed and this user is not root and has no sudo: "
                "install it with 'apt-get install -y wrk' and run again"
            )
        command.insert(0, "sudo")
    print(f"wrk not found: installing it with '{' '.join(command)}'", flush=True)
    # Its output (and sudo's password prompt) go to the terminal.
    done = subprocess.run(command, check=False)
    found = shutil.which("wrk")
    if done.returncode != 0 or found is None:
        sys.exit(
            f"could not install wrk: '{' '.join(command)}' exited "
            f"{done.returncode} (its output is above)"
        )
    return found


@dataclass(frozen=True)
class WrkResult:
    """What one wrk run measured."""

    rate: float
    p50_ms: float
    p99_ms: float
    requests: int


def _parse_wrk(output: str) -> WrkResult:
    """Requests/s and the p50/p99 latency of ``wrk --latency`` output."""
    rate = re.search(r"^Requests/sec:\s+([\d.]+)", output, re.MULTILINE)
    total = re.search(r"^\s*(\d+) requests in", output, re.MULTILINE)
    latency = {q: float(v) * _UNITS[u] for q, v, u in _LATENCY.findall(output)}
    if rate is None or total is None or set(latency) != {"50", "99"}:
        raise RuntimeError(f"cannot read wrk's output:\n{output}")
    failed = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", output)
    if failed or "Socket errors" in output:
        raise RuntimeError(f"wrk saw failed requests:\n{output}")
    return WrkResult(float(rate[1]), latency["50"], latency["99"], int(total[1]))


def _wrk(
    wrk: str, script: Path, port: int, threads: int, connections: int, seconds: int
) -> WrkResult:
    done = subprocess.run(
        [
            wrk,
            f"-t{threads}",
            f"-c{connections}",
            f"-d{seconds}s",
            "--latency",
            "-s",
            str(script),
            f"http://127.0.0.1:{port}/v1/intents",
        ],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"wrk exited {done.returncode}: {done.stderr.strip()}")
    return _parse_wrk(done.stdout)


def _check_answer(port: int) -> None:
    """One request as wrk sends it, answered 200 and (from serve) ``success``."""
    answer = httpx.post(
        f"http://127.0.0.1:{port}/v1/intents",
        json={"intent": {"name": "echo"}, "payload": {"t": 0, "i": 0}},
        headers={"Authorization": f"Bearer {API_KEY}"},
        trust_env=False,
    )
    answer.raise_for_status()
    if answer.json()["status"] != "success":
        raise RuntimeError(f"port {port} answered {answer.text}")


def compare(
    threads: int,
    connections: int,
    seconds: int,
    runs: int,
    directory: str | None,
    before: str | None,
) -> None:
    """Bare FastAPI against ``serve`` with 1 and 2 workers, driven by wrk in turn."""
    wrk = _ensure_wrk()
    work = Path(tempfile.mkdtemp(prefix="bench-compare-", dir=directory))
    (work / "bareapp.py").write_text(BARE)
    (work / "echoapp.py").write_text(ECHO_APP)
    script = work / "intents.lua"
    script.write_text(LUA % API_KEY)
    env = {
        **os.environ,
        "BENCH_STORE": str(work / "records"),
        "INTENTUSNET_API_KEYS": API_KEY,
    }
    quiet = ["--host", "127.0.0.1", "--log-level", "warning"]
    serve = ["intentusnet.cli", "serve", "--app", "echoapp:router", *quiet]
    bare_label, one_label = "bare FastAPI", "serve, 1 worker"
    # uvicorn as serve runs it: no Server header, no proxy headers
    bare = [
        "uvicorn",
        "bareapp:app",
        *quiet,
        "--no-server-header",
        "--no-proxy-headers",
    ]
    apps = {
        bare_label: (bare, env),
        one_label: (serve, env),
        "serve, 2 workers": ([*serve, "--workers", "2"], env),
    }
    if before is not None:  # its own store: the catalog's layout may differ
        old = {**env, "PYTHONPATH": before, "BENCH_STORE": str(work / "before")}
        apps["serve, 1, before"] = (serve, old)
    ports = {label: free_port() for label in apps}
    processes = [
        start_module([*argv, "--port", str(ports[label])], work, app_env)
        for label, (argv, app_env) in apps.items()
    ]
    found: dict[str, list[WrkResult]] = {label: [] for label in ports}
    print(
        f"wrk -t{threads} -c{connections} -d{seconds}s --latency, POST /v1/intents "
        f"(a different payload each; serve records every one to {work}, "
        f"API key on); load average before: {_loadavg()}",
        flush=True,
    )
    try:
        for port in ports.values():
            wait_ready(f"http://127.0.0.1:{port}")
            _check_answer(port)
            _wrk(wrk, script, port, threads, connections, 2)  # warm up
        for round_ in range(1, runs + 1):
            for label, port in ports.items():
                result = _wrk(wrk, script, port, threads, connections, seconds)
                found[label].append(result)
                ratio = result.rate / found[bare_label][-1].rate
                print(
                    f"  round {round_}  {label:<17} {result.rate:8.0f} requests/s  "
                    f"p50 {result.p50_ms:6.2f} ms  p99 {result.p99_ms:6.2f} ms  "
                    f"{ratio:5.2f}x bare",
                    flush=True,
                )
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
    med = statistics.median
    print(f"medians of {runs} rounds (load average after: {_loadavg()}):")
    for label, results in found.items():
        ratios = [
            r.rate / b.rate for r, b in zip(results, found[bare_label], strict=True)
        ]
        print(
            f"  {label:<17} {med(r.rate for r in results):8.0f} requests/s  "
            f"p50 {med(r.p50_ms for r in results):6.2f} ms  "
            f"p99 {med(r.p99_ms for r in results):6.2f} ms  "
            f"{med(ratios):5.2f}x bare"
        )
    one = [
        r.rate / b.rate
        for r, b in zip(found[one_label], found[bare_label], strict=True)
    ]
    verdict = "met" if med(one) >= TARGET else "MISSED"
    print(f"target: serve, 1 worker >= {TARGET}x bare: {med(one):.2f}x, {verdict}")


def _loadavg() -> str:
    return " ".join(f"{value:.2f}" for value in os.getloadavg())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--only", choices=("compare", "details"), default=None)
    parser.add_argument("--threads", type=int, default=1, help="wrk's threads")
    parser.add_argument("--connections", type=int, default=50, help="wrk's connections")
    parser.add_argument(
        "--seconds", type=int, default=10, help="each wrk run's duration"
    )
    parser.add_argument("--dir", default=None, help="where serve records")
    parser.add_argument(
        "--before",
        default=None,
        help="a checkout of the code before (git worktree add): its serve, "
        "1 worker, is measured in the same rounds",
    )
    args = parser.parse_args()
    if args.only != "details":
        compare(
            args.threads,
            args.connections,
            args.seconds,
            args.runs,
            args.dir,
            args.before,
        )
    if args.only == "compare":
        return
    work = Path(tempfile.mkdtemp(prefix="bench-server-"))
    (work / "benchapp.py").write_text(APP)
    (work / "benchagent.py").write_text(AGENT)
    agent_port, port = free_port(), free_port()
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
        wait_ready(agent_url)
        wait_ready(f"http://127.0.0.1:{port}")
        _load(port, 10, 500, "echo")  # warm up
        rates, p50s, p99s, s50, s99, r50, r99, h50, h99 = ([] for _ in range(9))
        for _ in range(args.runs):
            rate, lat = _load(port, args.clients, args.requests, "echo")
            rates.append(rate)
            p50s.append(pct_ms(lat, 0.5))
            p99s.append(pct_ms(lat, 0.99))
            _, seq = _load(port, 1, 500, "echo")
            s50.append(pct_ms(seq, 0.5))
            s99.append(pct_ms(seq, 0.99))
            rem = _in_process_remote(agent_url + "/", 500)
            r50.append(pct_ms(rem, 0.5))
            r99.append(pct_ms(rem, 0.99))
            _, hop = _load(port, 1, 500, "remote")
            h50.append(pct_ms(hop, 0.5))
            h99.append(pct_ms(hop, 0.99))
    finally:
        for process in (server, agent):
            process.terminate()
            process.wait(timeout=60)
        shutil.rmtree(work, ignore_errors=True)
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
