"""A bounded load run on loopback: concurrent clients lose no execution.

Fifty keep-alive connections route at once, so every request overlaps others
in the server and the store; the volume and the speed are measured in
benchmarks/bench_server.py, not here.
"""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path

import orjson
import pytest
from livekit import ServeProcess

from intentusnet.store import FileExecutionStore

CLIENTS = 50
INTENTS_PER_CLIENT = 40
TIME_LIMIT_S = 120

APP = """
import os
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(os.environ["LOAD_STORE"]))

@router.agent("echo", name="echo")
async def echo(env, ctx):
    return {"echo": env.payload}
"""


async def _client(port: int, n: int) -> list[str]:
    """One keep-alive connection routing intents one after another.

    A minimal HTTP/1.1 exchange on asyncio streams: a load generator cheap
    enough that the server, not the client, is what is measured.
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    ids = []
    try:
        for i in range(INTENTS_PER_CLIENT):
            payload = {"client": n, "i": i}
            body = orjson.dumps({"intent": {"name": "echo"}, "payload": payload})
            writer.write(
                b"POST /v1/intents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            head = await reader.readuntil(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200 "), head
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length:")
            )
            answer = orjson.loads(await reader.readexactly(length))
            assert answer["status"] == "success"
            assert answer["payload"] == {"echo": payload}
            ids.append(answer["metadata"]["executionId"])
    finally:
        writer.close()
        await writer.wait_closed()
    return ids


async def _load(port: int) -> list[str]:
    results = await asyncio.wait_for(
        asyncio.gather(*(_client(port, n) for n in range(CLIENTS))), TIME_LIMIT_S
    )
    return [eid for ids in results for eid in ids]


@pytest.mark.slow
def test_load_loses_no_execution(tmp_path: Path) -> None:
    """50 clients x 40 intents: every answer's execution loads, completed."""
    (tmp_path / "loadapp.py").write_text(APP)
    root = tmp_path / "records"
    server = ServeProcess(
        tmp_path,
        "loadapp:router",
        "--log-level",
        "warning",
        env={"LOAD_STORE": str(root)},
    )
    try:
        ids = asyncio.run(_load(int(server.url.rsplit(":", 1)[1])))
    finally:
        assert server.stop() in (0, -signal.SIGTERM)
    assert len(ids) == CLIENTS * INTENTS_PER_CLIENT
    assert len(set(ids)) == len(ids)
    with FileExecutionStore(root) as store:
        for execution_id in ids:
            assert store.load(execution_id).header.status == "completed"
        assert store.stats().records == len(ids)
