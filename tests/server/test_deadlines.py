"""Deadlines on every listener: ``serve``, ``gateway``, ``ui``, ``mcp proxy --listen``.

Each command is started for real with ``--body-timeout 2 --keep-alive 1`` and
held by 200 connections trickling a body: a normal request is answered
meanwhile, and every slow one is answered 408 and closed within the body
deadline + 1 s. The rest (the cap, keep-alive, a streaming answer) is checked
on the shared middleware behind a real uvicorn.
"""

from __future__ import annotations

import asyncio
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import uvicorn
from click.testing import CliRunner
from livekit import free_port
from slowkit import SlowClients, body_head, header_head

from intentusnet._util.deadlines import BodyDeadline, Deadlines
from intentusnet.cli import cli

pytestmark = pytest.mark.slow

BODY_SECONDS = 2.0
SLOW = 200
APP = """
import os
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(os.environ["SERVE_STORE"]))
router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
"""
LIMITS = ["--body-timeout", str(BODY_SECONDS), "--keep-alive", "1"]


class Listening:
    """An ``intentusnet`` command listening on a free loopback port, until stopped.

    Ready once ``probe`` answers (any status below 500).
    """

    def __init__(self, argv: list[str], port: int, probe: str, cwd: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.probe = probe
        self.log = cwd / "stderr.txt"
        with self.log.open("wb") as err:  # the child keeps its own copy
            self.process = subprocess.Popen(
                [sys.executable, "-m", "intentusnet.cli", *argv],
                cwd=cwd,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env={**os.environ, "SERVE_STORE": str(cwd / "records")},
            )
        deadline = time.monotonic() + 30
        with httpx.Client(trust_env=False, timeout=1) as http:
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    if http.get(self.url + probe).status_code < 500:
                        return
                except httpx.TransportError:
                    time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{argv[:3]} did not start")

    def stop(self) -> bytes:
        """SIGTERM, wait (bounded); its stderr."""
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
        return self.log.read_bytes()


def _command(name: str, work: Path, port: int) -> tuple[list[str], str, str]:
    """The argv of listener ``name``, its probe path and a path that reads a body."""
    store = str(work / "records")
    if name == "serve":
        (work / "dlapp.py").write_text(APP)
        argv = ["serve", "--app", "dlapp:router", "--port", str(port)]
        return [*argv, "--log-level", "warning", *LIMITS], "/healthz", "/v1/intents"
    if name == "serve-workers":
        (work / "dlapp.py").write_text(APP)
        argv = ["serve", "--app", "dlapp:router", "--port", str(port), "--workers", "2"]
        return [*argv, "--log-level", "warning", *LIMITS], "/healthz", "/v1/intents"
    if name == "gateway":
        listen = [
            "--listen",
            f"127.0.0.1:{port}",
            "--upstream",
            "fake=http://192.0.2.1",
        ]
        argv = ["gateway", *listen, "--store", store, "--access-log", "off"]
        return [*argv, "--log-level", "warning", *LIMITS], "/healthz", "/fake/v1/x"
    if name == "ui":
        _make_store(store)
        argv = ["--store", store, "ui", "--port", str(port), *LIMITS]
        return argv, "/healthz", "/ui/login"
    argv = ["mcp", "proxy", "--store", store, "--listen", f"127.0.0.1:{port}"]
    return [*argv, *LIMITS, "--", sys.executable, "-c", "pass"], "/mcp", "/mcp"


def _make_store(root: str) -> None:
    """An empty store directory at ``root`` (``ui`` opens an existing one)."""
    Path(root).mkdir()


@pytest.mark.parametrize("name", ["serve", "serve-workers", "gateway", "ui", "mcp"])
def test_slow_bodies_are_refused_by_the_deadline_and_starve_no_one(
    name: str, tmp_path: Path
) -> None:
    """200 trickled bodies: each 408 and closed by the deadline + 1 s; others served."""
    port = free_port()
    argv, probe, reads = _command(name, tmp_path, port)
    listening = Listening(argv, port, probe, tmp_path)
    try:
        slow = SlowClients(
            port, SLOW, body_head(reads), every=0.5, seconds=BODY_SECONDS + 10
        )
        with slow, httpx.Client(trust_env=False, timeout=5) as http:
            answered = []
            while slow.open_now() and len(answered) < 20:
                answered.append(http.get(listening.url + probe).status_code)
            assert slow.wait_closed(BODY_SECONDS + 3)
        assert answered
        assert max(answered) < 500
        assert max(t for t in slow.closed_after if t is not None) < BODY_SECONDS + 1
        assert min(t for t in slow.closed_after if t is not None) >= BODY_SECONDS - 0.1
        assert all(bytes(a).startswith(b"HTTP/1.1 408 ") for a in slow.answers)
    finally:
        err = listening.stop()
    assert b"Traceback" not in err


@pytest.mark.parametrize(
    "option", ["--body-timeout", "--keep-alive", "--max-connections"]
)
def test_a_limit_out_of_range_is_a_usage_error(option: str, tmp_path: Path) -> None:
    """0 for any of the three options is refused before anything listens (exit 2)."""
    store = str(tmp_path / "records")
    _make_store(store)
    result = CliRunner().invoke(cli, ["--store", store, "ui", option, "0"])
    assert result.exit_code == 2
    assert option in result.output


# -- the shared middleware, behind a real uvicorn --------------------------------


async def _echo(scope: Any, receive: Any, send: Any) -> None:
    """Echo the body; ``/stream`` answers one part, then waits for a disconnect."""
    if scope["type"] != "http":
        return
    body = b""
    more = True
    while more:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        body += message.get("body", b"")
        more = message.get("more_body", False)
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"part", "more_body": True})
        message = await receive()  # until the client goes
        assert message["type"] == "http.disconnect"
        return
    length = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": length})
    await send({"type": "http.response.body", "body": body})


