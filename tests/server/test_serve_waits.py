"""``intentusnet serve --workers 2`` and waiting executions, woken by the service."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import httpx
import pytest
from livekit import ServeProcess

APP = """
import os
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(os.environ["SERVE_STORE"]))


@router.agent("approve", name="approve")
def approve(env, ctx):
    ctx.sleep(1.2)
    answer = ctx.wait_for("approval")
    with open(os.environ["SERVE_LOG"], "a", encoding="utf-8") as log:
        log.write(f"sent {ctx.execution_id} {os.getpid()}\\n")
    return {"approved": answer}
"""
pytestmark = pytest.mark.slow


def test_two_workers_wake_a_sleep_then_a_signal_once(tmp_path: Path) -> None:
    """202 while it sleeps; resumed when due, waits again; a signal finishes it once."""
    (tmp_path / "waitapp.py").write_text(APP)
    env = {
        "SERVE_STORE": str(tmp_path / "records"),
        "SERVE_LOG": str(tmp_path / "log"),
        "INTENTUSNET_API_KEYS": "",
    }
    server = ServeProcess(tmp_path, "waitapp:router", "--workers", "2", env=env)
    try:
        with httpx.Client(base_url=server.url, trust_env=False, timeout=30) as http:
            routed = http.post(
                "/v1/intents", json={"intent": {"name": "approve"}, "payload": {}}
            )
            assert routed.status_code == 202, routed.text
            assert routed.json()["error"]["details"]["waitingFor"] == "sleep"
            first = routed.json()["metadata"]["executionId"]
            deadline = time.monotonic() + 20
            while True:  # the sleep ends; a worker resumes it; it waits for approval
                shown = http.get(f"/v1/executions/{first}").json()
                if (
                    shown["header"]["status"] == "waiting"
                    and shown["header"]["executionId"] != first
                ):
                    break
                assert time.monotonic() < deadline, shown["header"]
                time.sleep(0.05)
            sent = http.post(
                f"/v1/executions/{first}/signals/approval", json={"by": "ann"}
            )
            assert sent.status_code == 200, sent.text
            done = http.get(f"/v1/executions/{first}?wait=20").json()
    finally:
        assert server.stop() in (0, -signal.SIGTERM)
    assert done["header"]["status"] == "completed"
    assert done["finalResponse"]["payload"] == {"approved": {"by": "ann"}}
    [line] = (tmp_path / "log").read_text().splitlines()
    assert line.split()[1] == done["header"]["executionId"]
