"""``intentusnet serve`` processes killed after a 202, and racing on one key."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from livekit import ServeProcess
from prometheus_client.parser import text_string_to_metric_families

from intentusnet.cli import cli
from intentusnet.http.client import IntentusClient
from intentusnet.record.model import EventType
from intentusnet.store import FileExecutionStore

APP = """
import os, time
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(os.environ["SERVE_STORE"]))


def _log(line):
    with open(os.environ["SERVE_LOG"], "a", encoding="utf-8") as handle:
        handle.write(line + "\\n")


@router.agent("order", name="order")
def order(env, ctx):
    ctx.step("email", {"to": "ann@example.com"},
             lambda to: _log("email:" + ctx.idempotency_key), side_effect=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.environ["SERVE_GO"]) and time.monotonic() < deadline:
        time.sleep(0.01)
    total = ctx.step("charge", {"amount": 20}, lambda amount: _log("charge") or amount)
    return {"total": total}


@router.agent("slow", name="slow")
def slow(env, ctx):
    _log("slow:" + ctx.execution_id)
    time.sleep(0.3)
    return {"ran": ctx.execution_id}
"""
ORDER = {"intent": {"name": "order"}, "payload": {"item": "book"}}
STOPPED = (0, -signal.SIGTERM)
pytestmark = pytest.mark.slow


@pytest.fixture
def app_dir(tmp_path: Path) -> Path:
    """A directory holding ``durableapp.py``."""
    (tmp_path / "durableapp.py").write_text(APP)
    return tmp_path


def _env(app_dir: Path) -> dict[str, str]:
    return {
        "SERVE_STORE": str(app_dir / "records"),
        "SERVE_LOG": str(app_dir / "log"),
        "SERVE_GO": str(app_dir / "go"),
        "INTENTUSNET_API_KEYS": "",
    }


def _log(app_dir: Path) -> list[str]:
    path = app_dir / "log"
    return path.read_text().splitlines() if path.exists() else []


def _email_ended(app_dir: Path, execution_id: str) -> bool:
    """The e-mail was sent and its step's end is in the record."""
    if not any(line.startswith("email:") for line in _log(app_dir)):
        return False
    with FileExecutionStore(app_dir / "records") as store:
        events = store.load(execution_id).events
    return any(event.type is EventType.STEP_END for event in events)


def _metric(url: str, name: str) -> float:
    with httpx.Client(base_url=url, trust_env=False) as http:
        text = http.get("/metrics").text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and not sample.labels:
                return float(sample.value)
    raise AssertionError(f"no {name}")


def test_a_worker_killed_after_202_loses_nothing(app_dir: Path) -> None:
    """SIGKILL the worker after its 202: another worker recovers it; one e-mail."""
    server = ServeProcess(
        app_dir,
        "durableapp:router",
        "--workers",
        "2",
        "--recover-after",
        "0.5",
        env=_env(app_dir),
    )
    try:
        with IntentusClient(server.url, trust_env=False) as client:
            handle = client.submit(ORDER)
            deadline = time.monotonic() + 30
            # Sent, and its step's end on disk: a kill between the two would
            # leave the e-mail in doubt (needs_attention), another scenario.
            while not _email_ended(app_dir, handle.execution_id):
                assert time.monotonic() < deadline, "the e-mail was never sent"
                time.sleep(0.02)
            with FileExecutionStore(app_dir / "records") as store:
                owner = store.load(handle.execution_id).header.owner
            assert owner is not None
            worker = int(str(owner["pid"]))
            assert worker != server.process.pid
            os.kill(worker, signal.SIGKILL)  # mid-agent, the e-mail sent
            (app_dir / "go").touch()
            answer = handle.result(timeout=60)
        with httpx.Client(base_url=server.url, trust_env=False) as http:
            shown = http.get(f"/v1/executions/{handle.execution_id}")
        resumed = _metric(server.url, "intentusnet_executions_resumed_total")
        took = _metric(server.url, "intentusnet_recovery_seconds_count")
    finally:
        assert server.stop() in STOPPED
    assert answer.status == "success"
    assert answer.payload == {"total": 20}
    assert answer.metadata.execution_id != handle.execution_id  # the resume's
    assert shown.json()["header"]["executionId"] == answer.metadata.execution_id
    assert shown.headers["content-location"].endswith(answer.metadata.execution_id)
    assert _log(app_dir) == [f"email:{handle.execution_id}:1", "charge"]
    assert (resumed, took) == (1, 1)


def test_eight_requests_with_one_key_run_the_agent_once(app_dir: Path) -> None:
    """8 concurrent requests, one key, 2 workers: one run, eight equal answers."""
    server = ServeProcess(
        app_dir, "durableapp:router", "--workers", "2", env=_env(app_dir)
    )
    start = threading.Barrier(8)
    answers: list[httpx.Response] = []

    def call() -> None:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=60) as http:
            start.wait(10)
            answers.append(
                http.post(
                    "/v1/intents",
                    json={"intent": {"name": "slow"}, "payload": {}},
                    headers={"Idempotency-Key": '"race-1"'},
                )
            )

    try:
        threads = [threading.Thread(target=call) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    finally:
        assert server.stop() in STOPPED
    assert [a.status_code for a in answers] == [200] * 8
    assert len({str(a.json()["payload"]) for a in answers}) == 1
    assert len([line for line in _log(app_dir) if line.startswith("slow:")]) == 1
    assert sum(a.json()["metadata"]["fromReplay"] for a in answers) == 7


def test_recover_needs_a_store_that_keeps_resume_links(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--recover with a router recording nowhere: exit 2 before anything binds."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "nostore.py").write_text(
        "from intentusnet import IntentRouter\nrouter = IntentRouter()\n"
    )
    monkeypatch.delenv("INTENTUSNET_STORE", raising=False)
    result = CliRunner().invoke(cli, ["serve", "--app", "nostore:router", "--recover"])
    assert result.exit_code == 2
    assert "--recover: nostore:router records to no store" in result.output
    assert "use --no-recover" in result.output
    assert "Traceback" not in result.output
    assert os.environ.get("INTENTUSNET_SERVE_SETTINGS") is None