async def _early(scope: Any, receive: Any, send: Any) -> None:
    """Answer at once, without reading the body."""
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"early"})


class Served:
    """``app`` behind ``limits`` on uvicorn in a thread, as the listeners run it."""

    def __init__(self, app: object, limits: Deadlines) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            limits.guard(app),
            log_level="warning",
            lifespan="off",
            **limits.uvicorn_settings(),
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])),
            daemon=True,
        )
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            assert time.monotonic() < deadline
            assert self.thread.is_alive()
            time.sleep(0.01)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()
        assert not self.thread.is_alive()


@pytest.fixture
def served() -> Iterator[Served]:
    """The echo app with a 1 s body deadline, 1 s keep-alive, at most 5 connections."""
    live = Served(_echo, Deadlines(1.0, 1, 5))
    yield live
    live.stop()


def _exchange(port: int, request: bytes, seconds: float = 5) -> tuple[bytes, float]:
    """Send ``request`` on a new connection; everything read until it closes."""
    with socket.create_connection(("127.0.0.1", port), timeout=seconds) as sock:
        start = time.monotonic()
        sock.sendall(request)
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
        return got, time.monotonic() - start


def test_a_body_in_time_is_passed_whole(served: Served) -> None:
    """A body sent in parts within the deadline reaches the app whole."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
        sock.sendall(body_head("/echo", 6))
        time.sleep(0.3)
        sock.sendall(b"abc")
        time.sleep(0.3)
        sock.sendall(b"def")
        answer = b""
        while not answer.endswith(b"abcdef") and (chunk := sock.recv(65536)):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 200 ")
    assert answer.endswith(b"abcdef")


def test_a_late_body_is_answered_408_and_its_connection_closed(served: Served) -> None:
    """A body short of its length at the deadline: 408, Connection: close, closed."""
    got, took = _exchange(served.port, body_head("/echo", 10) + b"abc")
    head = got.split(b"\r\n\r\n", 1)[0].lower()
    assert got.startswith(b"HTTP/1.1 408 ")
    assert b"connection: close" in head
    assert b'"code":"body_timeout"' in got
    assert 1.0 <= took < 2.0


def test_a_stream_answered_after_the_body_outlives_the_deadline(
    served: Served,
) -> None:
    """Once the body is in, waiting for the client's disconnect is never timed."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
        sock.sendall(body_head("/stream", 2) + b"{}")
        time.sleep(1.8)  # past the 1 s body deadline
        sock.settimeout(0.5)
        got = sock.recv(65536)
    assert got.startswith(b"HTTP/1.1 200 ")
    assert b"part" in got


def test_an_answer_before_the_body_closes_the_connection() -> None:
    """An app answering before an announced body is in: closed by the deadline."""
    live = Served(_early, Deadlines(1.0, 1, 5))
    try:
        got, took = _exchange(live.port, body_head("/early", 100))
    finally:
        live.stop()
    assert got.startswith(b"HTTP/1.1 200 ")
    assert b"connection: close" in got.lower()
    assert took < 2.0  # the body never came: not waited for past the deadline


