"""Versioned code (``ctx.patched``) across real processes: SIGKILL, deploy, resume.

An agent's v1 runs steps A, B; v2 puts C behind ``ctx.patched("c")``; v3 retires
the patch (``ctx.deprecate_patch``); v4 makes the change without a patch
(tests/routing/patchkit.py). Each test runs on the file store and PostgreSQL.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from intentusnet import IntentRouter, RecordStatus, record_steps
from intentusnet.record.model import EventType

KIT = Path(__file__).with_name("patchkit.py")
pytestmark = pytest.mark.slow


@pytest.fixture(params=["file", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The job's store: a directory, or a new PostgreSQL database."""
    if request.param == "file":
        return str(tmp_path / "store")
    return str(request.getfixturevalue("pg_dsn"))


@pytest.fixture
def kit(
    tmp_path: Path, where: str, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ModuleType]:
    """The job loaded in this process, on the store the killed processes used."""
    monkeypatch.setenv("PATCH_STORE", where)
    monkeypatch.setenv("PATCH_LOG", str(tmp_path / "log"))
    monkeypatch.delenv("PATCH_KILL", raising=False)
    spec = importlib.util.spec_from_file_location(f"patch_{tmp_path.name}", KIT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    yield module
    module.router.close()
    module.router.store.close()


@pytest.fixture
def job(kit: ModuleType) -> IntentRouter:
    """The job's router in this process."""
    router: IntentRouter = kit.router
    return router


def _killed(tmp_path: Path, where: str, version: str, point: str) -> None:
    """Route a job on ``version`` in its own process, SIGKILLed at ``point``."""
    env = dict(os.environ)
    env.update(
        PATCH_STORE=where,
        PATCH_LOG=str(tmp_path / "log"),
        PATCH_VERSION=version,
        PATCH_KILL=point,
    )
    done = subprocess.run(
        [sys.executable, str(KIT), "route"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == -9, done.stderr


def _runs(tmp_path: Path) -> list[str]:
    return (tmp_path / "log").read_text().splitlines()


def _only(router: IntentRouter) -> str:
    [summary] = router.store.list()
    assert summary.status is RecordStatus.INCOMPLETE
    return summary.execution_id


def _names(router: IntentRouter, execution_id: str) -> list[str]:
    return [s.name for s in record_steps(router.store.load(execution_id))]


def test_an_old_execution_in_b_finishes_on_the_old_path_after_the_deploy(
    tmp_path: Path, where: str, job: IntentRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v1 killed in B (after A), resumed on v2: patched is False, B runs, done."""
    _killed(tmp_path, where, "1", "in:B")
    old = _only(job)
    monkeypatch.setenv("PATCH_VERSION", "2")

    answer = job.resume(old)

    assert answer.status == "success", answer.error
    assert answer.payload == {"steps": ["A", "B"]}
    assert _runs(tmp_path) == ["run:A", "run:B", "run:B"]
    new = answer.metadata.execution_id
    assert new is not None
    assert _names(job, new) == ["A", "B"]  # no marker: the old path, as recorded


def test_an_old_execution_stopped_before_the_check_takes_the_new_path(
    tmp_path: Path, where: str, job: IntentRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An execution killed before the check takes the new path.

    v1 killed after A ended, before B started: its record ends before the check, so v2's
    patched is True (the record holds nothing of the old path).
    """
    _killed(tmp_path, where, "1", "after:A")
    old = _only(job)
    monkeypatch.setenv("PATCH_VERSION", "2")

    answer = job.resume(old)

    assert answer.payload == {"steps": ["A", "C"]}
    assert _runs(tmp_path) == ["run:A", "run:C"]
    new = answer.metadata.execution_id
    assert new is not None
    assert _names(job, new) == ["A", "patch:c", "C"]


def test_a_new_execution_records_the_marker_and_its_resume_stays_on_c(
    tmp_path: Path, where: str, job: IntentRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v2 killed in C: its record holds the marker; resumed on v2, C again."""
    _killed(tmp_path, where, "2", "in:C")
    old = _only(job)
    assert _names(job, old) == ["A", "patch:c", "C"]
    monkeypatch.setenv("PATCH_VERSION", "2")

    answer = job.resume(old)

    assert answer.payload == {"steps": ["A", "C"]}
    assert _runs(tmp_path) == ["run:A", "run:C", "run:C"]
    new = answer.metadata.execution_id
    assert new is not None
    record = job.store.load(new)
    served = {
        e.data["name"]: e.data["source"]
        for e in record.events
        if e.type is EventType.STEP_END
    }
    assert served == {"A": "record", "patch:c": "record", "C": "live"}


def test_a_retired_patch_still_resumes_an_execution_holding_its_marker(
    tmp_path: Path, where: str, job: IntentRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With deprecate_patch, a record holding the marker still resumes.

    v2 killed in C, resumed on v3 (deprecate_patch): the marker is served, C runs; a new
    v3 execution records no marker.
    """
    _killed(tmp_path, where, "2", "in:C")
    old = _only(job)
    monkeypatch.setenv("PATCH_VERSION", "3")

    answer = job.resume(old)
    fresh = job.route_intent({"intent": {"name": "job"}, "payload": {"n": 2}})

    assert answer.payload == {"steps": ["A", "C"]}
    new = answer.metadata.execution_id
    assert new is not None
    assert _names(job, new) == ["A", "patch:c", "C"]
    fresh_id = fresh.metadata.execution_id
    assert fresh_id is not None
    assert _names(job, fresh_id) == ["A", "C"]


def test_a_change_not_behind_a_patch_still_parks(
    tmp_path: Path, where: str, job: IntentRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """v1 killed in B, resumed on v4 (C without a patch): parked, nondeterminism."""
    _killed(tmp_path, where, "1", "in:B")
    old = _only(job)
    monkeypatch.setenv("PATCH_VERSION", "4")

    answer = job.resume(old)

    assert answer.error is not None
    assert answer.error.code.value == "NEEDS_ATTENTION"
    new = answer.metadata.execution_id
    assert new is not None
    record = job.store.load(new)
    assert record.header.status is RecordStatus.NEEDS_ATTENTION
    [attention] = [e for e in record.events if e.type is EventType.ATTENTION_NEEDED]
    assert attention.data["reason"] == "nondeterminism"
    assert _runs(tmp_path) == ["run:A", "run:B"]  # C never ran
