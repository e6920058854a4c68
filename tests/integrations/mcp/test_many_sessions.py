"""One replay proxy, with the upstream gone, answering from many recorded sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client

from intentusnet import FileExecutionStore, IntentRouter, record_steps
from intentusnet.integrations.mcp.proxy import session_envelope

from .test_proxy import UPSTREAM, _calls, _session

#: More sessions than the proxy once read (the newest 50).
SESSIONS = 55


def _later_sessions(store_root: Path) -> None:
    """Record SESSIONS sessions of the same upstream, each with a call of its own.

    Made as the proxy makes them (intent mcp.session, the upstream's envelope,
    a step per call, the recorded answer's form), without starting a server
    per session.
    """
    store = FileExecutionStore(store_root)
    (first,) = store.list()
    (add,) = [
        s for s in record_steps(store.load(first.execution_id)) if "add" in s.name
    ]
    assert isinstance(add.output, dict)
    template = add.output
    router = IntentRouter(store=store)

    def _result(total: int) -> dict[str, Any]:
        text = {"type": "text", "text": str(total)}
        return {**template, "content": [text], "structuredContent": {"result": total}}

    @router.agent("mcp.session", name="mcp-proxy")
    def proxy(envelope: Any, ctx: Any) -> dict[str, int]:
        n = ctx.step("session", {}, lambda: len(store.list()))
        args = {"a": n, "b": 1000}
        ctx.step("mcp:tools/call:add", args, lambda **_: _result(n + 1000))
        return {"requests": 1}

    for _ in range(SESSIONS):
        router.route_intent(session_envelope(UPSTREAM))
    router.close()
    store.close()


def _one_add(client: Client) -> Any:
    return client.call_tool("add", {"a": 1, "b": 2})


def test_the_oldest_of_many_sessions_still_answers(tmp_path: Path) -> None:
    """56 sessions: one replay proxy answers the oldest's call and the newest's."""
    oldest = _session(tmp_path, "record", _one_add)
    _later_sessions(tmp_path / "store")
    made = _calls(tmp_path)

    async def both(client: Client) -> list[str]:
        first = await client.call_tool("add", {"a": 1, "b": 2})
        newest = await client.call_tool("add", {"a": SESSIONS, "b": 1000})
        return [first.content[0].text, newest.content[0].text]

    answers = _session(tmp_path, "replay", both, upstream=False)
    assert answers == [oldest.content[0].text, str(SESSIONS + 1000)] == ["3", "1055"]
    assert _calls(tmp_path) == made  # no server was started
