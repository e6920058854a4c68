"""``intentusnet mcp proxy --listen``: the client side over streamable HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client

from intentusnet import FileExecutionStore, record_steps

# each test starts the proxy and an upstream server: seconds each
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SERVER = Path(__file__).with_name("server.py")
LIMIT = 30.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _serve_url(
    tmp_path: Path, mode: str, body: Callable[[str], Any], *more: str
) -> tuple[Any, str]:
    """Start the proxy on a loopback port, run ``body(url)``, end it with SIGTERM."""
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
            result = body(f"http://127.0.0.1:{port}/mcp")
            proxy.send_signal(signal.SIGTERM)
            _, err = proxy.communicate(timeout=LIMIT)
        finally:
            if proxy.poll() is None:
                proxy.kill()
                proxy.wait(timeout=LIMIT)
    assert proxy.returncode == 0, err
    return result, err.decode()


def _serve(tmp_path: Path, mode: str, body: Any, *more: str) -> tuple[Any, str]:
    """``_serve_url`` with an SDK client running ``body(client)``."""

    def run(url: str) -> Any:
        async def session() -> Any:
            async with Client(url, read_timeout_seconds=LIMIT) as client:
                return await body(client)

        return asyncio.run(asyncio.wait_for(session(), LIMIT))

    return _serve_url(tmp_path, mode, run, *more)


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
    assert "replayed from exec-" in err
    assert (tmp_path / "calls.txt").read_text() == made


def _completed(store_root: Path, count: int) -> list[Any]:
    """Wait (bounded) until ``count`` records are completed; return them."""
    deadline = time.monotonic() + LIMIT
    while True:
        store = FileExecutionStore(store_root)
        try:
            done = [s for s in store.list() if s.status.value == "completed"]
            if len(done) >= count:
                return [store.load(s.execution_id) for s in done]
        finally:
            store.close()
        assert time.monotonic() < deadline, "the records were not closed"
        time.sleep(0.1)


def test_two_clients_at_once_are_two_sessions_and_two_records(tmp_path: Path) -> None:
    """Concurrent sessions: one upstream and one record each; DELETE closes it."""
    upstream = ("--", sys.executable, str(SERVER))

    async def both(url: str) -> list[Any]:
        async def one(tool: str, arguments: dict[str, Any]) -> list[str]:
            # the initialize handshake: each client gets a session id
            async with Client(url, read_timeout_seconds=LIMIT, mode="legacy") as c:
                first = await c.call_tool("counter", {})
                await asyncio.sleep(0.2)  # the other session's calls meanwhile
                second = await c.call_tool(tool, arguments)
                return [first.content[0].text, second.content[0].text]

        return await asyncio.gather(
            one("slow", {"seconds": 0.3}), one("add", {"a": 2, "b": 2})
        )

    def body(url: str) -> Any:
        answers = asyncio.run(asyncio.wait_for(both(url), LIMIT))
        # both clients sent DELETE on leaving: their records close now
        return answers, _completed(tmp_path / "store", 2)

    ((answers, records), err) = _serve_url(tmp_path, "record", body, *upstream)
    # each session has its own upstream: both counters start at 1
    assert answers == [["1", "slept 0.3"], ["1", "4"]]
    calls = sorted(
        sorted(s.name for s in record_steps(r) if "tools/call" in s.name)
        for r in records
    )
    assert calls == [
        ["mcp:tools/call:add", "mcp:tools/call:counter"],
        ["mcp:tools/call:counter", "mcp:tools/call:slow"],
    ]
    assert err.count("recorded exec-") == 2


def test_an_idle_session_ends_and_its_record_closes(tmp_path: Path) -> None:
    """A stateless client sends no DELETE: --idle ends its session."""
    upstream = ("--", sys.executable, str(SERVER))

    def body(url: str) -> Any:
        async def run() -> str:
            async with Client(url, read_timeout_seconds=LIMIT) as client:
                return (await client.call_tool("add", {"a": 1, "b": 1})).content[0].text

        answer = asyncio.run(asyncio.wait_for(run(), LIMIT))
        return answer, _completed(tmp_path / "store", 1)

    (answer, (record,)), _ = _serve_url(
        tmp_path, "record", body, "--idle", "1", *upstream
    )
    assert answer == "2"
    assert "mcp:tools/call:add" in [s.name for s in record_steps(record)]


def test_an_unknown_session_id_is_404(tmp_path: Path) -> None:
    """An id the proxy never gave is 404, as MCP asks; a body not JSON is -32700."""
    import httpx

    def body(url: str) -> tuple[int, int, Any]:
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        headers = {
            "mcp-session-id": "nope",
            "accept": "application/json, text/event-stream",
        }
        unknown = httpx.post(url, json=ping, headers=headers, timeout=LIMIT)
        # and a body that is not JSON: a parse error, and no session opened
        broken = httpx.post(url, content=b"{not json", timeout=LIMIT)
        return unknown.status_code, broken.status_code, broken.json()

    (status, broken, problem), _ = _serve_url(
        tmp_path, "record", body, "--", sys.executable, str(SERVER)
    )
    assert status == 404
    assert broken == 400
    assert problem["error"]["code"] == -32700
    store = FileExecutionStore(tmp_path / "store")
    assert store.list() == []  # no session was opened
    store.close()


def test_one_replay_proxy_answers_a_run_of_separate_sessions(tmp_path: Path) -> None:
    """Clients reconnecting per task: one replay proxy, upstream gone, all answered."""
    upstream = ("--", sys.executable, str(SERVER))
    tasks: list[tuple[str, dict[str, Any]]] = [
        ("add", {"a": 1, "b": 2}),
        ("add", {"a": 10, "b": 11}),
        ("steps", {"count": 2}),
        ("counter", {}),
    ]

    def run_each(url: str) -> list[str]:
        async def one(tool: str, arguments: dict[str, Any]) -> str:
            async with Client(url, read_timeout_seconds=LIMIT, mode="legacy") as c:
                await c.list_tools()
                return (await c.call_tool(tool, arguments)).content[0].text

        async def each() -> list[str]:
            return [await one(tool, arguments) for tool, arguments in tasks]

        return asyncio.run(asyncio.wait_for(each(), LIMIT * 2))

    recorded, _ = _serve_url(tmp_path, "record", run_each, *upstream)
    assert recorded == ["3", "21", "2 steps", "1"]
    made = (tmp_path / "calls.txt").read_text()
    replayed, err = _serve_url(tmp_path, "replay", run_each)
    assert replayed == recorded
    assert err.count("replayed from exec-") == len(tasks)
    assert (tmp_path / "calls.txt").read_text() == made


FULL_KEY = "mcp-full-key-0123456789"
READ_KEY = "mcp-read-key-0123456789"


def _rpc(
    url: str, message: dict[str, Any], key: str | None, session: str | None = None
) -> tuple[int, str | None, Any]:
    """POST one JSON-RPC message: the status, the session id and the last message."""
    import httpx

    headers = {"accept": "application/json, text/event-stream"}
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    if session is not None:
        headers["mcp-session-id"] = session
    answer = httpx.post(url, json=message, headers=headers, timeout=LIMIT)
    data = [
        line.removeprefix("data: ")
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]
    parsed = json.loads(data[-1]) if data else answer.json() if answer.text else None
    return answer.status_code, answer.headers.get("mcp-session-id"), parsed


def test_listening_with_keys_asks_every_request_for_one(tmp_path: Path) -> None:
    """With --api-keys-file: 401 without a key; a read-only key's session replays."""
    import httpx

    keys = tmp_path / "keys"
    keys.write_text(f"{FULL_KEY}\nro:{READ_KEY}\n")
    keys.chmod(0o600)
    fake = Path(__file__).with_name("fake_upstream.py")
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}

    def call(word: str, n: int) -> dict[str, Any]:
        params = {"name": "echo", "arguments": {"word": word}}
        return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}

    def body(url: str) -> dict[str, Any]:
        seen: dict[str, Any] = {
            "none": _rpc(url, init, None)[0],
            "wrong": _rpc(url, init, "wrong-key-0123456789")[0],
        }
        status, full, _ = _rpc(url, init, FULL_KEY)
        seen["full"] = status, _rpc(url, call("hi", 1), FULL_KEY, full)[2]
        seen["read in full"] = _rpc(url, call("hi", 2), READ_KEY, full)[0]
        assert full is not None
        ended = httpx.delete(
            url,
            headers={"mcp-session-id": full, "authorization": f"Bearer {FULL_KEY}"},
        )
        seen["deleted"] = ended.status_code
        _completed(tmp_path / "store", 1)  # the session's record is closed
        status, read, _ = _rpc(url, init, READ_KEY)
        seen["read"] = status, _rpc(url, call("hi", 1), READ_KEY, read)[2]
        seen["read new"] = _rpc(url, call("new", 2), READ_KEY, read)[2]
        return seen

    seen, err = _serve_url(
        tmp_path,
        "record",
        body,
        "--api-keys-file",
        str(keys),
        "--",
        sys.executable,
        str(fake),
    )
    assert seen["none"] == seen["wrong"] == 401
    assert seen["full"][0] == 200
    assert seen["full"][1]["result"]["content"][0]["text"] == '{"word": "hi"}'
    assert seen["read in full"] == 403
    assert seen["deleted"] == 200
    assert seen["read"][0] == 200
    assert seen["read"][1] == seen["full"][1]  # answered from the record
    assert "error" in seen["read new"]  # never forwarded
    assert err.count("recorded exec-") == 1
    assert "replayed from exec-" in err
    store = FileExecutionStore(tmp_path / "store")
    assert len(store.list()) == 1  # the read-only session recorded nothing
    store.close()


