"""Helpers of the benchmarks that start servers: ports, start-up, a load generator.

Every server binds 127.0.0.1; the load generator keeps ``clients`` keep-alive
connections busy, each sending its requests one after the other.
"""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

#: The request a connection sends ``i``-th, and the check of an answer's head and body.
Request = Callable[[int], bytes]
Check = Callable[[bytes, bytes], None]


def free_port() -> int:
    """A port free on 127.0.0.1 now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def wait_ready(url: str) -> None:
    """Wait (up to 30 s) until ``url``/healthz answers 200."""
    deadline = time.monotonic() + 30
    with httpx.Client(trust_env=False, timeout=1) as http:
        while time.monotonic() < deadline:
            try:
                if http.get(url + "/healthz").status_code == 200:
                    return
            except httpx.TransportError:
                time.sleep(0.05)
    raise RuntimeError(f"{url} did not start")


def start_module(
    argv: list[str], work: Path, env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """``python -m ARGV`` in ``work``, its output discarded."""
    return subprocess.Popen(
        [sys.executable, "-m", *argv],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def pct_ms(values: list[float], q: float) -> float:
    """The ``q`` quantile of latencies in seconds, in milliseconds."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


async def _client(
    port: int, count: int, request: Request, check: Check, latencies: list[float]
) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for i in range(count):
            data = request(i)
            started = time.perf_counter()
            writer.write(data)
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            body = await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            check(head, body)
    finally:
        writer.close()
        await writer.wait_closed()


def load(
    port: int, clients: int, total: int, request: Request, check: Check
) -> tuple[float, list[float]]:
    """Requests per second and each request's latency, ``clients`` at once."""
    latencies: list[float] = []

    async def run() -> None:
        per = total // clients
        await asyncio.gather(
            *(_client(port, per, request, check, latencies) for _ in range(clients))
        )

    started = time.perf_counter()
    asyncio.run(run())
    return len(latencies) / (time.perf_counter() - started), latencies
