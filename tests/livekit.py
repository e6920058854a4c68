"""A real uvicorn on 127.0.0.1 with an ephemeral port, for the HTTP tests.

The server runs on a thread of the test process and is stopped (gracefully, as
on SIGTERM) by ``stop()``; every test using one stops it, bounded in time.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from intentusnet import IntentRouter
from intentusnet.server import KeyRing, create_app
from intentusnet.store import FileExecutionStore

#: API keys the tests configure: one that may route, one read-only.
ROUTE_KEY = "route-key-0123456789abcdef"
READ_KEY = "read-only-key-0123456789abcdef"


class LiveServer:
    """Serve an ASGI app on 127.0.0.1:<ephemeral port> in a thread."""

    def __init__(self, app: object, *, graceful_timeout: int = 5) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app,  # type: ignore[arg-type]
            log_level="warning",
            lifespan="on",
            timeout_graceful_shutdown=graceful_timeout,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self._run, name="live-uvicorn", daemon=True
        )

    def _run(self) -> None:
        asyncio.run(self.server.serve(sockets=[self.sock]))

    def start(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)
        self.sock.close()
        assert not self.thread.is_alive(), "uvicorn did not stop"


@contextmanager
def serving(app: object) -> Iterator[LiveServer]:
    """Run ``app`` for the duration of the block."""
    live = LiveServer(app).start()
    try:
        yield live
    finally:
        live.stop()


def echo_router(root: Path) -> IntentRouter:
    """A router recording to ``root`` with agents ``echo``, ``flaky`` and ``slow``."""
    router = IntentRouter(store=FileExecutionStore(root))
    router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})

    @router.agent("flaky", name="first", priority=1)
    def first(env: object, ctx: object) -> dict[str, object]:
        raise ValueError("first one fails")

    router.agent("flaky", name="second", priority=2)(lambda env, ctx: {"n": 2})

    @router.agent("slow", name="slow")
    async def slow(env: object, ctx: object) -> dict[str, object]:
        await asyncio.sleep(0.3)
        return {"slept": True}

    return router


def keyed_app(router: IntentRouter, **options: object) -> object:
    """The app of ``router`` with ROUTE_KEY and READ_KEY configured."""
    keys = KeyRing.parse(f"{ROUTE_KEY}\nro:{READ_KEY}")
    return create_app(router, keys=keys, **options)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class CliProcess:
    """An ``intentusnet`` command serving HTTP in a subprocess, until ``stop()``.

    Ready once ``GET /healthz`` answers 200; its stderr is kept in ``lines``.

    Args:
        command: the argument list.
        url: where it listens.
        cwd: its working directory.
        env: more environment variables.
    """

    def __init__(
        self,
        command: list[str],
        url: str,
        *,
        cwd: Path | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.url = url
        self.lines: list[str] = []
        self.process = subprocess.Popen(
            command,
            cwd=cwd,
            env={**os.environ, **(env or {})},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self._wait_until_ready()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    def _wait_until_ready(self) -> None:
        deadline = time.monotonic() + 30
        with httpx.Client(base_url=self.url, trust_env=False, timeout=1) as http:
            while time.monotonic() < deadline and self.process.poll() is None:
                try:
                    if http.get("/healthz").status_code == 200:
                        return
                except httpx.TransportError:
                    time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"{self.url} did not start:\n" + "".join(self.lines))

    def stop(self) -> int:
        """SIGTERM, wait (bounded) and return the exit code."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait(timeout=10)
        self._reader.join(timeout=10)
        assert self.process.stderr is not None
        self.process.stderr.close()
        return code


class ServeProcess(CliProcess):
    """``intentusnet serve`` in a subprocess on 127.0.0.1 with an ephemeral port.

    Args:
        directory: holds the application module; the working directory.
        app: ``MODULE:ATTR``.
        args: more ``serve`` options.
        env: more environment variables.
        global_args: options of ``intentusnet`` itself (``--store``), given
            before ``serve``.
    """

    def __init__(
        self,
        directory: Path,
        app: str,
        *args: str,
        env: dict[str, str] | None = None,
        global_args: tuple[str, ...] = (),
    ) -> None:
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "intentusnet.cli",
            *global_args,
            "serve",
            "--app",
            app,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            *args,
        ]
        super().__init__(command, f"http://127.0.0.1:{port}", cwd=directory, env=env)


class UiProcess(CliProcess):
    """``intentusnet --store ROOT ui`` in a subprocess on a free loopback port."""

    def __init__(self, root: Path, *args: str) -> None:
        port = free_port()
        command = [
            sys.executable,
            "-m",
            "intentusnet.cli",
            "--store",
            str(root),
            "ui",
            "--port",
            str(port),
            *args,
        ]
        super().__init__(
            command, f"http://127.0.0.1:{port}", env={"PYTHONUNBUFFERED": "1"}
        )
