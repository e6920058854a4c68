"""``intentusnet mcp proxy --listen``: the client side over streamable HTTP."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client

from intentusnet import FileExecutionStore, record_steps

ROOT = Path(__file__).resolve().parents[3]
SERVER = Path(__file__).with_name("server.py")
LIMIT = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve(tmp_path: Path, mode: str, body: Any, *more: str) -> tuple[Any, str]:
    """Start the proxy on a loopback port, run ``body``, end it with SIGTERM."""
    port = _free_port()
    args = [sys.executable, "-m", "intentusnet.cli", "mcp", "proxy"]
    args += ["--store", str(tmp_path / "store"), "--mode", mode]
    args += ["--listen", f"127.0.0.1:{port}", *more]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MCP_TEST_CALLS": str(tmp_path / "calls.txt"),
    }
    with subprocess.Popen(
        args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    ) as proxy:
        try:
            deadline = time.monotonic() + LIMIT
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=1).close()
                    break
                except OSError:
                    assert time.monotonic() < deadline, "the proxy did not listen"
                    assert proxy.poll() is None, "the proxy exited"
                    time.sleep(0.05)

            async def run() -> Any:
                url = f"http://127.0.0.1:{port}/mcp"
                async with Client(url, read_timeout_seconds=LIMIT) as client:
                    return await body(client)

            result = asyncio.run(asyncio.wait_for(run(), LIMIT))
            proxy.send_signal(signal.SIGTERM)
            _, err = proxy.communicate(timeout=LIMIT)
        finally:
            if proxy.poll() is None:
                proxy.kill()
                proxy.wait(timeout=LIMIT)
    assert proxy.returncode == 0, err
    return result, err.decode()


async def _tour(client: Client) -> tuple[list[Any], list[float]]:
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None):
        progress.append(done)

    tools = await client.list_tools()
    answers = [
        sorted(tool.name for tool in tools.tools),
        (await client.call_tool("counter", {})).model_dump(mode="json"),
        (
            await client.call_tool("steps", {"count": 2}, progress_callback=on_progress)
        ).model_dump(mode="json"),
    ]
    return answers, progress


def test_record_and_replay_over_the_proxys_own_http_endpoint(tmp_path: Path) -> None:
    """An HTTP client records through --listen; SIGTERM closes the record."""
    upstream = ("--", sys.executable, str(SERVER))
    (recorded, progress), err = _serve(tmp_path, "record", _tour, *upstream)
    assert progress == [1.0, 2.0]  # on the request's own event stream
    assert "recorded exec-" in err
    store = FileExecutionStore(tmp_path / "store")
    record = store.load(store.list()[0].execution_id)
    assert record.header.status.value == "completed"
    assert "mcp:tools/call:counter" in [s.name for s in record_steps(record)]
    store.close()
    made = (tmp_path / "calls.txt").read_text()
    (replayed, _), err = _serve(tmp_path, "replay", _tour)
    assert replayed == recorded
    assert "replayed exec-" in err
    assert (tmp_path / "calls.txt").read_text() == made