def test_two_clients_through_one_cache_proxy_never_share_private_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """cacheScope private: served again to its credential only, never to another.

    The clients with no credential are one client: what one was given, the
    next is served.
    """
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    def run(url: str) -> list[tuple[str, str]]:
        async def read(credential: str | None) -> tuple[str, str]:
            headers = {} if credential is None else {"authorization": credential}
            http = httpx2.AsyncClient(headers=headers, timeout=LIMIT)
            transport = streamable_http_client(url, http_client=http)
            async with http, Client(transport, read_timeout_seconds=LIMIT) as client:
                found = await client.read_resource("memo://count")
                answer = found.model_dump(mode="json", by_alias=True)
                return answer["cacheScope"], answer["contents"][0]["text"]

        async def clients() -> list[tuple[str, str]]:
            order = ["Bearer one", "Bearer two", "Bearer one", None, None]
            return [await read(credential) for credential in order]

        return asyncio.run(asyncio.wait_for(clients(), LIMIT * 2))

    upstream = ("--", sys.executable, str(SERVER))
    monkeypatch.setenv("MCP_TEST_PRIVATE_TTL_MS", "60000")  # read by the server
    answers, _ = _serve_url(tmp_path, "cache", run, *upstream)
    assert answers == [
        ("private", "1"),  # client one: forwarded
        ("private", "2"),  # client two: forwarded, not client one's
        ("private", "1"),  # client one again: its own answer, served
        ("private", "3"),  # no credential: forwarded, not one or two's
        ("private", "3"),  # no credential again: the anonymous client's answer
    ]
    made = (tmp_path / "calls.txt").read_text().split()
    assert made.count("count") == 3


