"""``intentusnet mcp proxy`` between the official MCP SDK's client and server."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from intentusnet import FileExecutionStore, record_steps

# each test starts the proxy and an upstream server: seconds each
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SERVER = Path(__file__).with_name("server.py")
UPSTREAM = [sys.executable, str(SERVER)]
#: Every wait in these tests is bounded by this.
LIMIT = 30.0


def _env(calls: Path) -> dict[str, str]:
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "MCP_TEST_CALLS": str(calls),
    }


def _proxy(store: Path, mode: str, *options: str, upstream: bool = True) -> list[str]:
    args = ["-m", "intentusnet.cli", "mcp", "proxy", "--store", str(store)]
    args += ["--mode", mode, *options]
    return [*args, "--", *UPSTREAM] if upstream else args


Body = Callable[[Client], Awaitable[Any]]


def _session(
    tmp_path: Path, mode: str, body: Body, *options: str, upstream: bool = True
) -> Any:
    """Run ``body`` with an SDK client connected through the proxy (bounded)."""
    params = StdioServerParameters(
        command=sys.executable,
        args=_proxy(tmp_path / "store", mode, *options, upstream=upstream),
        env=_env(tmp_path / "calls.txt"),
    )

    async def run() -> Any:
        async with Client(params, read_timeout_seconds=LIMIT) as client:
            return await body(client)

    return asyncio.run(asyncio.wait_for(run(), LIMIT))


def _calls(tmp_path: Path) -> list[str]:
    path = tmp_path / "calls.txt"
    return path.read_text().split() if path.exists() else []


def _dump(value: Any) -> Any:
    return value.model_dump(mode="json")


async def _tour(client: Client) -> tuple[list[Any], list[float]]:
    from mcp_types import PromptReference

    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None):
        progress.append(done)

    tools = await client.list_tools()
    results = [
        sorted(tool.name for tool in tools.tools),
        _dump(await client.call_tool("add", {"a": 1, "b": 2})),
        _dump(await client.call_tool("counter", {})),
        _dump(await client.call_tool("fail", {"reason": "no"})),
        _dump(await client.read_resource("memo://greeting")),
        _dump(await client.get_prompt("review", {"code": "x = 1"})),
    ]
    steps = await client.call_tool("steps", {"count": 3}, progress_callback=on_progress)
    found = await client.complete(
        PromptReference(type="ref/prompt", name="review"),
        {"name": "code", "value": "p"},
    )
    return [*results, _dump(steps), found.completion.values], progress


@dataclass
class Toured:
    """A recorded session of ``_tour``: its directory (``store/``, ``calls.txt``)."""

    path: Path
    answers: list[Any]
    progress: list[float]


@pytest.fixture(scope="module")
def toured(tmp_path_factory: pytest.TempPathFactory) -> Toured:
    """One session of ``_tour`` recorded for the module's tests that read or replay it.

    A replay opens no record and starts no upstream, so they leave it as it is.
    """
    path = tmp_path_factory.mktemp("toured")
    answers, progress = _session(path, "record", _tour)
    return Toured(path, answers, progress)


def _store(tmp_path: Path) -> FileExecutionStore:
    return FileExecutionStore(tmp_path / "store")


def test_record_then_replay_without_the_upstream(toured: Toured) -> None:
    """A replayed session answers exactly as recorded, and nothing reaches a server."""
    recorded = toured.answers
    assert toured.progress == [1.0, 2.0, 3.0]  # notifications flowed while recording
    assert recorded[2]["content"][0]["text"] == "1"
    assert recorded[3]["is_error"] is True
    made = _calls(toured.path)
    replayed, progress = _session(toured.path, "replay", _tour, upstream=False)
    assert replayed == recorded
    assert progress == toured.progress
    assert _calls(toured.path) == made  # no upstream was started


def test_the_session_is_one_record_with_a_step_per_call(toured: Toured) -> None:
    """One mcp.session record; each call a step keyed by name and arguments."""
    store = _store(toured.path)
    (summary,) = store.list()
    record = store.load(summary.execution_id)
    assert record.header.intent_name == "mcp.session"
    assert record.header.status.value == "completed"
    names = [step.name for step in record_steps(record)]
    assert "mcp:tools/call:add" in names
    assert "mcp:resources/read" in names
    assert "mcp:prompts/get:review" in names
    add = next(s for s in record_steps(record) if s.name == "mcp:tools/call:add")
    assert add.args == {"a": 1, "b": 2}
    # the command line is named by its hash, never recorded
    assert str(SERVER) not in json.dumps(record.envelope)
    store.close()


def test_progress_is_recorded_with_its_call_and_replayed(toured: Toured) -> None:
    """Progress notifications are steps of their call; a replay sends them again."""

    async def calls(client: Client) -> tuple[str, list[Any]]:
        progress: list[Any] = []

        async def on_progress(done: float, total: float | None, message: str | None):
            progress.append((done, total, message))

        answer = await client.call_tool(
            "steps", {"count": 3}, progress_callback=on_progress
        )
        return answer.content[0].text, progress

    assert toured.answers[6]["content"][0]["text"] == "3 steps"
    store = _store(toured.path)
    record = store.load(store.list()[0].execution_id)
    steps = record_steps(record)
    (call,) = [s for s in steps if s.name == "mcp:tools/call:steps"]
    notes = [s for s in steps if s.name == "mcp:notifications/progress"]
    assert [s.parent for s in notes] == [call.number] * 3
    assert notes[0].args == {"progress": 1, "total": 3, "message": "step 1"}
    store.close()
    replayed = _session(toured.path, "replay", calls, upstream=False)
    assert replayed == ("3 steps", [(float(i), 3.0, f"step {i}") for i in (1, 2, 3)])


def test_completion_is_recorded_and_replayed(toured: Toured) -> None:
    """completion/complete is a step keyed by its arguments, replayed as recorded."""

    async def complete(client: Client) -> list[str]:
        from mcp_types import PromptReference

        found = await client.complete(
            PromptReference(type="ref/prompt", name="review"),
            {"name": "code", "value": "p"},
        )
        return found.completion.values

    assert toured.answers[7] == ["python", "perl"]
    made = _calls(toured.path)
    replayed = _session(toured.path, "replay", complete, upstream=False)
    assert replayed == ["python", "perl"]
    assert _calls(toured.path) == made
    assert made.count("complete") == 1
    store = _store(toured.path)
    steps = record_steps(store.load(store.list()[0].execution_id))
    (step,) = [s for s in steps if s.name == "mcp:completion/complete"]
    assert step.args["argument"] == {"name": "code", "value": "p"}
    store.close()


def test_replay_miss_names_the_tool_and_the_nearest_call(toured: Toured) -> None:
    """A call the record does not hold is a JSON-RPC error naming what is recorded."""

    async def miss(client: Client) -> str:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("add", {"a": 1, "b": 5})
        return str(caught.value)

    text = _session(toured.path, "replay", miss, upstream=False)
    assert "tools/call:add" in text
    assert "'b': 2" in text
    assert "differ at b" in text


def test_a_request_of_the_servers_own_is_a_step_of_its_call(tmp_path: Path) -> None:
    """roots/list asked mid-call: recorded with the answer, asked again in a replay."""
    asked_for: list[str] = []

    async def on_roots(context: Any) -> Any:
        from mcp_types import ListRootsResult, Root

        asked_for.append("roots")
        return ListRootsResult(roots=[Root(uri="file:///work", name="work")])

    def run(mode: str) -> str:
        params = StdioServerParameters(
            command=sys.executable,
            args=_proxy(tmp_path / "store", mode),
            env=_env(tmp_path / "calls.txt"),
        )

        async def session() -> str:
            # the initialize handshake: server requests need its back-channel
            async with Client(
                params,
                read_timeout_seconds=LIMIT,
                list_roots_callback=on_roots,
                mode="legacy",
            ) as client:
                return (await client.call_tool("roots", {})).content[0].text

        return asyncio.run(asyncio.wait_for(session(), LIMIT))

    assert run("record") == "file:///work"
    assert asked_for == ["roots"]
    assert run("replay") == "file:///work"  # the recorded answer
    assert asked_for == ["roots", "roots"]  # and the client was asked again
    store = _store(tmp_path)
    steps = record_steps(store.load(store.list()[0].execution_id))
    (call,) = [s for s in steps if s.name == "mcp:tools/call:roots"]
    (asked,) = [s for s in steps if s.name == "mcp:from-server:roots/list"]
    assert asked.parent == call.number
    assert asked.output == {"roots": [{"uri": "file:///work", "name": "work"}]}
    store.close()


def test_cache_forwards_only_misses(toured: Toured, tmp_path: Path) -> None:
    """In cache mode a recorded call is served; a new one reaches the server."""

    async def calls(client: Client) -> list[Any]:
        return [
            _dump(await client.call_tool("counter", {})),
            _dump(await client.call_tool("add", {"a": 2, "b": 2})),
        ]

    shutil.copytree(toured.path, tmp_path, dirs_exist_ok=True)  # counter, add 1+2
    made = _calls(tmp_path)
    cached = _session(tmp_path, "cache", calls)
    assert cached[0] == toured.answers[2]
    assert cached[1]["content"][0]["text"] == "4"
    assert _calls(tmp_path) == [*made, "add"]
    store = _store(tmp_path)
    newest = store.load(store.list()[0].execution_id)
    sources = {s.name: s.source for s in record_steps(newest)}
    assert sources["mcp:tools/call:counter"] == "record"
    assert sources["mcp:tools/call:add"] == "live"
    store.close()


def test_a_destructive_tool_is_forwarded_every_time(tmp_path: Path) -> None:
    """destructiveHint and --side-effect tools are never answered from the cache."""

    async def calls(client: Client) -> None:
        await client.list_tools()  # where destructiveHint is learned
        await client.call_tool("delete", {"item": "x"})
        await client.call_tool("add", {"a": 1, "b": 1})

    _session(tmp_path, "record", calls)
    _session(tmp_path, "cache", calls, "--side-effect", "add")
    _session(tmp_path, "cache", calls)
    assert _calls(tmp_path) == ["delete", "add", "delete", "add", "delete"]


def test_notifications_and_slow_calls_do_not_block(tmp_path: Path) -> None:
    """A fast call answers while a slow one is in flight, progress flows meanwhile."""

    async def calls(client: Client) -> tuple[list[str], list[float]]:
        order: list[str] = []
        progress: list[float] = []

        async def on_progress(done: float, total: float | None, message: str | None):
            progress.append(done)

        async def slow() -> None:
            await client.call_tool("slow", {"seconds": 1.0})
            order.append("slow")

        async def fast() -> None:
            await asyncio.sleep(0.1)
            await client.call_tool("steps", {"count": 2}, progress_callback=on_progress)
            order.append("steps")

        await asyncio.gather(slow(), fast())
        return order, progress

    order, progress = _session(tmp_path, "record", calls)
    assert order == ["steps", "slow"]
    assert progress == [1.0, 2.0]


def test_an_upstream_killed_mid_session_leaves_an_incomplete_record(
    tmp_path: Path,
) -> None:
    """SIGKILLed mid-call: the record is incomplete; forced replay serves it."""
    pid_file = tmp_path / "upstream.pid"

    async def calls(client: Client) -> str:
        await client.call_tool("add", {"a": 1, "b": 2})
        slow = asyncio.ensure_future(client.call_tool("slow", {"seconds": 20.0}))
        for _ in range(600):  # bounded: 30 s
            if "slow" in _calls(tmp_path):
                break
            await asyncio.sleep(0.05)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)
        with pytest.raises(MCPError) as caught:
            await slow
        return str(caught.value)

    os.environ["MCP_TEST_PID"] = str(pid_file)
    try:
        text = _session(tmp_path, "record", calls)
    finally:
        del os.environ["MCP_TEST_PID"]
    assert "exited" in text
    store = _store(tmp_path)
    record = store.load(store.list()[0].execution_id)
    assert record.header.status.value == "incomplete"
    assert record.header.replayable_reason is not None
    steps = {s.name: s for s in record_steps(record)}
    assert steps["mcp:tools/call:add"].outcome == "success"
    assert steps["mcp:tools/call:slow"].outcome == "error"
    store.close()
    # not replayable without --force (exit 4, and the client is told nothing)
    refused = subprocess.run(
        [sys.executable, *_proxy(tmp_path / "store", "replay", upstream=False)],
        input=b"",
        capture_output=True,
        env=_env(tmp_path / "calls.txt"),
        timeout=LIMIT,
        check=False,
    )
    assert refused.returncode == 4, refused.stderr
    assert b"execution_incomplete" in refused.stderr

    async def again(client: Client) -> tuple[str, str]:
        added = await client.call_tool("add", {"a": 1, "b": 2})
        with pytest.raises(MCPError) as caught:
            await client.call_tool("slow", {"seconds": 20.0})
        return added.content[0].text, str(caught.value)

    made = _calls(tmp_path)
    added, cut = _session(tmp_path, "replay", again, "--force", upstream=False)
    assert added == "3"
    assert "in flight when the upstream exited" in cut
    assert _calls(tmp_path) == made


#: What an MCP client sends first.
_HANDSHAKE = (
    {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
)


def test_the_proxy_exits_1_naming_the_incomplete_record(tmp_path: Path) -> None:
    """An upstream that dies mid-session: exit 1, and stderr names the record."""
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "crash", "arguments": {}},
    }
    with subprocess.Popen(
        [sys.executable, *_proxy(tmp_path / "store", "record")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=_env(tmp_path / "calls.txt"),
    ) as proxy:
        assert proxy.stdin is not None
        assert proxy.stdout is not None
        assert proxy.stderr is not None
        try:
            # stdin stays open: the proxy ends the session itself
            for message in (*_HANDSHAKE, call):
                proxy.stdin.write(json.dumps(message).encode() + b"\n")
            proxy.stdin.flush()
            proxy.wait(LIMIT)
        finally:
            proxy.kill()
            proxy.wait(LIMIT)
        out, err = proxy.stdout.read(), proxy.stderr.read()
    assert proxy.returncode == 1, err
    _, answer = (json.loads(line) for line in out.splitlines())
    assert answer["error"]["code"] == -32002
    store = _store(tmp_path)
    (summary,) = store.list()
    assert summary.execution_id.encode() in err
    assert b"left incomplete" in err
    assert summary.status.value == "incomplete"
    store.close()


def test_malformed_json_gets_a_parse_error(toured: Toured) -> None:
    """A line that is not JSON is answered with -32700, and the session goes on."""
    done = subprocess.run(
        [sys.executable, *_proxy(toured.path / "store", "replay", upstream=False)],
        input=b'not json\n{"jsonrpc": "2.0", "id": 7, "method": "ping"}\n',
        capture_output=True,
        env=_env(toured.path / "calls.txt"),
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    first, second = (json.loads(line) for line in done.stdout.splitlines())
    assert first["error"]["code"] == -32700
    assert second == {"jsonrpc": "2.0", "id": 7, "result": {}}


def test_a_cancelled_call_is_recorded_and_the_session_goes_on(tmp_path: Path) -> None:
    """The client gives up on a slow call; the step says so and later calls work."""

    async def calls(client: Client) -> Any:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(client.call_tool("slow", {"seconds": 3.0}), 0.3)
        return _dump(await client.call_tool("add", {"a": 2, "b": 3}))

    answer = _session(tmp_path, "record", calls)
    assert answer["content"][0]["text"] == "5"
    store = _store(tmp_path)
    record = store.load(store.list()[0].execution_id)
    slow = next(s for s in record_steps(record) if s.name == "mcp:tools/call:slow")
    assert slow.outcome == "error"
    assert slow.error is not None
    assert slow.error["type"] == "ClientCancelled"
    store.close()

    async def again(client: Client) -> str:
        with pytest.raises(MCPError) as caught:
            await client.call_tool("slow", {"seconds": 3.0})
        return str(caught.value)

    # a cancelled call holds no answer: a replay does not serve it
    assert "cancelled by the client" in _session(
        tmp_path, "replay", again, upstream=False
    )


def test_cache_sessions_carry_what_earlier_ones_learned(tmp_path: Path) -> None:
    """Each cache session records its hits too: the next one answers them all."""

    async def both(client: Client) -> list[str]:
        added = await client.call_tool("add", {"a": 1, "b": 2})
        counted = await client.call_tool("counter", {})
        return [added.content[0].text, counted.content[0].text]

    _session(tmp_path, "record", lambda c: c.call_tool("add", {"a": 1, "b": 2}))
    first = _session(tmp_path, "cache", both)  # add served, counter forwarded
    second = _session(tmp_path, "cache", both)  # both served, from the first
    assert first == second == ["3", "1"]
    assert _calls(tmp_path) == ["add", "counter"]


def _running(pid: int) -> bool:
    """Whether process ``pid`` still runs (a zombie, dead and unreaped, does not)."""
    shown = subprocess.run(
        ["ps", "-o", "stat=", "-p", str(pid)],
        capture_output=True,
        text=True,
        check=False,
    )
    state = shown.stdout.strip()
    return bool(state) and not state.startswith("Z")


def test_the_upstream_dies_with_a_sigkilled_proxy(tmp_path: Path) -> None:
    """SIGKILL the proxy mid-call: its upstream, a grandchild, is gone soon after."""
    pid_file = tmp_path / "upstream.pid"
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "hang", "arguments": {}},
    }
    # a shell that starts the server (as npx does): the server is not the
    # proxy's child, and it does not read its input while the call runs
    fake = Path(__file__).with_name("fake_upstream.py")
    upstream = ["sh", "-c", f'"{sys.executable}" "{fake}"; exit 0']
    args = [*_proxy(tmp_path / "store", "record", upstream=False), "--", *upstream]
    env = {**_env(tmp_path / "calls.txt"), "MCP_TEST_PID": str(pid_file)}
    with subprocess.Popen(
        [sys.executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    ) as proxy:
        assert proxy.stdin is not None
        try:
            for message in (*_HANDSHAKE, call):
                proxy.stdin.write(json.dumps(message).encode() + b"\n")
            proxy.stdin.flush()
            for _ in range(600):  # bounded: 30 s, until the call is running
                if pid_file.exists() and pid_file.read_text():
                    break
                assert proxy.poll() is None, "the proxy exited"
                time.sleep(0.05)
            server = int(pid_file.read_text())
            assert _running(server)
        finally:
            proxy.kill()
            proxy.wait(LIMIT)
    for _ in range(600):  # bounded: 30 s
        if not _running(server):
            break
        time.sleep(0.05)
    assert not _running(server), "the upstream outlived the proxy"


def test_a_destructive_tool_is_known_without_a_listing(tmp_path: Path) -> None:
    """A cache client that never lists tools: a destructive tool runs every time."""

    async def twice(client: Client) -> None:
        await client.call_tool("delete", {"item": "x"})
        await client.call_tool("delete", {"item": "x"})

    _session(tmp_path, "record", lambda c: c.call_tool("delete", {"item": "x"}))
    _session(tmp_path, "cache", twice)
    assert _calls(tmp_path) == ["delete", "delete", "delete"]
    store = _store(tmp_path)
    cached = store.load(store.list()[0].execution_id)
    names = [s.name for s in record_steps(cached)]
    assert names.count("mcp:tools/list") >= 1  # the proxy asked the upstream itself
    store.close()


def test_a_cache_session_answers_its_own_repeated_call(tmp_path: Path) -> None:
    """In cache mode a call forwarded once answers the same session's next one."""

    async def twice(client: Client) -> list[str]:
        first = await client.call_tool("counter", {})
        second = await client.call_tool("counter", {})
        return [first.content[0].text, second.content[0].text]

    assert _session(tmp_path, "cache", twice) == ["1", "1"]
    assert _calls(tmp_path) == ["counter"]
    store = _store(tmp_path)
    record = store.load(store.list()[0].execution_id)
    steps = [s for s in record_steps(record) if s.name == "mcp:tools/call:counter"]
    assert [s.source for s in steps] == ["live", "record"]
    assert steps[1].served_from == record.execution_id
    store.close()