def test_a_request_without_body_keeps_its_connection(served: Served) -> None:
    """GET without a body: no Connection: close, the connection serves another."""
    with httpx.Client(trust_env=False, timeout=5) as http:
        first = http.get(served.url + "/a")
        second = http.get(served.url + "/b")
    assert "connection" not in first.headers
    assert (first.status_code, second.status_code) == (200, 200)


def test_an_idle_connection_is_closed_after_the_keep_alive(served: Served) -> None:
    """After an answer, a connection sending nothing is closed after --keep-alive."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=5) as sock:
        sock.sendall(b"GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
        start = time.monotonic()
        got = b""
        while chunk := sock.recv(65536):
            got += chunk
        took = time.monotonic() - start
    assert got.startswith(b"HTTP/1.1 200 ")
    assert 0.9 <= took < 2.0


@pytest.mark.parametrize(("idle", "status"), [(2, 200), (4, 503)])
def test_past_the_connection_cap_a_request_is_answered_503(
    served: Served, idle: int, status: int
) -> None:
    """With 5 allowed: 2 idle connections and the asker pass, 4 and the asker do not."""
    held = [socket.create_connection(("127.0.0.1", served.port)) for _ in range(idle)]
    try:
        time.sleep(0.2)  # accepted by the server
        got, _ = _exchange(
            served.port, b"GET /a HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
    finally:
        for sock in held:
            sock.close()
    assert got.startswith(f"HTTP/1.1 {status} ".encode())


def test_slow_headers_do_not_starve_a_normal_request() -> None:
    """200 connections trickling their headers: a normal request still answers fast.

    They are not closed (no header deadline: docs/serve.md, "Deadlines"); the
    cap counts them, so they starve no one while under it.
    """
    live = Served(_echo, Deadlines(1.0, 1, 1000))
    try:
        slow = SlowClients(live.port, SLOW, header_head("/a"), every=0.5, seconds=20)
        with slow, httpx.Client(trust_env=False, timeout=5) as http:
            took = []
            for _ in range(50):
                start = time.monotonic()
                assert http.get(live.url + "/a").status_code == 200
                took.append(time.monotonic() - start)
            still_open = slow.open_now()
    finally:
        live.stop()
    assert statistics.median(took) < 0.05
    assert still_open == SLOW


def test_deadlines_refuse_values_out_of_range() -> None:
    """Deadlines: a non-positive body time, keep-alive under 1, a cap under 2."""
    cases = [
        ({"body_seconds": 0}, "body_seconds"),
        ({"keep_alive_seconds": 0}, "keep_alive_seconds"),
        ({"max_connections": 1}, "max_connections"),
    ]
    for bad, named in cases:
        with pytest.raises(ValueError, match=named):
            Deadlines(**bad)  # type: ignore[arg-type]
    assert isinstance(Deadlines().guard(_echo), BodyDeadline)


def _hung_receive() -> Any:
    """A ``receive`` whose body never comes."""

    async def receive() -> dict[str, Any]:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    return receive


async def _strict(scope: Any, receive: Any, send: Any) -> None:
    """Read the body; a disconnect is an exception (as Starlette's request.body())."""
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ConnectionResetError("the client left")


def _posted() -> dict[str, Any]:
    return {
        "type": "http",
        "method": "POST",
        "path": "/p",
        "headers": [(b"content-length", b"10")],
    }


def test_an_app_failing_after_the_refusal_is_one_log_line(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Past the deadline: 408 sent, the app told, its exception one info line."""
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    guarded = BodyDeadline(_strict, 0.1)
    with caplog.at_level("INFO", logger="intentusnet.server"):
        asyncio.run(guarded(_posted(), _hung_receive(), send))
    assert [m["type"] for m in sent] == ["http.response.start", "http.response.body"]
    assert sent[0]["status"] == 408
    assert (b"connection", b"close") in sent[0]["headers"]
    [line] = [r.getMessage() for r in caplog.records]
    assert "POST /p: the request body did not arrive within 0.1 s" in line
    assert "ConnectionResetError" in line


def test_an_app_failing_before_any_refusal_is_not_hidden() -> None:
    """An exception with the body in time (or none asked) propagates unchanged."""

    async def broken(scope: Any, receive: Any, send: Any) -> None:
        raise ValueError("a bug")

    async def nothing(message: dict[str, Any]) -> None:
        return None

    with pytest.raises(ValueError, match="a bug"):
        asyncio.run(BodyDeadline(broken, 5.0)(_posted(), _hung_receive(), nothing))