def test_listen_refuses_rebinding_and_headers_that_do_not_match_the_body(
    tmp_path: Path,
) -> None:
    """Host/Origin not allowed: 421/403; Mcp-Name not the body's: 400, -32020."""
    import json

    import httpx

    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "add", "arguments": {"a": 2, "b": 3}, "_meta": meta},
    }
    good = {
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2026-07-28",
        "mcp-method": "tools/call",
        "mcp-name": "add",
    }

    def run(url: str) -> list[Any]:
        with httpx.Client(timeout=LIMIT) as http:

            def post(**headers: str) -> httpx.Response:
                sent = {**good, **{k.replace("_", "-"): v for k, v in headers.items()}}
                return http.post(url, json=call, headers=sent)

            answered = post()
            data = [
                json.loads(line.removeprefix("data: "))
                for line in answered.text.splitlines()
                if line.startswith("data: ")
            ]
            mismatch = post(mcp_name="sub")
            return [
                (answered.status_code, data[-1]["result"]["content"][0]["text"]),
                (mismatch.status_code, mismatch.json()["error"]["code"]),
                post(host="evil.example").status_code,
                post(origin="http://evil.example").status_code,
                post(host="mcp.test", origin="http://mcp.test").status_code,
            ]

    upstream = ("--", sys.executable, str(SERVER))
    found, _ = _serve_url(
        tmp_path, "record", run, "--allow-host", "mcp.test", *upstream
    )
    assert found == [(200, "5"), (400, -32020), 421, 403, 200]
    made = (tmp_path / "calls.txt").read_text().split()
    assert made == ["add", "add"]  # the refused requests reached no server


