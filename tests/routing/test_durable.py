"""Durable executions across real processes: SIGKILL a router, finish elsewhere."""

from __future__ import annotations

import importlib.util
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from intentusnet import IntentRouter, ListFilters, RecordStatus, Recovery
from intentusnet.record.durable import resume_of

KIT = Path(__file__).with_name("shopkit.py")
pytestmark = pytest.mark.slow


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update(SHOP_STORE=str(tmp_path / "store"), SHOP_LOG=str(tmp_path / "log"))
    env.update(extra)
    return env


def _route(
    tmp_path: Path, *args: str, **extra: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(KIT), "route", *args],
        env=_env(tmp_path, **extra),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _runs(tmp_path: Path) -> list[str]:
    path = tmp_path / "log"
    return path.read_text().splitlines() if path.exists() else []


def _named(lines: list[str], name: str) -> list[str]:
    return [line for line in lines if line.startswith(f"run:{name}:")]


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


def test_killed_after_the_email_is_finished_by_another_process(
    tmp_path: Path, shop: IntentRouter
) -> None:
    """Killed after the e-mail: resume serves fetch and e-mail, runs charge once."""
    killed = _route(tmp_path, SHOP_KILL="before:charge")
    assert killed.returncode == -9
    [interrupted] = shop.store.list()
    assert interrupted.status is RecordStatus.INCOMPLETE

    answer = shop.resume(interrupted.execution_id)

    assert answer.status == "success"
    assert answer.payload == {"total": 20}
    runs = _runs(tmp_path)
    assert len(_named(runs, "fetch")) == len(_named(runs, "email")) == 1
    assert len(_named(runs, "charge")) == 1
    new_id = answer.metadata.execution_id
    assert shop.store.resumed_by(interrupted.execution_id) == new_id
    assert resume_of(shop.store.load(new_id)) == interrupted.execution_id
    # the key a step hands the far side is the original execution's, on resume too
    assert _named(runs, "charge")[0] == f"run:charge:{interrupted.execution_id}:3"


def test_side_effect_in_doubt_parks_the_execution(
    tmp_path: Path, shop: IntentRouter
) -> None:
    """Killed inside the e-mail step: not sent again, parked, the step named."""
    assert _route(tmp_path, SHOP_KILL="in:email").returncode == -9
    [interrupted] = shop.store.list()

    answer = shop.resume(interrupted.execution_id)

    assert answer.status == "error"
    assert answer.error is not None
    assert answer.error.code.value == "NEEDS_ATTENTION"
    assert answer.error.details["reason"] == "side_effect_in_doubt"
    assert answer.error.details["name"] == "email"
    assert len(_named(_runs(tmp_path), "email")) == 1
    assert len(_named(_runs(tmp_path), "charge")) == 0
    parked = shop.store.load(str(answer.metadata.execution_id))
    assert parked.header.status is RecordStatus.NEEDS_ATTENTION
    assert [
        s.execution_id for s in shop.store.list(ListFilters(status="needs_attention"))
    ] == [parked.execution_id]


def test_idempotent_side_effect_in_doubt_runs_again_with_the_same_key(
    tmp_path: Path, shop: IntentRouter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An idempotent e-mail in doubt runs again, with the key it had the first time."""
    monkeypatch.setenv("SHOP_IDEMPOTENT", "1")
    assert _route(tmp_path, SHOP_KILL="in:email", SHOP_IDEMPOTENT="1").returncode == -9
    [interrupted] = shop.store.list()

    answer = shop.resume(interrupted.execution_id)

    assert answer.status == "success"
    emails = _named(_runs(tmp_path), "email")
    assert len(emails) == 2
    assert emails[0] == emails[1]


def test_a_repeated_key_resumes_the_interrupted_execution(
    tmp_path: Path, shop: IntentRouter
) -> None:
    """A retry with the same key finishes the killed run; a third is a replay."""
    assert _route(tmp_path, "k-1", SHOP_KILL="before:charge").returncode == -9

    retried = _route(tmp_path, "k-1")
    again = _route(tmp_path, "k-1")

    first = orjson.loads(retried.stdout)
    second = orjson.loads(again.stdout)
    assert first["payload"] == second["payload"] == {"total": 20}
    assert second["metadata"]["fromReplay"] is True
    assert second["metadata"]["originalExecutionId"] == first["metadata"]["executionId"]
    runs = _runs(tmp_path)
    assert [len(_named(runs, n)) for n in ("fetch", "email", "charge")] == [1, 1, 1]


def test_eight_processes_with_one_key_run_the_agent_once(tmp_path: Path) -> None:
    """Eight racing processes sending one key: one run, one answer for all."""
    start = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, str(KIT), "slow", "race", str(start)],
            env=_env(tmp_path),
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    start.write_text("")
    outputs = [proc.communicate(timeout=60)[0] for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    payloads = {orjson.loads(out)["payload"]["ran"] for out in outputs}
    assert len(_named(_runs(tmp_path), "slow")) == 1
    assert len(payloads) == 1


def test_random_kills_lose_nothing_and_repeat_nothing(
    tmp_path: Path, shop: IntentRouter
) -> None:
    """Random kills: recovery ends every order, no finished step runs twice."""
    rng = random.Random(24)
    points = [rng.choice(KIT_POINTS) for _ in range(12)]
    for point in points:
        _route(tmp_path, SHOP_KILL=point)
    ended_before = {
        s.execution_id: _ended_steps(shop, s.execution_id) for s in shop.store.list()
    }

    report = Recovery(shop, grace=0).run_once()

    assert not report.skipped
    assert len(report.resumed) + len(report.parked) == len(points)
    runs = _runs(tmp_path)
    for execution_id, ended in ended_before.items():
        head = _newest(shop, execution_id)
        record = shop.store.load(head)
        assert record.header.status in (
            RecordStatus.COMPLETED,
            RecordStatus.NEEDS_ATTENTION,
        ), execution_id
        for name in ended:  # a step that ended before the kill never ran again
            keyed = [r for r in _named(runs, name) if execution_id in r]
            assert len(keyed) == 1, (execution_id, name, keyed)
        emails = [r for r in _named(runs, "email") if execution_id in r]
        assert len(emails) <= 1  # a side effect is never done twice
        if record.header.status is RecordStatus.COMPLETED:
            assert len(emails) == 1  # nor silently skipped


KIT_POINTS = (
    "before:fetch",
    "in:fetch",
    "before:email",
    "in:email",
    "before:charge",
    "in:charge",
    "end",
)


def _ended_steps(router: IntentRouter, execution_id: str) -> list[str]:
    record = router.store.load(execution_id)
    return [str(e.data["name"]) for e in record.events if e.type.value == "STEP_END"]


def _newest(router: IntentRouter, execution_id: str) -> str:
    current = execution_id
    while (following := router.store.resumed_by(current)) is not None:
        current = following
    return current
