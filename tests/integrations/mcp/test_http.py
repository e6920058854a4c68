"""``intentusnet mcp proxy --upstream-url``: a streamable-HTTP server upstream."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.shared.exceptions import MCPError

from intentusnet import FileExecutionStore, record_steps

ROOT = Path(__file__).resolve().parents[3]
SERVER = Path(__file__).with_name("server.py")
LIMIT = 30.0
SECRET = "Bearer s3cret-token"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Upstream:
    """The test server over streamable HTTP: its URL, and the file of its calls."""

    url: str
    calls: Path

    def made(self) -> list[str]:
        """The calls that reached the server so far, in order."""
        return self.calls.read_text().split() if self.calls.exists() else []


@contextlib.contextmanager
def _server(port: int, calls: Path) -> Iterator[Upstream]:
    """The test server over streamable HTTP on 127.0.0.1:``port``; killed after."""
    env = {**os.environ, "MCP_TEST_CALLS": str(calls)}
    process = subprocess.Popen(
        [sys.executable, str(SERVER), "http", str(port)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + LIMIT
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                if time.monotonic() > deadline or process.poll() is not None:
                    pytest.fail("the HTTP test server did not start")
                time.sleep(0.05)
        yield Upstream(f"http://127.0.0.1:{port}/mcp", calls)
    finally:
        process.kill()
        process.wait(timeout=LIMIT)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Upstream]:
    """The test server on 127.0.0.1, one for the module's tests; killed afterwards.

    Its tools keep their state between sessions (``counter`` counts on), so the
    tests compare with what they recorded, and count calls from their start.
    """
    calls = tmp_path_factory.mktemp("upstream") / "calls.txt"
    with _server(_free_port(), calls) as started:
        yield started


def _session(tmp_path: Path, mode: str, body: Any, *options: str) -> Any:
    args = ["-m", "intentusnet.cli", "mcp", "proxy", "--store", str(tmp_path / "s")]
    params = StdioServerParameters(
        command=sys.executable,
        args=[*args, "--mode", mode, *options],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )

    async def run() -> Any:
        async with Client(params, read_timeout_seconds=LIMIT) as client:
            return await body(client)

    return asyncio.run(asyncio.wait_for(run(), LIMIT))


async def _tour(client: Client) -> tuple[list[Any], list[float]]:
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None):
        progress.append(done)

    tools = await client.list_tools()
    answers = [
        sorted(tool.name for tool in tools.tools),
        (await client.call_tool("counter", {})).model_dump(mode="json"),
        (await client.read_resource("memo://greeting")).model_dump(mode="json"),
        (
            await client.call_tool("steps", {"count": 2}, progress_callback=on_progress)
        ).model_dump(mode="json"),
    ]
    return answers, progress


def test_record_over_http_then_replay_without_it(
    tmp_path: Path, upstream: Upstream
) -> None:
    """Recorded through an HTTP upstream, replayed with it never asked again."""
    header = f"Authorization: {SECRET}"
    recorded, progress = _session(
        tmp_path, "record", _tour, "--upstream-url", upstream.url, "--header", header
    )
    assert progress == [1.0, 2.0]
    made = upstream.made()
    replayed, _ = _session(tmp_path, "replay", _tour)
    assert replayed == recorded
    assert upstream.made() == made
    store = FileExecutionStore(tmp_path / "s")
    record = store.load(store.list()[0].execution_id)
    assert record.envelope["payload"]["transport"] == "streamable-http"
    assert "mcp:tools/call:counter" in [s.name for s in record_steps(record)]
    store.close()
    for path in (tmp_path / "s").rglob("*"):
        if path.is_file():
            assert b"s3cret" not in path.read_bytes(), path


def test_cache_over_http_forwards_only_misses(
    tmp_path: Path, upstream: Upstream
) -> None:
    """A cache session with an HTTP upstream serves what the record holds."""

    async def calls(client: Client) -> list[str]:
        first = await client.call_tool("counter", {})
        second = await client.call_tool("add", {"a": 1, "b": 1})
        return [first.content[0].text, second.content[0].text]

    url = ("--upstream-url", upstream.url)
    before = upstream.made()
    counted = _session(tmp_path, "record", lambda c: c.call_tool("counter", {}), *url)
    assert _session(tmp_path, "cache", calls, *url) == [counted.content[0].text, "2"]
    assert upstream.made() == [*before, "counter", "add"]


def test_a_message_outside_any_request_reaches_the_client(
    tmp_path: Path, upstream: Upstream
) -> None:
    """The server's GET event stream is listened to: its notifications are forwarded."""
    args = ["-m", "intentusnet.cli", "mcp", "proxy", "--store", str(tmp_path / "s")]
    params = StdioServerParameters(
        command=sys.executable,
        args=[*args, "--upstream-url", upstream.url],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    seen: list[str] = []

    async def on_message(message: Any) -> None:
        seen.append(str(getattr(message, "method", type(message).__name__)))

    async def run() -> list[str]:
        # the initialize handshake: the stateless 2026 revision has no GET stream
        async with Client(
            params,
            read_timeout_seconds=LIMIT,
            message_handler=on_message,
            mode="legacy",
        ) as client:
            answer = await client.call_tool("announce", {})
            assert answer.content[0].text == "announced"
            for _ in range(200):  # bounded: 10 s
                if "notifications/resources/list_changed" in seen:
                    break
                await asyncio.sleep(0.05)
            return seen

    seen = asyncio.run(asyncio.wait_for(run(), LIMIT))
    assert "notifications/resources/list_changed" in seen


def test_an_unreachable_upstream_is_a_json_rpc_error(tmp_path: Path) -> None:
    """Nothing listens at the URL: the client's request gets -32002, not a hang."""

    url = f"http://127.0.0.1:{_free_port()}/mcp"
    # the client's first request (its handshake) is answered with the error,
    # which the SDK raises from inside its task group
    with pytest.raises(BaseExceptionGroup) as failed:
        _session(tmp_path, "record", lambda c: c.list_tools(), "--upstream-url", url)
    errors = _leaves(failed.value)
    assert any(isinstance(e, MCPError) and "did not answer" in str(e) for e in errors)


def _leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]