def test_replay_answers_from_every_session_of_the_upstream(
    toured: Toured, tmp_path: Path
) -> None:
    """Calls recorded in separate sessions are all answered by one replay session."""
    shutil.copytree(toured.path, tmp_path, dirs_exist_ok=True)  # add 1+2, the memo
    _session(tmp_path, "record", lambda c: c.call_tool("add", {"a": 3, "b": 4}))

    async def all_of_them(client: Client) -> list[str]:
        one = await client.call_tool("add", {"a": 1, "b": 2})
        two = await client.call_tool("add", {"a": 3, "b": 4})
        memo = await client.read_resource("memo://greeting")
        return [one.content[0].text, two.content[0].text, memo.contents[0].text]

    made = _calls(tmp_path)
    assert _session(tmp_path, "replay", all_of_them, upstream=False) == [
        "3",
        "7",
        "hello",
    ]
    assert _calls(tmp_path) == made


def test_the_sdk_client_replays_a_session_whose_listing_changed_later(
    tmp_path: Path,
) -> None:
    """A listing before the list_changed is replayed; one asked after it is not."""

    async def listing_then_change(client: Client) -> list[str]:
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        await client.call_tool("announce", {})
        await asyncio.sleep(1.0)  # the server's list_changed arrives meanwhile
        return listed

    async def asked_again(client: Client) -> str:
        await listing_then_change(client)
        with pytest.raises(MCPError) as caught:
            await client.list_resources()  # after the change: stale
        return str(caught.value)

    def legacy(mode: str, body: Body, *, upstream: bool = True) -> Any:
        # the initialize handshake: a message outside any request needs it
        params = StdioServerParameters(
            command=sys.executable,
            args=_proxy(tmp_path / "store", mode, upstream=upstream),
            env=_env(tmp_path / "calls.txt"),
        )

        async def run() -> Any:
            async with Client(params, read_timeout_seconds=LIMIT, mode="legacy") as c:
                return await body(c)

        return asyncio.run(asyncio.wait_for(run(), LIMIT))

    recorded = legacy("record", listing_then_change)
    store = _store(tmp_path)
    names = [s.name for s in record_steps(store.load(store.list()[0].execution_id))]
    store.close()
    assert "mcp:notifications/resources/list_changed" in names
    assert legacy("replay", listing_then_change, upstream=False) == recorded
    assert "resources/list" in legacy("replay", asked_again, upstream=False)


