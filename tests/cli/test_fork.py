"""``intentusnet fork`` on the records of real killed processes (the shop example)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from intentusnet import FileExecutionStore
from intentusnet.record.model import EventType

from .support import SHOP_APP as APP
from .support import SHOP_KIT as KIT
from .support import run_shop as _run

#: After a resume's AGENT_ATTEMPT_START (tests/routing/test_durable.py says why).
AFTER_ATTEMPT_START = "6"
pytestmark = pytest.mark.slow


def _cli(tmp_path: Path, *argv: str, **extra: str) -> subprocess.CompletedProcess[str]:
    store = ["--store", str(tmp_path / "store")]
    return _run(tmp_path, "-m", "intentusnet.cli", *store, *argv, **extra)


def _ids(tmp_path: Path) -> set[str]:
    listed = _cli(tmp_path, "records", "list", "--json")
    return {row["executionId"] for row in orjson.loads(listed.stdout)}


def _runs(tmp_path: Path, name: str) -> int:
    lines = (tmp_path / "log").read_text().splitlines()
    return sum(line.startswith(f"run:{name}:") for line in lines)


def _chain_with_an_empty_resume(tmp_path: Path) -> tuple[str, str]:
    """Killed after the e-mail; its recovery killed before re-serving a step."""
    assert _run(tmp_path, str(KIT), "route", SHOP_KILL="before:charge").returncode == -9
    [origin] = _ids(tmp_path)
    recover = ("recover", "--once", "--grace", "0", "--app", APP)
    killed = _cli(tmp_path, *recover, INTENTUSNET_KILL_AT=AFTER_ATTEMPT_START)
    assert killed.returncode == -9, killed.stderr
    [resume] = _ids(tmp_path) - {origin}
    return origin, resume


def test_fork_serves_what_any_record_of_the_chain_ended(tmp_path: Path) -> None:
    """A fork serves steps any record of the chain ended; one e-mail in all.

    Forked from the e-mail: fetch and the e-mail served from the first record (the
    killed resume holds none), charge live; one e-mail in all.
    """
    origin, resume = _chain_with_an_empty_resume(tmp_path)

    done = _cli(tmp_path, "fork", origin, "--from", "email", "--app", APP, "--json")

    assert done.returncode == 0, done.stderr
    result = orjson.loads(done.stdout)
    assert result["response"]["payload"] == {"total": 20}
    assert result["originalExecutionId"] == resume
    assert [_runs(tmp_path, n) for n in ("fetch", "email", "charge")] == [1, 1, 1]
    store = FileExecutionStore(tmp_path / "store")
    try:
        record = store.load(result["executionId"])
    finally:
        store.close()
    served = {
        e.data["name"]: e.data.get("servedFrom", {}).get("executionId")
        for e in record.events
        if e.type is EventType.STEP_END
    }
    assert served == {"fetch": origin, "email": origin, "charge": None}
    assert record.replay_of == resume


def test_fork_prints_what_it_served_and_ran(tmp_path: Path) -> None:
    """Without --json, fork says which steps were served and which ran."""
    origin, _resume = _chain_with_an_empty_resume(tmp_path)

    done = _cli(tmp_path, "fork", origin, "--from", "2", "--app", APP)

    assert done.returncode == 0, done.stderr
    assert "served: fetch (step 1), email (step 2)" in done.stdout
    assert "ran:    charge (step 3)" in done.stdout


def test_fork_from_a_step_the_execution_does_not_hold_exits_2(
    tmp_path: Path,
) -> None:
    """An unknown step: exit 2 naming the steps, no traceback, nothing written."""
    origin, _resume = _chain_with_an_empty_resume(tmp_path)
    before = _ids(tmp_path)

    done = _cli(tmp_path, "fork", origin, "--from", "refund", "--app", APP)

    assert done.returncode == 2
    assert "no step named 'refund'" in done.stderr
    assert "email, fetch" in done.stderr
    assert "Traceback" not in done.stderr
    assert _ids(tmp_path) == before
    assert [_runs(tmp_path, n) for n in ("fetch", "email", "charge")] == [1, 1, 0]


FAILING_APP = """
import os
from intentusnet import IntentRouter, open_store

router = IntentRouter(store=open_store(os.environ["SHOP_STORE"]))


@router.agent("sum")
def add(envelope, ctx):
    a = ctx.step("a", {}, lambda: 1)
    if os.environ.get("FAIL_B") == "1":
        ctx.step("b", {}, lambda: 1 // 0)
    return {"sum": a + ctx.step("b", {}, lambda: 2)}
"""


def test_a_fork_that_runs_and_fails_exits_8(tmp_path: Path) -> None:
    """The fork's execution fails (today's b raises): its result printed, exit 8."""
    (tmp_path / "sumapp.py").write_text(FAILING_APP)
    route = (
        "import sumapp; r = sumapp.router.route_intent("
        "{'intent': {'name': 'sum'}, 'payload': {}}); print(r.metadata.execution_id)"
    )
    made = _run(tmp_path, "-c", route)
    assert made.returncode == 0, made.stderr
    old = made.stdout.strip()

    ok = _cli(tmp_path, "fork", old, "--from", "b", "--app", "sumapp:router")
    failed = _cli(
        tmp_path, "fork", old, "--from", "b", "--app", "sumapp:router", FAIL_B="1"
    )

    assert ok.returncode == 0, ok.stderr
    assert failed.returncode == 8, failed.stderr
    assert ": failed" in failed.stdout
    assert "ran:    b (step 2)" in failed.stdout