def test_listen_passes_the_clients_protocol_version_header_on(
    upstream: Upstream, tmp_path: Path
) -> None:
    """--listen to --upstream-url: the server sees the client's own version header.

    A request naming no revision in its body but 2026-07-28 in its header gets
    the server's own answer to that (its error), not one for a request with no
    version at all (an error with no id, which no client waits for).
    """
    import httpx

    from .test_listen import _serve_url

    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 2, "b": 3}},
    }
    headers = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "add",
    }

    def run(url: str) -> Any:
        with httpx.Client(timeout=LIMIT) as http:
            return _answered(http.post(url, json=call, headers=headers))

    (status, _, found), _ = _serve_url(
        tmp_path, "record", run, "--upstream-url", upstream.url
    )
    assert status == 400  # the server's status, passed on
    assert found["id"] == 1
    assert found["error"]["code"] == -32602  # the server's: _meta is missing


def _answered(answer: Any) -> tuple[int, str, Any]:
    """An HTTP answer's status, content type and last JSON-RPC message."""
    kind = answer.headers.get("content-type", "").partition(";")[0]
    if kind == "application/json":
        return answer.status_code, kind, answer.json()
    data = [
        json.loads(line.removeprefix("data: "))
        for line in answer.text.splitlines()
        if line.startswith("data: ") and line != "data: "
    ]
    return answer.status_code, kind, data[-1] if data else None


ACCEPT = {"accept": "application/json, text/event-stream"}


def test_an_http_error_with_no_id_answers_the_request_it_refused(
    upstream: Upstream, tmp_path: Path
) -> None:
    """The server's 400 with id null: the client gets 400 and that error, its id."""
    import httpx

    from .test_listen import _serve_url

    call = {"jsonrpc": "2.0", "id": 7, "method": "tools/list", "params": {}}

    def run(url: str) -> Any:
        with httpx.Client(timeout=LIMIT) as http:
            return _answered(http.post(url, json=call, headers=ACCEPT))

    # no session, no revision: the server refuses it (400, "Missing session ID")
    (status, kind, found), _ = _serve_url(
        tmp_path, "record", run, "--upstream-url", upstream.url
    )
    assert (status, kind) == (400, "application/json")  # not a 200 event stream
    assert found["id"] == 7
    assert found["error"]["code"] == -32600
    assert "session" in found["error"]["message"].lower()


def test_an_upstream_session_ended_is_404_for_the_client(tmp_path: Path) -> None:
    """The upstream restarted (its session gone): its 404 reaches the client as 404.

    A call before is answered 200 on an event stream; the same call after the
    restart gets the upstream's 404 and its JSON-RPC error, under the call's id.
    """
    import httpx

    from .test_listen import _serve_url

    port = _free_port()
    calls = tmp_path / "calls.txt"
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"},
        },
    }
    ready = {"jsonrpc": "2.0", "method": "notifications/initialized"}

    def call(n: int) -> dict[str, Any]:
        params = {"name": "add", "arguments": {"a": n, "b": 1}}
        return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}

    upstream = contextlib.ExitStack()
    first = upstream.enter_context(_server(port, calls))

    def run(url: str) -> list[Any]:
        with httpx.Client(timeout=LIMIT, headers=ACCEPT) as http:
            opened = http.post(url, json=init)
            session = {"mcp-session-id": opened.headers["mcp-session-id"]}
            http.post(url, json=ready, headers=session)
            before = _answered(http.post(url, json=call(1), headers=session))
            upstream.close()  # the upstream is killed, and started again:
            with _server(port, calls):  # a new process, which knows no session
                after = _answered(http.post(url, json=call(2), headers=session))
            return [before, after]

    with upstream:
        found, _ = _serve_url(tmp_path, "record", run, "--upstream-url", first.url)
    before, after = found
    assert before[:2] == (200, "text/event-stream")
    assert before[2]["result"]["content"][0]["text"] == "2"
    assert after[:2] == (404, "application/json")
    assert after[2]["id"] == 2
    assert "error" in after[2]


def test_a_stream_the_server_closes_mid_call_is_resumed(tmp_path: Path) -> None:
    """The server ends a call's event stream early: the proxy resumes it."""
    from . import conformancekit as kit

    port = kit.free_port()
    server = kit.server(port, tmp_path / "server.log")
    url = f"http://127.0.0.1:{port}/mcp"

    async def body(client: Client) -> str:
        # test_reconnection closes its stream after one log line (resumable:
        # a 2025 session), then logs again and answers
        return (await client.call_tool("test_reconnection", {})).content[0].text

    def run(mode: str) -> str:
        args = ["-m", "intentusnet.cli", "mcp", "proxy", "--store", str(tmp_path)]
        params = StdioServerParameters(
            command=sys.executable,
            args=[*args, "--mode", mode, "--upstream-url", url],
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )

        async def session() -> str:
            async with Client(params, read_timeout_seconds=LIMIT, mode="legacy") as c:
                return await body(c)

        return asyncio.run(asyncio.wait_for(session(), LIMIT))

    try:
        assert run("record") == "Reconnection test completed"
    finally:
        kit.stop(server)
    assert run("replay") == "Reconnection test completed"