def test_log_messages_during_a_call_are_recorded_and_replayed_in_order(
    tmp_path: Path,
) -> None:
    """notifications/message sent mid-call: steps of the call, replayed in turn."""

    async def chat(params: StdioServerParameters) -> tuple[str, list[Any]]:
        heard: list[Any] = []

        async def on_log(params: Any) -> None:
            heard.append(("log", params.level, params.data))

        async def on_progress(done: float, total: float | None, message: str | None):
            heard.append(("progress", done))

        async with Client(
            params,
            read_timeout_seconds=LIMIT,
            logging_callback=on_log,
            log_level="info",
        ) as logged:
            answer = await logged.call_tool(
                "chatty", {"count": 2}, progress_callback=on_progress
            )
        return answer.content[0].text, heard

    def talk(mode: str) -> Any:
        params = StdioServerParameters(
            command=sys.executable,
            args=_proxy(tmp_path / "store", mode, upstream=mode != "replay"),
            env=_env(tmp_path / "calls.txt"),
        )
        return asyncio.run(asyncio.wait_for(chat(params), LIMIT))

    recorded = talk("record")
    assert recorded == (
        "2 lines",
        [
            ("log", "info", "line 1"),
            ("progress", 1.0),
            ("log", "info", "line 2"),
            ("progress", 2.0),
        ],
    )
    store = _store(tmp_path)
    record = store.load(store.list()[0].execution_id)
    steps = record_steps(record)
    (call,) = [s for s in steps if s.name == "mcp:tools/call:chatty"]
    logged = [s for s in steps if s.name == "mcp:notifications/message"]
    assert [s.parent for s in logged] == [call.number] * 2
    assert logged[0].args == {"level": "info", "data": "line 1"}
    store.close()
    assert talk("replay") == recorded
    assert _calls(tmp_path) == ["chatty"]  # the replay reached no server
