"""MCP proxy with the official SDK at both ends: a live tools/call, direct and proxied.

Run: ``python benchmarks/bench_mcp_sdk.py [--dir /dev/shm] [--calls 500] [--rounds 3]``
(needs the ``mcp`` extra: the official Python SDK).

The client is the SDK's ``ClientSession`` over its stdio client; the server an
SDK ``MCPServer`` with one ``echo`` tool, started straight by the client or
behind ``intentusnet mcp proxy --mode record`` (a store under ``--dir``). Each
round times ``--calls`` sequential calls (after 50 unrecorded warm-up calls)
straight, then proxied, so a busy moment hits a pair alike; it prints each
round's medians, the proxy's CPU time per call (its process's, from ``/proc``),
and the median over the rounds of the per-round overhead. The proxy's code is
the first ``intentusnet`` on ``PYTHONPATH``, as for this script.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

SERVER = """
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def echo(text: str) -> str:
    \"\"\"Answer the text given.\"\"\"
    return text


server.run()
"""


def _cpu_s(pid: int) -> float:
    """User and system CPU seconds of process ``pid``."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _children() -> list[int]:
    """This process's children (the proxy, when proxied)."""
    found: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        found += [int(pid) for pid in (task / "children").read_text().split()]
    return found


async def _timed(server: Path, store: str | None, calls: int) -> tuple[float, float]:
    """Median ms a call and the proxy's CPU us a call (0 when direct)."""
    argv = [sys.executable, str(server)]
    if store is not None:
        proxy = ["-m", "intentusnet.cli", "mcp", "proxy", "--store", store]
        argv = [sys.executable, *proxy, "--mode", "record", "--", *argv]
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(os.environ))
    async with (
        stdio_client(params) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        for i in range(50):
            await session.call_tool("echo", {"text": f"warm {i}"})
        pids = _children() if store is not None else []
        before = _cpu_s(pids[0]) if pids else 0.0
        samples = []
        for i in range(calls):
            start = time.perf_counter()
            await session.call_tool("echo", {"text": f"call {i}"})
            samples.append(time.perf_counter() - start)
        cpu = (_cpu_s(pids[0]) - before) / calls * 1e6 if pids else 0.0
    return statistics.median(samples) * 1000, cpu


def main() -> None:
    """Time the rounds; print each round and the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where the store goes (tmpfs)")
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=3)
    options = parser.parse_args()
    overheads, cpus = [], []
    with tempfile.TemporaryDirectory(dir=options.dir) as root:
        server = Path(root) / "server.py"
        server.write_text(SERVER)
        store = str(Path(root) / "records")
        for round_ in range(1, options.rounds + 1):
            direct, _ = asyncio.run(_timed(server, None, options.calls))
            proxied, cpu = asyncio.run(_timed(server, store, options.calls))
            overheads.append(proxied - direct)
            cpus.append(cpu)
            print(
                f"round {round_}: direct {direct:.3f} ms, proxied {proxied:.3f} ms, "
                f"overhead {proxied - direct:+.3f} ms; proxy CPU {cpu:.0f} us a call",
                flush=True,
            )
    print(
        f"median overhead {statistics.median(overheads):+.3f} ms "
        f"(rounds {min(overheads):+.3f} to {max(overheads):+.3f}); proxy CPU "
        f"{statistics.median(cpus):.0f} us a call; load average "
        + " ".join(f"{v:.2f}" for v in os.getloadavg())
    )


if __name__ == "__main__":
    main()
