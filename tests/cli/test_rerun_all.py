"""``rerun --all`` in real worker processes, its JUnit report, ``records export``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from xml.etree import ElementTree

import orjson
import pytest

from .support import CHECKOUT, Invoke

TRIAGE = Path(CHECKOUT) / "examples" / "support_triage.py"
APP = "support_triage:router"
#: Four tickets; release 2 changes the answer to the first, release 3 makes the
#: third ask for a step no record holds.
TICKETS = [
    "My invoice is wrong",
    "Invoice charged twice, refund now",
    "The app crashes on login",
    "How do I reset my password?",
]
RECORD = textwrap.dedent(
    """
    import sys
    from intentusnet import IntentRouter
    from support_triage import router

    for text in sys.argv[1:]:
        router.route_intent({"intent": {"name": "ticket.triage"},
                             "payload": {"text": text}})
    # a record of an intent this application does not handle
    other = IntentRouter(store=router.store)
    other.agent("billing.refund", name="refund")(lambda env, ctx: {"ok": True})
    other.route_intent({"intent": {"name": "billing.refund"}, "payload": {}})
    router.close()
    """
)


@pytest.fixture(scope="module")
def triage(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store of four tickets recorded by release 1, and one foreign record."""
    root = tmp_path_factory.mktemp("triage")
    shutil.copyfile(TRIAGE, root / "support_triage.py")
    env = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{CHECKOUT}"}
    env["INTENTUSNET_STORE"] = str(root / "records")
    env.pop("TRIAGE_RELEASE", None)
    subprocess.run(
        [sys.executable, "-c", RECORD, *TICKETS], cwd=root, env=env, check=True
    )
    return root


@pytest.fixture
def in_app(triage: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The working directory holds the application; the store is ``records``."""
    monkeypatch.chdir(triage)
    monkeypatch.delenv("TRIAGE_RELEASE", raising=False)
    yield triage
    sys.modules.pop("support_triage", None)


def test_jobs_two_lists_changed_and_diverged_and_writes_junit(
    invoke: Invoke, in_app: Path
) -> None:
    """Release 3 in two workers: one changed, one diverged, one error; exit 8."""
    junit = in_app / "report.xml"
    result = invoke(
        "--store", "records", "rerun", "--all", "--app", APP, "--jobs", "2",
        "--junit", str(junit), "--json", TRIAGE_RELEASE="3",
    )  # fmt: skip
    assert result.exit_code == 8, result.output
    doc = orjson.loads(result.stdout)
    assert {
        k: doc[k] for k in ("selected", "same", "changed", "diverged", "error")
    } == {
        "selected": 5,
        "same": 2,
        "changed": 1,
        "diverged": 1,
        "error": 1,
    }
    rows = {row["outcome"]: row for row in doc["records"]}
    assert rows["changed"]["paths"] == ["priority"]
    assert (rows["diverged"]["step"], rows["diverged"]["position"]) == (
        "llm.summarize",
        3,
    )
    assert rows["error"]["reason"].startswith("no agent of this application handles")
    suite = ElementTree.parse(junit).getroot().find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == (
        "5",
        "2",
        "1",
    )
    cases = suite.findall("testcase")
    assert len(cases) == 5
    kinds = sorted((child.tag, child.get("type")) for case in cases for child in case)
    assert kinds == [
        ("error", "error"),
        ("failure", "changed"),
        ("failure", "diverged"),
    ]
    failing = {case.get("name") for case in cases if list(case)}
    assert failing == {row["executionId"] for row in doc["records"]}


def test_allow_changed_exits_zero_and_lists_only_what_is_not_same(
    invoke: Invoke, in_app: Path
) -> None:
    """Release 2 changes one answer: listed, summed up, allowed; progress on stderr."""
    result = invoke(
        "--store", "records", "rerun", "--all", "--intent", "ticket.triage",
        "--app", APP, "--allow", "changed", "--progress", TRIAGE_RELEASE="2",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Re-running: 4/4 records (100%)" in result.stderr
    lines = result.stdout.splitlines()
    (row,) = [line for line in lines if "exec-" in line]
    assert "ticket.triage@1.0  first deviation: output (output_changed); " in row
    assert row.endswith("answer differs at priority")
    assert lines[-5:] == [
        "same      3",
        "changed   1",
        "diverged  0",
        "error     0",
        "skipped   0",
    ]


def test_an_empty_selection_exits_zero_saying_so(invoke: Invoke, in_app: Path) -> None:
    """A selection matching nothing re-runs nothing, says so, and exits 0."""
    result = invoke(
        "--store", "records", "rerun", "--all", "--intent", "nothing.here",
        "--app", APP,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert "No records match the selection: nothing to re-run." in result.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--app", APP], "rerun needs an ID, or --all"),
        (["last", "--all", "--app", APP], "give an ID or --all, not both"),
        (["--all", "--app", APP, "--from", "1"], "--from re-runs one record"),
        (["--all"], "rerun --all needs --app MODULE:ATTR"),
        (["--all", "--app", APP, "--block-network"], "blocks the network already"),
    ],
)
def test_usage_errors(
    invoke: Invoke, in_app: Path, args: list[str], message: str
) -> None:
    """Options that do not go with --all, or a missing --app, are usage errors."""
    result = invoke("--store", "records", "rerun", *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_a_worker_that_cannot_import_the_app_is_an_error(
    invoke: Invoke, in_app: Path
) -> None:
    """An application the workers cannot import stops the run with its reason."""
    result = invoke(
        "--store", "records", "rerun", "--all", "--app", "no_such_module:router"
    )
    assert result.exit_code == 2
    assert "a re-run worker could not start: cannot import 'no_such_module'" in (
        result.stderr
    )


def test_export_writes_a_golden_set_that_reruns(
    invoke: Invoke, in_app: Path, tmp_path: Path
) -> None:
    """records export copies the selection verified; rerun --all runs it: all same."""
    golden = tmp_path / "golden"
    result = invoke(
        "--store", "records", "records", "export", "--to", str(golden),
        "--intent", "ticket.triage", "--sample", "2", "--seed", "7",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "Copied 2, skipped 0, 0 conflicts, 0 failed." in result.stdout
    assert invoke("--store", str(golden), "verify", "--all").exit_code == 0
    again = invoke("--store", str(golden), "rerun", "--all", "--app", APP, "--json")
    assert again.exit_code == 0, again.output
    assert orjson.loads(again.stdout)["same"] == 2
