"""``intentusnet resume`` and ``recover`` on records of real killed processes."""

from __future__ import annotations

import subprocess
from pathlib import Path

import orjson
import pytest

from .support import SHOP_APP as APP
from .support import SHOP_KIT as KIT
from .support import run_shop as _run

pytestmark = pytest.mark.slow


def _cli(tmp_path: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    store = ["--store", str(tmp_path / "store")]
    return _run(tmp_path, "-m", "intentusnet.cli", *store, *argv)


def _killed(tmp_path: Path) -> str:
    assert _run(tmp_path, str(KIT), "route", SHOP_KILL="before:charge").returncode == -9
    listed = _cli(tmp_path, "records", "list", "--status", "incomplete", "--json")
    [row] = orjson.loads(listed.stdout)
    return str(row["executionId"])


def test_resume_finishes_and_a_second_is_refused(tmp_path: Path) -> None:
    """resume prints the answer; resuming again exits 4; inspect shows the link."""
    old = _killed(tmp_path)

    done = _cli(tmp_path, "resume", old, "--app", APP, "--json")
    again = _cli(tmp_path, "resume", old, "--app", APP)
    shown = _cli(tmp_path, "inspect", old, "--json")

    assert done.returncode == 0, done.stderr
    answer = orjson.loads(done.stdout)
    assert answer["payload"] == {"total": 20}
    assert again.returncode == 4
    assert "(complete)" in again.stderr
    links = orjson.loads(shown.stdout)["durable"]
    assert links["resumedBy"] == answer["metadata"]["executionId"]
    assert links["interrupted"] is True


def test_records_list_shows_who_resumed_an_interrupted_record(tmp_path: Path) -> None:
    """records list names the resumer of an interrupted record, in JSON and tables."""
    old = _killed(tmp_path)
    before = orjson.loads(_cli(tmp_path, "records", "list", "--json").stdout)
    done = orjson.loads(_cli(tmp_path, "resume", old, "--app", APP, "--json").stdout)
    new = done["metadata"]["executionId"]

    listed = orjson.loads(_cli(tmp_path, "records", "list", "--json").stdout)
    table = _cli(tmp_path, "records", "list").stdout

    assert [row.get("resumedBy") for row in before] == [None]
    by_id = {row["executionId"]: row for row in listed}
    assert by_id[old]["resumedBy"] == new
    assert "resumedBy" not in by_id[new]
    assert "RESUMED BY" in table
    assert next(line for line in table.splitlines() if line.startswith(old)).endswith(
        new
    )


def test_recover_once_resumes_what_was_interrupted(tmp_path: Path) -> None:
    """recover --once --json reports the interrupted execution resumed."""
    old = _killed(tmp_path)

    done = _cli(tmp_path, "recover", "--once", "--app", APP, "--grace", "0", "--json")

    assert done.returncode == 0, done.stderr
    report = orjson.loads(done.stdout)
    assert [o["executionId"] for o in report["resumed"]] == [old]
    assert report["parked"] == report["skipped"] == []
