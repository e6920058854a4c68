"""``intentusnet serve``: refusals before binding, workers, keys, graceful stop."""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from livekit import ROUTE_KEY, ServeProcess

from intentusnet.cli import cli
from intentusnet.cli.serve import parse_size
from intentusnet.store import FileExecutionStore

APP = """
import asyncio, os
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(os.environ["SERVE_STORE"]))

@router.agent("echo", name="echo")
def echo(env, ctx):
    return {"echo": env.payload, "pid": os.getpid()}

@router.agent("slow", name="slow")
async def slow(env, ctx):
    await asyncio.sleep(0.8)
    return {"slept": True}
"""
STOPPED = (0, -signal.SIGTERM)


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    """A directory holding ``serveapp.py``."""
    (tmp_path / "serveapp.py").write_text(APP)
    return tmp_path


def _serve(*args: str, **env: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, ["serve", *args], env=env)
    return result.exit_code, result.output


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10"])
def test_refuses_non_loopback_without_keys(
    host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without an API key, a non-loopback --host exits 2 before anything binds."""
    monkeypatch.delenv("INTENTUSNET_API_KEYS", raising=False)
    monkeypatch.delenv("INTENTUSNET_API_KEYS_FILE", raising=False)
    code, output = _serve("--app", "nothing:here", "--host", host)
    assert code == 2
    assert "without an API key" in output


def test_usage_errors(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A bad size, a short key, a missing key file or a bad --app exit 2."""
    monkeypatch.chdir(tmp_path)
    assert _serve("--app", "x:y", "--max-body-size", "lots")[0] == 2
    assert _serve("--app", "x:y", INTENTUSNET_API_KEYS="short")[0] == 2
    assert _serve("--app", "x:y", "--api-keys-file", "missing")[0] == 2
    code, output = _serve("--app", "no_such_module:router")
    assert code == 2
    assert "no_such_module" in output


def test_router_recording_elsewhere_than_the_named_store_exits_2(
    app_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A named store the router does not record to: exit 2 before anything binds."""
    monkeypatch.chdir(app_dir)
    monkeypatch.setattr(sys, "path", list(sys.path))
    own, named = app_dir / "own", app_dir / "named"
    try:
        code, output = _serve(
            "--app",
            "serveapp:router",
            INTENTUSNET_STORE=str(named),
            SERVE_STORE=str(own),
        )
    finally:
        module = sys.modules.pop("serveapp", None)
        if module is not None:
            module.router.close()
    assert code == 2
    assert (
        f"names {named.resolve()}, but serveapp:router records to {own.resolve()}"
        in output
    )
    assert not named.exists()


def test_parse_size() -> None:
    """Sizes are bytes with an optional K/M unit (binary or decimal)."""
    assert parse_size("1MiB") == 1024 * 1024
    assert parse_size("512 KiB") == 512 * 1024
    assert parse_size("2MB") == 2_000_000
    assert parse_size("100") == 100
    for bad in ("0", "1GB", "-1", "many"):
        with pytest.raises(ValueError, match="not a size"):
            parse_size(bad)


@pytest.mark.slow
def test_workers_and_key_file(app_dir: Path) -> None:
    """Two worker processes share one store; the key file is enforced."""
    keys = app_dir / "keys"
    keys.write_text(f"{ROUTE_KEY}\n")
    keys.chmod(0o600)
    root = app_dir / "records"
    server = ServeProcess(
        app_dir,
        "serveapp:router",
        "--workers",
        "2",
        "--api-keys-file",
        str(keys),
        env={"SERVE_STORE": str(root)},
    )
    try:
        with httpx.Client(base_url=server.url, trust_env=False) as anonymous:
            assert anonymous.get("/v1/executions").status_code == 401
        headers = {"Authorization": f"Bearer {ROUTE_KEY}"}
        ids = set()
        for n in range(40):
            with httpx.Client(
                base_url=server.url, headers=headers, trust_env=False
            ) as http:
                answer = http.post(
                    "/v1/intents",
                    json={"intent": {"name": "echo"}, "payload": {"n": n}},
                ).json()
            ids.add(answer["metadata"]["executionId"])
    finally:
        assert server.stop() in STOPPED
    with FileExecutionStore(root) as store:
        assert {s.execution_id for s in store.list()} == ids


@pytest.mark.slow
def test_sigterm_finishes_executions_in_flight(app_dir: Path) -> None:
    """SIGTERM while slow intents run: every caller is answered, no record torn."""
    root = app_dir / "records"
    server = ServeProcess(app_dir, "serveapp:router", env={"SERVE_STORE": str(root)})
    answers: list[int] = []

    def call() -> None:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=20) as http:
            env = {"intent": {"name": "slow"}}
            answers.append(http.post("/v1/intents", json=env).status_code)

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with FileExecutionStore(root) as store:
            if len(store.list()) == 4:
                break
        time.sleep(0.02)
    code = server.stop()
    for thread in threads:
        thread.join(20)
    assert code in STOPPED
    assert answers == [200] * 4
    with FileExecutionStore(root) as store:
        summaries = store.list()
        assert [s.status for s in summaries] == ["completed"] * 4
        for summary in summaries:
            report = store.verify(summary.execution_id)
            assert report.valid
            assert not report.notes
