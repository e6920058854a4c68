"""The recording gateway on loopback: hits under load, miss and streaming overhead.

Run: python benchmarks/bench_gateway.py [--clients 50] [--requests 5000]
     [--rounds 3] [--calls 40] [--delay-ms 20] [--dir /dev/shm]

It starts three processes on 127.0.0.1: a fake LLM upstream (uvicorn; answers a
chat completion after --delay-ms, plainly or as an event stream whose first
event leaves after --delay-ms), ``intentusnet gateway`` in cache mode (one
worker, file store under --dir, access log off, no concurrency limit) in front
of it, and a bare uvicorn app answering every POST with a constant JSON body.
It prints:

  * hits: --clients keep-alive connections sending --requests requests in all,
    every one answered from its record, with each request's latency under that
    load (p50/p99) and the throughput; beside the bare app, same load
    generator, the two taking turns over --rounds rounds (median round shown);
    then one connection at a time (latency without queueing);
  * miss overhead: --calls requests one at a time, each new (so each is
    forwarded and recorded), straight to the upstream and through the gateway,
    taking turns: the difference of the p50 latencies;
  * streaming time to first byte: the same for event streams, to the first
    body byte;
  * with each, the gateway process's CPU time per request (user + system, from
    /proc; Linux only), less noisy than latency on a loaded machine.

The load generator speaks minimal HTTP/1.1 on asyncio streams, so the client
costs little next to the servers; it shares the machine with them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import orjson
from _serving import free_port, load, pct_ms, start_module, wait_ready

UPSTREAM = """
import asyncio, json, os
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

DELAY = float(os.environ["BENCH_DELAY_MS"]) / 1000

async def chat(request):
    ask = await request.json()
    if not ask.get("stream"):
        await asyncio.sleep(DELAY)
        return JSONResponse({
            "id": "c", "object": "chat.completion", "model": ask["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "hello"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
        })

    async def events():
        await asyncio.sleep(DELAY)
        for word in ("hello", " there", " friend"):
            chunk = {"id": "c", "object": "chat.completion.chunk", "model": "m",
                     "choices": [{"index": 0, "delta": {"content": word}}]}
            yield b"data: " + json.dumps(chunk).encode() + b"\\n\\n"
        yield b"data: [DONE]\\n\\n"

    return StreamingResponse(events(), media_type="text/event-stream")

async def health(request):
    return Response("ok")

app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                        Route("/healthz", health)])
"""
BARE = """
from starlette.applications import Starlette
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

ANSWER = {"id": "c", "object": "chat.completion", "model": "m",
          "choices": [{"index": 0, "finish_reason": "stop",
                       "message": {"role": "assistant", "content": "hello"}}]}

async def chat(request):
    await request.body()
    return JSONResponse(ANSWER)

async def health(request):
    return Response("ok")

app = Starlette(routes=[Route("/v1/chat/completions", chat, methods=["POST"]),
                        Route("/healthz", health)])
"""
PATH = "/v1/chat/completions"
HEADERS = {"authorization": "Bearer sk-bench", "content-type": "application/json"}


def _ask(text: str, *, stream: bool = False) -> dict[str, object]:
    body: dict[str, object] = {
        "model": "m",
        "messages": [{"role": "user", "content": text}],
    }
    if stream:
        body["stream"] = True
    return body


def _load(port: int, path: str, clients: int, total: int) -> tuple[float, list[float]]:
    """Requests per second and latencies: the same question, ``clients`` at once."""
    body = orjson.dumps(_ask("the same question"))
    data = (
        b"POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer sk-bench\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (path.encode(), len(body), body)
    )
    return load(port, clients, total, lambda _i: data, _answered)


def _answered(head: bytes, body: bytes) -> None:
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(head.decode("latin-1"))


def _one(http: httpx.Client, url: str, text: str, *, stream: bool) -> float:
    """Seconds to a whole plain answer, or to a stream's first body byte."""
    started = time.perf_counter()
    with http.stream("POST", url, json=_ask(text, stream=stream)) as answer:
        chunks = answer.iter_raw()
        next(chunks)
        first = time.perf_counter() - started
        for _ in chunks:
            pass
    if answer.status_code != 200:
        raise RuntimeError(f"{url}: {answer.status_code}")
    return first if stream else time.perf_counter() - started


