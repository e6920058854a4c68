"""The service and interrupted executions: resume links followed, recovery counted.

A router process is really killed (``tests/routing/shopkit.py``, SIGKILL at a
chosen point); the service here serves the same shop on the same store.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from livekit import serving
from prometheus_client.parser import text_string_to_metric_families

from intentusnet import IntentRouter, RecordStatus, Recovery
from intentusnet.server import create_app

KIT = Path(__file__).parent.parent / "routing" / "shopkit.py"
pytestmark = pytest.mark.slow


def _kill_at(tmp_path: Path, point: str) -> None:
    """Route one order in a process that SIGKILLs itself at ``point``."""
    env = {
        **os.environ,
        "SHOP_STORE": str(tmp_path / "store"),
        "SHOP_LOG": str(tmp_path / "log"),
        "SHOP_KILL": point,
    }
    killed = subprocess.run(
        [sys.executable, str(KIT), "route"], env=env, timeout=60, check=False
    )
    assert killed.returncode == -9


@pytest.fixture
def shop(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[IntentRouter]:
    """The shop's router in this process, on the store the killed processes used."""
    monkeypatch.setenv("SHOP_STORE", str(tmp_path / "store"))
    monkeypatch.setenv("SHOP_LOG", str(tmp_path / "log"))
    monkeypatch.delenv("SHOP_KILL", raising=False)
    spec = importlib.util.spec_from_file_location(f"shop_{tmp_path.name}", KIT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    router: IntentRouter = module.router
    yield router
    router.close()


def _interrupted(tmp_path: Path, shop: IntentRouter, point: str) -> str:
    """The id of an order whose router was killed at ``point``."""
    store = shop.store
    assert store is not None
    known = {s.execution_id for s in store.list()}
    _kill_at(tmp_path, point)
    [new] = [s for s in store.list() if s.execution_id not in known]
    assert new.status is RecordStatus.INCOMPLETE
    return new.execution_id


def _runs(tmp_path: Path, name: str) -> list[str]:
    lines = (tmp_path / "log").read_text().splitlines()
    return [line for line in lines if line.startswith(f"run:{name}:")]


def test_get_follows_resume_links_to_the_newest_record(
    tmp_path: Path, shop: IntentRouter
) -> None:
    """By the original id: the record that finished it; follow=false: the original."""
    original = _interrupted(tmp_path, shop, "before:charge")
    resumed = shop.resume(original).metadata.execution_id
    with (
        serving(create_app(shop, ui=False)) as live,
        httpx.Client(base_url=live.url, trust_env=False) as http,
    ):
        followed = http.get(f"/v1/executions/{original}")
        exact = http.get(f"/v1/executions/{original}", params={"follow": "false"})
    assert followed.status_code == 200
    assert followed.json()["header"]["executionId"] == resumed
    assert followed.json()["header"]["status"] == "completed"
    assert followed.json()["finalResponse"]["payload"] == {"total": 20}
    assert followed.headers["content-location"] == f"/v1/executions/{resumed}"
    assert exact.json()["header"]["executionId"] == original
    assert exact.json()["header"]["status"] == "incomplete"
    assert "content-location" not in exact.headers


def _samples(http: httpx.Client) -> dict[str, float]:
    """The unlabelled samples of /metrics."""
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(http.get("/metrics").text)
        for sample in family.samples
        if not sample.labels
    }


def _counted(http: httpx.Client, name: str, value: float) -> dict[str, float]:
    """/metrics once ``name`` reaches ``value`` (a scan counts when it ends)."""
    deadline = time.monotonic() + 20
    while (samples := _samples(http)).get(name) != value:
        assert time.monotonic() < deadline, samples.get(name)
        time.sleep(0.05)
    return samples


def test_background_recovery_finishes_parks_and_counts(
    tmp_path: Path, shop: IntentRouter
) -> None:
    """The app's recovery resumes one, parks one in doubt; /metrics counts both."""
    finishable = _interrupted(tmp_path, shop, "before:charge")
    in_doubt = _interrupted(tmp_path, shop, "in:email")
    app = create_app(shop, ui=False, recovery=Recovery(shop, grace=0.0))
    with (
        serving(app) as live,
        httpx.Client(base_url=live.url, trust_env=False, timeout=60) as http,
    ):
        done = http.get(f"/v1/executions/{finishable}", params={"wait": "30"}).json()
        parked = http.get(f"/v1/executions/{in_doubt}", params={"wait": "30"}).json()
        metrics = _counted(http, "intentusnet_executions_parked_total", 1)
    assert done["header"]["status"] == "completed"
    assert done["finalResponse"]["payload"] == {"total": 20}
    assert parked["header"]["status"] == "needs_attention"
    assert parked["finalResponse"]["error"]["code"] == "NEEDS_ATTENTION"
    assert len(_runs(tmp_path, "email")) == 2  # one each; none sent again
    assert len(_runs(tmp_path, "charge")) == 1
    assert metrics["intentusnet_executions_resumed_total"] == 1
    assert metrics["intentusnet_executions_parked_total"] == 1
    assert metrics["intentusnet_recovery_seconds_count"] == 1