ACCEPT = {"accept": "application/json, text/event-stream"}
INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
READY = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _sse(lines: Any) -> Any:
    """The events of an SSE body's lines, each a dict of its fields."""
    event: dict[str, str] = {}
    for line in lines:
        if not line:
            if event:
                yield event
            event = {}
            continue
        field, _, value = line.partition(":")
        event[field] = value.removeprefix(" ")
    if event:
        yield event


def _opened(http: Any, url: str) -> dict[str, str]:
    """A session opened with initialize: the header that names it."""
    opened = http.post(url, json=INIT)
    session = {"mcp-session-id": opened.headers["mcp-session-id"]}
    assert http.post(url, json=READY, headers=session).status_code == 202
    return session


def _paced(n: int) -> dict[str, Any]:
    params = {
        "name": "paced",
        "arguments": {"count": 4, "seconds": 0.3},
        "_meta": {"progressToken": f"p{n}"},
    }
    return {"jsonrpc": "2.0", "id": n, "method": "tools/call", "params": params}


def _cut_and_resume(url: str) -> dict[str, Any]:
    """A call's stream cut after its first progress event, then resumed by GET.

    Then: a second call's ids, the held streams' bound (``HELD_STREAMS``)
    walked with pings, and the GETs that cannot resume.
    """
    import httpx

    seen: dict[str, Any] = {}
    with httpx.Client(timeout=LIMIT, headers=ACCEPT) as http:
        session = _opened(http, url)
        first: list[dict[str, str]] = []
        with http.stream("POST", url, json=_paced(1), headers=session) as answer:
            for event in _sse(answer.iter_lines()):
                first.append(event)
                if "progress" in event.get("data", ""):
                    break  # the connection is closed here: the stream is cut
        time.sleep(0.45)  # one more event is sent meanwhile, to nobody
        again = {**session, "last-event-id": first[-1]["id"]}
        with http.stream("GET", url, headers=again) as resumed:
            seen["resumed status"] = resumed.status_code
            rest = list(_sse(resumed.iter_lines()))
        seen["first"], seen["rest"] = first, rest
        second = http.post(url, json=_paced(2), headers=session)
        seen["second"] = [e.get("id") for e in _sse(second.text.splitlines())]
        last = {**session, "last-event-id": rest[-1]["id"]}
        ping = {"jsonrpc": "2.0", "method": "ping"}
        # answered: streams 1 (initialize), 2, 3 (the calls) and the pings';
        # HELD_STREAMS + 1 of them: stream 1 is dropped, 2 is the oldest held
        for n in range(HELD_STREAMS - 2):
            http.post(url, json={**ping, "id": 100 + n}, headers=session)
        seen["held"] = _sse(http.get(url, headers=last).text.splitlines())
        seen["held"] = [e.get("id") for e in seen["held"]]
        http.post(url, json={**ping, "id": 99}, headers=session)  # one more
        seen["dropped"] = http.get(url, headers=last).status_code
        seen["unknown"] = http.get(
            url, headers={**session, "last-event-id": "77-0"}
        ).status_code
        seen["no id"] = http.get(url, headers=session).status_code
        seen["no session"] = http.get(
            url, headers={"last-event-id": first[-1]["id"]}
        ).status_code
        stateless = http.post(url, json={**ping, "id": 5})
        seen["stateless"] = list(_sse(stateless.text.splitlines()))
    return seen