def _cpu(pid: int) -> float:
    """Seconds of CPU process ``pid`` has used (user + system), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _overhead(
    direct: str, gateway: str, calls: int, *, stream: bool
) -> tuple[float, float]:
    """p50 of straight calls and of calls through the gateway, taking turns."""
    straight: list[float] = []
    through: list[float] = []
    with httpx.Client(trust_env=False, timeout=30, headers=HEADERS) as http:
        for url in (direct, gateway):  # warm the connections
            _one(http, url + PATH, f"warm {time.time_ns()}", stream=stream)
        for i in range(calls):
            text = f"new question {i} {time.time_ns()}"  # never recorded: a miss
            straight.append(_one(http, direct + PATH, text, stream=stream))
            through.append(_one(http, gateway + PATH, text, stream=stream))
    return statistics.median(straight) * 1000, statistics.median(through) * 1000


def main() -> None:
    """Start the upstream, the gateway and the bare app; print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--requests", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--delay-ms", type=float, default=20.0)
    parser.add_argument("--dir", default=None, help="where the store goes (tmpfs)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-gateway-", dir=args.dir))
    (work / "upstream_app.py").write_text(UPSTREAM)
    (work / "bare_app.py").write_text(BARE)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(work), str(Path(__file__).resolve().parents[1])]
        ),
        "BENCH_DELAY_MS": str(args.delay_ms),
    }
    ports = {name: free_port() for name in ("upstream", "gateway", "bare")}
    url = {name: f"http://127.0.0.1:{port}" for name, port in ports.items()}
    uvicorn = ["uvicorn", "--log-level", "warning", "--no-access-log", "--port"]
    processes = [
        start_module([*uvicorn, str(ports["upstream"]), "upstream_app:app"], work, env),
        start_module([*uvicorn, str(ports["bare"]), "bare_app:app"], work, env),
        start_module(
            [
                "intentusnet.cli",
                "gateway",
                "--listen",
                f"127.0.0.1:{ports['gateway']}",
                "--upstream",
                f"up={url['upstream']}",
                "--store",
                str(work / "records"),
                "--access-log",
                "off",
                "--max-concurrency",
                "0",
                "--log-level",
                "warning",
            ],
            work,
            env,
        ),
    ]
    try:
        for name in url:
            wait_ready(url[name])
        gateway = url["gateway"] + "/up"
        with httpx.Client(trust_env=False, timeout=30, headers=HEADERS) as http:
            first = http.post(gateway + PATH, json=_ask("the same question"))
            assert first.headers["x-intentusnet-cache"] == "miss", first.headers
        print(f"gateway hits, {args.clients} connections, {args.requests} requests")
        pid = processes[2].pid
        hits: list[tuple[float, list[float]]] = []
        bare: list[tuple[float, list[float]]] = []
        used = 0.0
        for _ in range(args.rounds):
            before = _cpu(pid)
            hits.append(
                _load(ports["gateway"], "/up" + PATH, args.clients, args.requests)
            )
            used += _cpu(pid) - before
            bare.append(_load(ports["bare"], PATH, args.clients, args.requests))
        for label, rounds in (("gateway hit", hits), ("bare uvicorn app", bare)):
            rate, latencies = sorted(rounds, key=lambda r: r[0])[len(rounds) // 2]
            p50, p99 = pct_ms(latencies, 0.5), pct_ms(latencies, 0.99)
            print(
                f"  {label:<18} {rate:>8.0f} req/s   p50 {p50:7.2f} ms"
                f"   p99 {p99:7.2f} ms"
            )
        ratio = statistics.median(r for r, _ in hits) / statistics.median(
            r for r, _ in bare
        )
        print(f"  hit throughput: {ratio:.2f}x the bare app (median rounds)")
        served = sum(len(latencies) for _, latencies in hits)
        print(f"  gateway CPU per hit under load: {used / served * 1e6:.0f} us")
        for label, port, path in (
            ("gateway hit", ports["gateway"], "/up" + PATH),
            ("bare uvicorn app", ports["bare"], PATH),
        ):
            before = _cpu(pid)
            _, alone = _load(port, path, 1, min(args.requests, 1000))
            cpu = ""
            if port == ports["gateway"]:
                cpu = f", gateway CPU {(_cpu(pid) - before) / len(alone) * 1e6:.0f} us"
            print(
                f"  {label}, one connection: p50 {pct_ms(alone, 0.5):.2f} ms, "
                f"p99 {pct_ms(alone, 0.99):.2f} ms{cpu}"
            )
        for label, stream in (
            ("miss, whole answer", False),
            ("stream, first byte", True),
        ):
            before = _cpu(pid)
            straight, through = _overhead(
                url["upstream"], gateway, args.calls, stream=stream
            )
            cpu = (_cpu(pid) - before) / (args.calls + 1) * 1e6  # a warm-up call too
            print(
                f"{label} ({args.calls} calls, upstream {args.delay_ms:g} ms): "
                f"direct p50 {straight:.2f} ms, gateway p50 {through:.2f} ms, "
                f"overhead {through - straight:.2f} ms, gateway CPU {cpu:.0f} us"
            )
    finally:
        for process in processes:
            process.terminate()
        for process in processes:
            process.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
