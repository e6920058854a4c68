"""Replay and cache match a call in the protocol revision it is asked in."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from intentusnet import FileExecutionStore, record_steps

pytest.importorskip("mcp")

# each test starts the proxy and the SDK's server: seconds each
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
UPSTREAM = [sys.executable, str(Path(__file__).with_name("server.py"))]
#: Every wait in these tests is bounded by this.
LIMIT = 30.0
V2026 = "2026-07-28"
META = {
    "io.modelcontextprotocol/protocolVersion": V2026,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}


def _request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def _counter(request_id: int, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    params: dict[str, Any] = {"name": "counter", "arguments": {}}
    if meta is not None:
        params["_meta"] = meta
    return _request(request_id, "tools/call", params)


#: A 2025 client's handshake: initialize, then initialized.
HANDSHAKE = [
    _request(
        1,
        "initialize",
        {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "1"},
        },
    ),
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]


def exchange(
    store: Path,
    mode: str,
    messages: list[dict[str, Any]],
    calls: Path,
    upstream: list[str] = UPSTREAM,
) -> list[dict[str, Any]]:
    """Send ``messages`` one at a time through a proxy; the answers to the requests."""
    argv = [sys.executable, "-m", "intentusnet.cli", "mcp", "proxy"]
    argv += ["--store", str(store), "--mode", mode]
    if mode != "replay":
        argv += ["--", *upstream]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_TEST_CALLS": str(calls)}
    answers = []
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    ) as proxy:
        timer = threading.Timer(LIMIT, proxy.kill)  # every read below is bounded
        timer.start()
        try:
            assert proxy.stdin is not None
            assert proxy.stdout is not None
            for message in messages:
                proxy.stdin.write(json.dumps(message).encode() + b"\n")
                proxy.stdin.flush()
                if "id" not in message:
                    continue
                while True:
                    line = proxy.stdout.readline()
                    assert line, "the proxy ended without an answer"
                    answer = json.loads(line)
                    if answer.get("id") == message["id"] and "method" not in answer:
                        answers.append(answer)
                        break
            proxy.stdin.close()
            proxy.wait(timeout=LIMIT)
        finally:
            timer.cancel()
            proxy.kill()
    return answers


def _counted(calls: Path) -> int:
    return len(calls.read_text().split()) if calls.exists() else 0


def test_replay_answers_each_revision_from_its_own_recording(tmp_path: Path) -> None:
    """A 2026 request gets the 2026 answer, a 2025 session the 2025 one, no cross."""
    store, calls = tmp_path / "store", tmp_path / "calls.txt"
    stateless = exchange(store, "record", [_counter(7, META), _counter(8)], calls)
    assert stateless[0]["result"]["_meta"]  # a 2026 answer carries serverInfo
    assert stateless[1]["error"]["code"] == -32602  # no revision: refused
    session = exchange(store, "record", [*HANDSHAKE, _counter(2), _counter(3)], calls)
    assert "_meta" not in session[1]["result"]  # a 2025 answer does not
    assert _counted(calls) == 3
    again = exchange(store, "replay", [_counter(7, META), _counter(8)], calls)
    assert again == stateless  # the newer 2025 session answers neither
    replayed = exchange(store, "replay", [*HANDSHAKE, _counter(2), _counter(3)], calls)
    assert replayed == session
    assert _counted(calls) == 3  # nothing reached a server


def test_a_request_naming_no_revision_never_gets_a_recorded_success(
    tmp_path: Path,
) -> None:
    """Only a 2026 success recorded: a malformed request's replay is refused."""
    store, calls = tmp_path / "store", tmp_path / "calls.txt"
    exchange(store, "record", [_counter(7, META)], calls)
    (refused,) = exchange(store, "replay", [_counter(7)], calls)
    assert refused["error"]["code"] == -32001


def test_a_cache_session_forwards_a_call_recorded_in_another_revision(
    tmp_path: Path,
) -> None:
    """A 2025 session's answer is not served to a 2026 request, nor the reverse."""
    store, calls = tmp_path / "store", tmp_path / "calls.txt"
    exchange(store, "record", [*HANDSHAKE, _counter(2)], calls)
    (fresh,) = exchange(store, "cache", [_counter(7, META)], calls)
    assert fresh["result"]["_meta"]  # the server's 2026 answer, forwarded
    assert _counted(calls) == 2
    cached = exchange(store, "cache", [*HANDSHAKE, _counter(2)], calls)
    assert "_meta" not in cached[1]["result"]
    assert _counted(calls) == 2  # the 2025 call was served from the record
    (served,) = exchange(store, "cache", [_counter(7, META)], calls)
    assert served == fresh
    assert _counted(calls) == 2


CONFORMANCE = [sys.executable, str(Path(__file__).with_name("conformance_server.py"))]


def _round(request_id: int, given: dict[str, Any] | None = None) -> dict[str, Any]:
    """A round of the conformance server's three-round tool (``given``: its inputs)."""
    params: dict[str, Any] = {
        "name": "test_input_required_result_multi_round",
        "arguments": {},
        "_meta": META,
        **(given or {}),
    }
    return _request(request_id, "tools/call", params)