HELD_STREAMS = 32  # listen.HELD_STREAMS, as documented


def _check_resumed(seen: dict[str, Any]) -> None:
    first, rest = seen["first"], seen["rest"]
    # the first event: an id, the retry, no data; then the first progress
    assert first[0] == {"id": "2-0", "retry": "1000", "data": ""}
    assert first[1]["id"] == "2-1"
    assert json.loads(first[1]["data"])["params"]["progress"] == 1
    assert seen["resumed status"] == 200
    assert rest[0] == {"id": "2-1", "retry": "1000", "data": ""}
    ids = [e["id"] for e in rest[1:]]
    assert ids == ["2-2", "2-3", "2-4", "2-5"]  # missed, then the rest, in order
    messages = [json.loads(e["data"]) for e in rest[1:]]
    assert [m["params"]["progress"] for m in messages[:3]] == [2, 3, 4]
    assert messages[3]["id"] == 1
    assert messages[3]["result"]["content"][0]["text"] == "4 paced"
    assert seen["second"] == ["3-0", "3-1", "3-2", "3-3", "3-4", "3-5"]
    assert seen["held"] == ["2-5"]  # the priming event names where it resumes
    assert seen["dropped"] == 404  # past HELD_STREAMS answered streams
    assert seen["unknown"] == 404
    assert seen["no id"] == 405  # no stream of its own outside requests
    assert seen["no session"] == 405  # the stateless revision does not resume
    assert [set(e) for e in seen["stateless"]] == [{"event", "data"}]  # no ids


def test_a_cut_stream_is_resumed_with_last_event_id_recording_and_replaying(
    tmp_path: Path,
) -> None:
    """GET with Last-Event-ID: the missed events in order, then the rest; bounded."""
    upstream = ("--", sys.executable, str(SERVER))
    recorded, _ = _serve_url(tmp_path, "record", _cut_and_resume, *upstream)
    _check_resumed(recorded)
    made = (tmp_path / "calls.txt").read_text().split()
    replayed, err = _serve_url(tmp_path, "replay", _cut_and_resume)
    _check_resumed(replayed)
    assert "replayed from exec-" in err
    assert (tmp_path / "calls.txt").read_text().split() == made  # no server asked


def test_a_stream_holds_its_newest_events_only() -> None:
    """HELD_EVENTS: the oldest go first; a cursor before them cannot resume."""
    from intentusnet.integrations.mcp.listen import HELD_EVENTS, Stream

    stream = Stream(1)
    for n in range(HELD_EVENTS + 1):
        stream.add(str(n).encode())
    stream.finish()
    assert not stream.holds(0)  # event 1 is gone
    assert stream.holds(1)
    assert not stream.holds(HELD_EVENTS + 2)  # never sent

    async def rest() -> list[int]:
        return [number async for number, _ in stream.after(HELD_EVENTS - 1)]

    assert asyncio.run(rest()) == [HELD_EVENTS, HELD_EVENTS + 1]


def test_a_close_ends_a_connection_and_a_resumption_passes_over_it() -> None:
    """A close ends the connection reaching it, not one resuming just before it."""
    from intentusnet.integrations.mcp.listen import Stream

    stream = Stream(1)
    stream.add(b"a")
    stream.close(100)
    stream.add(b"b")
    stream.finish()

    async def events(seen: int, resuming: bool) -> list[tuple[int, bytes | int]]:
        return [event async for event in stream.after(seen, resuming)]

    assert asyncio.run(events(0, False)) == [(1, b"a"), (2, 100)]
    assert asyncio.run(events(2, True)) == [(3, b"b")]  # after the close
    assert asyncio.run(events(1, True)) == [(3, b"b")]  # the message before it
    assert asyncio.run(events(0, True)) == [(1, b"a"), (2, 100)]
    assert stream.last() == b"b"


