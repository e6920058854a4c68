"""MCP proxy: overhead on a live tools/call over stdio, and a replayed call.

Run: ``python benchmarks/bench_mcp.py [--dir /dev/shm] [--calls 2000]``.

The client is in the benchmark's process (an in-memory endpoint talking to the
proxy's session), the upstream a small raw JSON-RPC server process. "Live"
times a sequential tools/call through the proxy, recorded, against the same
call sent straight to the same kind of server over the same pipes; the
difference is the proxy's overhead (one JSON parse, one step recorded, one
write each way). "Replayed" times a call answered from the record inside the
proxy: parse, hash, look-up, answer.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time

import orjson

from intentusnet import FileExecutionStore
from intentusnet.integrations.mcp.proxy import (
    record_session,
    replay_session,
    session_envelope,
)
from intentusnet.integrations.mcp.sources import recorded_calls
from intentusnet.integrations.mcp.stdio import UpstreamProcess

SERVER = r"""
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if "id" in m and "method" in m:
        r = {"content": [{"type": "text", "text": "ok"}], "isError": False}
        out = {"jsonrpc": "2.0", "id": m["id"], "result": r}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
"""


class MemoryClient:
    """The client's side of the proxy, in memory."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.outbox: asyncio.Queue[bytes] = asyncio.Queue()

    async def receive(self) -> bytes | None:
        return await self.inbox.get()

    async def send(self, message: bytes) -> None:
        self.outbox.put_nowait(message)


def _call(i: int) -> bytes:
    params = {"name": "echo", "arguments": {"n": i % 10}}
    return orjson.dumps(
        {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}
    )


async def _timed(client: MemoryClient, calls: int) -> list[float]:
    samples = []
    for i in range(calls):
        start = time.perf_counter_ns()
        client.inbox.put_nowait(_call(i))
        await client.outbox.get()
        samples.append((time.perf_counter_ns() - start) / 1000)
    return samples


async def _direct(calls: int) -> list[float]:
    upstream = UpstreamProcess([sys.executable, "-c", SERVER])
    await upstream.start()
    samples = []
    for i in range(calls):
        start = time.perf_counter_ns()
        await upstream.send(_call(i))
        await upstream.receive()
        samples.append((time.perf_counter_ns() - start) / 1000)
    await upstream.stop()
    return samples


async def _through(store: FileExecutionStore, calls: int) -> tuple[list[float], str]:
    client = MemoryClient()
    argv = [sys.executable, "-c", SERVER]
    upstream = UpstreamProcess(argv)
    session = asyncio.create_task(
        record_session(
            store, client, upstream, session_envelope(argv), side_effects=set()
        )
    )
    samples = await _timed(client, calls)
    client.inbox.put_nowait(None)
    answer = await session
    assert answer.metadata.execution_id is not None
    return samples, answer.metadata.execution_id


async def _replayed(
    store: FileExecutionStore, execution_id: str, calls: int
) -> list[float]:
    client = MemoryClient()
    session = asyncio.create_task(
        replay_session(
            client,
            recorded_calls(store, None, execution_id, force=False, required=True),
            side_effects=set(),
        )
    )
    samples = await _timed(client, calls)
    client.inbox.put_nowait(None)
    await session
    return samples


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default=None)
    parser.add_argument("--calls", type=int, default=2000)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=options.dir) as root:
        store = FileExecutionStore(root)
        direct = statistics.median(asyncio.run(_direct(options.calls))[100:])
        through, execution_id = asyncio.run(_through(store, options.calls))
        live = statistics.median(through[100:])
        replayed = statistics.median(
            asyncio.run(_replayed(store, execution_id, options.calls))[100:]
        )
        store.close()
    print(f"direct to the server     {direct:8.1f} us per call (median)")
    print(f"through the proxy, live  {live:8.1f} us; overhead {live - direct:.1f} us")
    print(f"replayed by the proxy    {replayed:8.1f} us")


if __name__ == "__main__":
    main()