def test_each_round_of_a_multi_round_request_gets_its_own_answer(
    tmp_path: Path,
) -> None:
    """Replayed in reverse order, each round still gets the answer it got."""
    store, calls = tmp_path / "store", tmp_path / "calls.txt"
    (first,) = exchange(store, "record", [_round(1)], calls, CONFORMANCE)
    asked = first["result"]
    assert asked["resultType"] == "input_required"
    name = {"step1": {"action": "accept", "content": {"name": "Ada"}}}
    second_round = _round(
        2, {"inputResponses": name, "requestState": asked["requestState"]}
    )
    (second,) = exchange(store, "record", [second_round], calls, CONFORMANCE)
    state = second["result"]["requestState"]
    color = {"step2": {"action": "accept", "content": {"color": "blue"}}}
    third_round = _round(3, {"inputResponses": color, "requestState": state})
    (third,) = exchange(store, "record", [third_round], calls, CONFORMANCE)
    assert third["result"]["content"][0]["text"] == "Ada likes blue."
    rounds = [third_round, second_round, _round(1)]
    replayed = exchange(store, "replay", rounds, calls)
    assert replayed == [third, second, first]


def test_a_listen_streams_notifications_are_not_recorded_in_a_call(
    tmp_path: Path,
) -> None:
    """The ack of a subscriptions/listen sent during a call is not the call's."""
    store = tmp_path / "store"
    argv = [sys.executable, "-m", "intentusnet.cli", "mcp", "proxy"]
    argv += ["--store", str(store), "--", *CONFORMANCE]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    progress = {
        "name": "test_tool_with_progress",
        "arguments": {},
        "_meta": {**META, "progressToken": "p"},
    }
    listen = {"notifications": {"toolsListChanged": True}, "_meta": META}
    seen = []
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    ) as proxy:
        timer = threading.Timer(LIMIT, proxy.kill)  # every read below is bounded
        timer.start()
        try:
            assert proxy.stdin is not None
            assert proxy.stdout is not None
            for message in (
                _request(1, "tools/call", progress),  # runs for 0.1 s
                _request(2, "subscriptions/listen", listen),  # acked meanwhile
            ):
                proxy.stdin.write(json.dumps(message).encode() + b"\n")
            proxy.stdin.flush()
            while not any(m.get("id") == 1 and "result" in m for m in seen):
                line = proxy.stdout.readline()
                assert line, "the proxy ended without an answer"
                seen.append(json.loads(line))
            proxy.stdin.close()
            proxy.wait(timeout=LIMIT)
        finally:
            timer.cancel()
            proxy.kill()
    methods = {m.get("method") for m in seen}
    assert "notifications/subscriptions/acknowledged" in methods  # passed through
    recorded = FileExecutionStore(store)
    (session,) = recorded.list()
    steps = record_steps(recorded.load(session.execution_id))
    (call,) = [s for s in steps if s.name == "mcp:tools/call:test_tool_with_progress"]
    nested = {s.name for s in steps if s.parent == call.number}
    assert nested == {"mcp:notifications/progress", "mcp:asked-by"}
    recorded.close()


def _stream(
    store: Path, mode: str, messages: list[dict[str, Any]], until: Any
) -> list[dict[str, Any]]:
    """Send ``messages`` at once through a proxy; what it says until ``until``."""
    argv = [sys.executable, "-m", "intentusnet.cli", "mcp", "proxy"]
    argv += ["--store", str(store), "--mode", mode]
    if mode != "replay":
        argv += ["--", *CONFORMANCE]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    seen: list[dict[str, Any]] = []
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
    ) as proxy:
        timer = threading.Timer(LIMIT, proxy.kill)  # every read below is bounded
        timer.start()
        try:
            assert proxy.stdin is not None
            assert proxy.stdout is not None
            for message in messages:
                proxy.stdin.write(json.dumps(message).encode() + b"\n")
            proxy.stdin.flush()
            while not until(seen):
                line = proxy.stdout.readline()
                assert line, "the proxy ended before it said what was awaited"
                seen.append(json.loads(line))
            proxy.stdin.close()
            proxy.wait(timeout=LIMIT)
        finally:
            timer.cancel()
            proxy.kill()
    return seen


def _tagged(seen: list[dict[str, Any]], method: str, stream: int) -> bool:
    key = "io.modelcontextprotocol/subscriptionId"
    return any(
        m.get("method") == method and m["params"].get("_meta", {}).get(key) == stream
        for m in seen
    )


def test_a_listen_stream_is_replayed_with_its_notifications(tmp_path: Path) -> None:
    """subscriptions/listen recorded with what its stream carried, replayed in order."""
    store = tmp_path / "store"
    listen = {"notifications": {"toolsListChanged": True}, "_meta": META}
    trigger = {"name": "test_trigger_tool_change", "arguments": {}, "_meta": META}
    changed = "notifications/tools/list_changed"
    # the tool changes the list: the stream says so, once acknowledged
    recorded = _stream(
        store,
        "record",
        [
            _request(1, "subscriptions/listen", listen),
            _request(2, "tools/call", trigger),
        ],
        lambda seen: _tagged(seen, changed, 1),
    )
    assert _tagged(recorded, "notifications/subscriptions/acknowledged", 1)
    replayed = _stream(
        store,
        "replay",
        [_request(7, "subscriptions/listen", listen)],
        lambda seen: _tagged(seen, changed, 7),
    )
    methods = [m["method"] for m in replayed]
    assert methods == ["notifications/subscriptions/acknowledged", changed]
    assert all("id" not in m for m in replayed)  # the stream stays open