def test_the_sdk_client_resumes_a_cut_stream(tmp_path: Path) -> None:
    """The SDK client, its connection cut mid-call, reconnects and gets every event."""
    relay_port = _free_port()
    cuts: list[int] = []

    async def pipe(
        reader: asyncio.StreamReader, writer: asyncio.StreamWriter, watch: bool
    ) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
                if watch and not cuts and b"notifications/progress" in data:
                    cuts.append(1)  # the first progress passed: cut here
                    return
        finally:
            writer.close()

    def run(url: str) -> Any:
        target = int(url.split(":")[2].split("/")[0])

        async def relay(
            reader: asyncio.StreamReader, writer: asyncio.StreamWriter
        ) -> None:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", target)
            sending = asyncio.create_task(pipe(reader, up_writer, False))
            await pipe(up_reader, writer, True)
            sending.cancel()
            up_writer.close()

        async def session() -> Any:
            progress: list[float] = []

            async def on_progress(done: float, total: float | None, _: str | None):
                progress.append(done)

            server = await asyncio.start_server(relay, "127.0.0.1", relay_port)
            async with server:
                relayed = f"http://127.0.0.1:{relay_port}/mcp"
                async with Client(
                    relayed, read_timeout_seconds=LIMIT, mode="legacy"
                ) as client:
                    answer = await client.call_tool(
                        "paced",
                        {"count": 3, "seconds": 0.3},
                        progress_callback=on_progress,
                    )
            return answer.content[0].text, progress

        return asyncio.run(asyncio.wait_for(session(), LIMIT))

    upstream = ("--", sys.executable, str(SERVER))
    allow = ("--allow-host", f"127.0.0.1:{relay_port}")
    (answer, progress), _ = _serve_url(tmp_path, "record", run, *allow, *upstream)
    assert cuts == [1]  # the stream was cut once
    assert answer == "3 paced"
    assert progress == [1.0, 2.0, 3.0]


def test_a_cancelled_requests_stream_ends_and_its_session_can_go_idle(
    tmp_path: Path,
) -> None:
    """notifications/cancelled: its stream ends with no answer; --idle then ends it."""
    import httpx

    def run(url: str) -> Any:
        with httpx.Client(timeout=LIMIT, headers=ACCEPT) as http:
            session = _opened(http, url)
            params = {"name": "slow", "arguments": {"seconds": 20}}
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
            events = []
            with http.stream(
                "POST", url, json={**call, "params": params}, headers=session
            ) as answer:
                for event in _sse(answer.iter_lines()):
                    events.append(event)
                    if len(events) == 1:  # the stream is open: cancel the call
                        cancel = {
                            "jsonrpc": "2.0",
                            "method": "notifications/cancelled",
                            "params": {"requestId": 1, "reason": "enough"},
                        }
                        http.post(url, json=cancel, headers=session)
        return events, _completed(tmp_path / "store", 1)

    (events, records), _ = _serve_url(
        tmp_path, "record", run, "--idle", "1", "--", sys.executable, str(SERVER)
    )
    assert events == [{"id": "2-0", "retry": "1000", "data": ""}]  # no answer
    assert len(records) == 1  # the session went idle and its record closed


V2026 = "2026-07-28"
META_2026 = {
    "io.modelcontextprotocol/protocolVersion": V2026,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "test", "version": "1"},
}


def _stateless(url: str, method: str, params: dict[str, Any]) -> tuple[int, Any]:
    """POST one request with no session, its revision's headers if it names one."""
    import httpx

    headers = {"accept": "application/json, text/event-stream", "mcp-method": method}
    if "_meta" in params:
        headers["mcp-protocol-version"] = V2026
    if "name" in params:
        headers["mcp-name"] = params["name"]
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    answer = httpx.post(url, json=message, headers=headers, timeout=LIMIT)
    data = [
        line.removeprefix("data: ")
        for line in answer.text.splitlines()
        if line.startswith("data: ")
    ]
    return answer.status_code, json.loads(data[-1]) if data else answer.json()


