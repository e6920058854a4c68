"""RecordingClient: an SDK client's calls as steps of the agent's execution."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters

from intentusnet import FileExecutionStore, IntentRouter, ReplayEngine, record_steps
from intentusnet import rerun as rerun_record
from intentusnet.integrations.mcp.client import RecordingClient

SERVER = Path(__file__).with_name("server.py")
LIMIT = 30.0


def _router(tmp_path: Path) -> IntentRouter:
    params = StdioServerParameters(
        command=sys.executable,
        args=[str(SERVER)],
        env={**os.environ, "MCP_TEST_CALLS": str(tmp_path / "calls.txt")},
    )
    router = IntentRouter(store=FileExecutionStore(tmp_path / "store"))

    @router.agent("tools.use")
    async def agent(envelope: Any, ctx: Any) -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=LIMIT) as client:
            tools = RecordingClient(client)
            await tools.list_tools()
            added = await tools.call_tool("add", {"a": 2, "b": 5})
            count = await tools.call_tool("counter", {})
            deleted = await tools.call_tool("delete", {"item": "x"})
            text = await tools.read_resource("memo://greeting")
            return {
                "added": added.content[0].text,
                "count": count.content[0].text,
                "deleted": deleted.content[0].text,
                "greeting": text.contents[0].text,
            }

    return router


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text().split() if path.exists() else []


def test_calls_are_steps_and_a_rerun_serves_them(tmp_path: Path) -> None:
    """Each call is a step named as the proxy names it; a re-run makes none again."""
    router = _router(tmp_path)
    answer = router.route_intent({"intent": {"name": "tools.use"}})
    assert answer.status == "success", answer.error
    assert answer.payload == {
        "added": "7",
        "count": "1",
        "deleted": "deleted x",
        "greeting": "hello",
    }
    assert router.store is not None
    record = router.store.load(answer.metadata.execution_id)
    steps = {s.name: s for s in record_steps(record)}
    assert steps["mcp:tools/call:add"].args == {"a": 2, "b": 5}
    assert steps["mcp:tools/call:delete"].side_effect  # destructiveHint
    assert "mcp:resources/read" in steps
    made = _calls(tmp_path)
    again = rerun_record(ReplayEngine(record, store=router.store), router)
    assert again.response.payload == answer.payload
    assert _calls(tmp_path) == made  # served: no tool ran again
    router.close()


def test_outside_an_agent_the_calls_are_plain(tmp_path: Path) -> None:
    """With no running execution the wrapper just calls the client."""
    import asyncio

    params = StdioServerParameters(command=sys.executable, args=[str(SERVER)])

    async def run() -> str:
        async with Client(params, read_timeout_seconds=LIMIT) as client:
            result = await RecordingClient(client).call_tool("add", {"a": 1, "b": 1})
            return str(result.content[0].text)

    assert asyncio.run(asyncio.wait_for(run(), LIMIT)) == "2"