def test_each_revisions_stateless_requests_have_an_upstream_of_their_own(
    tmp_path: Path,
) -> None:
    """A request naming no revision first no longer sets a stdio server's era."""
    counter = {"name": "counter", "arguments": {}, "_meta": META_2026}

    def body(url: str) -> list[tuple[int, Any]]:
        return [
            _stateless(url, "server/discover", {}),  # a 2025-style first request
            _stateless(url, "tools/call", counter),
            _stateless(url, "ping", {"_meta": META_2026}),  # no ping in 2026
        ]

    upstream = ("--", sys.executable, str(SERVER))
    recorded, _ = _serve_url(tmp_path, "record", body, *upstream)
    status, answer = recorded[1]
    assert status == 200
    assert answer["result"]["content"][0]["text"] == "1"  # not -32600 (era)
    assert recorded[2][0] == 404  # the revision's status for -32601
    assert recorded[2][1]["error"]["code"] == -32601
    store = FileExecutionStore(tmp_path / "store")
    assert len(store.list()) == 2  # a session (and a process) per revision
    store.close()
    replayed, _ = _serve_url(tmp_path, "replay", body)
    assert replayed == recorded


def _polled(url: str) -> dict[str, Any]:
    """A call whose server closes its stream mid-call; then resumed by GET."""
    import httpx

    call = {"name": "test_reconnection", "arguments": {}}
    message = {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call}
    with httpx.Client(timeout=LIMIT, headers=ACCEPT) as http:
        session = _opened(http, url)
        posted = http.post(url, json=message, headers=session)  # to its close
        first = list(_sse(posted.text.splitlines()))
        again = {**session, "last-event-id": first[-1]["id"]}
        resumed = http.get(url, headers=again)
        rest = list(_sse(resumed.text.splitlines()))
        # a client that resumes from the message before the close: the same
        before = {**session, "last-event-id": first[-2]["id"]}
        also = list(_sse(http.get(url, headers=before).text.splitlines()))
    return {"first": first, "rest": rest, "also": also}


def _check_polled(seen: dict[str, Any]) -> None:
    first, rest = seen["first"], seen["rest"]
    assert first[0] == {"id": "2-0", "retry": "1000", "data": ""}
    # closed as the server closed it: no answer, an id and the server's retry
    closed = first[-1]["id"]
    assert first[-1] == {"id": closed, "retry": "100", "data": ""}
    assert rest[0] == {"id": closed, "retry": "1000", "data": ""}
    events = [e for e in first[1:-1] + rest[1:] if e.get("data")]
    messages = [json.loads(e["data"]) for e in events]
    assert "result" not in str(first)  # the answer came after the close only
    assert [m["params"]["data"] for m in messages[:2]] == [
        "Before disconnect",
        "After reconnect",
    ]
    assert messages[2]["id"] == 7
    assert messages[2]["result"]["content"][0]["text"] == "Reconnection test completed"
    assert len(messages) == 3
    assert seen["also"][1:] == rest[1:]  # passed over the close it resumed after


def test_a_stream_the_server_closes_mid_call_closes_and_resumes_replayed_too(
    tmp_path: Path,
) -> None:
    """SEP-1699: the client's stream closes where the server's did; GET resumes it."""
    from . import conformancekit as kit

    port = kit.free_port()
    server = kit.server(port, tmp_path / "server.log")
    try:
        upstream = ("--upstream-url", f"http://127.0.0.1:{port}/mcp")
        recorded, _ = _serve_url(tmp_path, "record", _polled, *upstream)
    finally:
        kit.stop(server)
    _check_polled(recorded)
    replayed, err = _serve_url(tmp_path, "replay", _polled)  # the server is gone
    _check_polled(replayed)
    assert "replayed from exec-" in err
    store = FileExecutionStore(tmp_path / "store")
    (summary,) = store.list()
    steps = list(record_steps(store.load(summary.execution_id)))
    store.close()
    assert replayed == recorded  # the same events, ids and close
    call = next(s for s in steps if s.name == "mcp:tools/call:test_reconnection")
    (closed,) = [s for s in steps if s.name == "mcp:stream-closed"]
    assert closed.parent == call.number
    assert closed.args == {"retry": 100}
