"""Golden sets: records export's children, golden_cases, check_golden."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from recordkit import record_file

from intentusnet import AgentContext, FileExecutionStore, IntentEnvelope, IntentRouter
from intentusnet.cli import cli
from intentusnet.testing import check_golden, golden_cases

#: The checkout under test, first on a subprocess's path.
CHECKOUT = str(Path(__file__).resolve().parents[2])
#: Today's answer for ``greet``: tests change it to see a golden case fail.
GREETING = {"word": "hello"}


def _router(store: FileExecutionStore | None = None) -> IntentRouter:
    router = IntentRouter(store=store)

    @router.agent("greet", name="greet")
    def greet(envelope: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        who = envelope.payload["id"]
        name = ctx.step("names.lookup", {"key": who}, lambda key: str(key).upper())
        return {"text": f"{GREETING['word']} {name}"}

    @router.agent("welcome", name="welcome")
    def welcome(envelope: IntentEnvelope, ctx: AgentContext) -> object:
        child = {"intent": {"name": "greet"}, "payload": {"id": "ada"}}
        return ctx.route(child).payload

    return router


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    """A golden set exported from a store: a ``welcome`` run and a ``greet`` run."""
    GREETING["word"] = "hello"
    source = tmp_path / "records"
    with FileExecutionStore(source) as store, _router(store) as router:
        router.route_intent({"intent": {"name": "welcome"}, "payload": {}})
        router.route_intent({"intent": {"name": "greet"}, "payload": {"id": "bob"}})
    target = tmp_path / "golden"
    result = CliRunner().invoke(
        cli,
        [
            *("--store", str(source), "records", "export", "--to", str(target)),
            *("--intent", "welcome", "--json"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert '"copied": 2' in result.stdout  # the welcome run and its greet child
    result = CliRunner().invoke(
        cli,
        [
            *("--store", str(source), "records", "export", "--to", str(target)),
            *("--intent", "greet", "--limit", "1"),
        ],
    )
    assert result.exit_code == 0, result.output
    return target


def test_golden_cases_leave_children_out(golden: Path) -> None:
    """One case per top-level record, oldest first, named intent/id."""
    cases = golden_cases(golden)
    assert [case.intent for case in cases] == ["welcome@1.0", "greet@1.0"]
    assert str(cases[0]) == f"welcome@1.0/{cases[0].execution_id}"


def test_check_golden_passes_today_and_fails_on_a_change(golden: Path) -> None:
    """Unchanged code passes every case; a changed answer fails naming the path."""
    router = _router()
    for case in golden_cases(golden):
        assert check_golden(case, router).same
    GREETING["word"] = "hi"
    with pytest.raises(AssertionError, match=r"changed: .* differs at text"):
        check_golden(golden_cases(golden)[1], router)


def test_a_tampered_golden_record_fails_its_case(golden: Path) -> None:
    """A record edited in the golden set is its case's failure, never a pass."""
    case = golden_cases(golden)[1]
    with FileExecutionStore(golden) as store:
        path = record_file(store, case.execution_id)
    data = bytearray(path.read_bytes())
    data[data.index(b"bob")] = ord("B")
    path.write_bytes(bytes(data))
    with pytest.raises(AssertionError, match="error: tampered: "):
        check_golden(case, _router())


def test_export_refuses_a_tampered_record_and_exits_6(tmp_path: Path) -> None:
    """A damaged record is not exported: noted as failed, exit 6 (as copy)."""
    source = tmp_path / "records"
    with FileExecutionStore(source) as store, _router(store) as router:
        answer = router.route_intent(
            {"intent": {"name": "greet"}, "payload": {"id": "x"}}
        )
    execution_id = str(answer.metadata.execution_id)
    with FileExecutionStore(source) as store:
        path = record_file(store, execution_id)
    data = bytearray(path.read_bytes())
    data[data.index(b'"x"') + 1] = ord("y")
    path.write_bytes(bytes(data))
    result = CliRunner().invoke(
        cli, ["--store", str(source), "records", "export", "--to", str(tmp_path / "g")]
    )
    assert result.exit_code == 6
    assert f"{execution_id}: failed: " in result.stdout
    assert "Copied 0, skipped 0, 0 conflicts, 1 failed." in result.stdout


#: A test module as a user writes it for the golden set, run with today's
#: ``greet`` answering "hi" where the recorded one said "hello".
INNER = """
import os
from pathlib import Path

import pytest

from intentusnet import IntentRouter
from intentusnet.testing import check_golden, golden_cases

router = IntentRouter()


@router.agent("greet", name="greet")
def greet(envelope, ctx):
    name = ctx.step("names.lookup", {"key": envelope.payload["id"]}, str.upper)
    return {"text": f"hi {name}"}


CASES = [c for c in golden_cases(os.environ["GOLDEN"]) if c.intent == "greet@1.0"]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_golden(case):
    check_golden(case, router)
"""


def test_a_failing_case_shows_the_test_line_and_both_answers(
    golden: Path, tmp_path: Path
) -> None:
    """pytest shows the user's check_golden line, then the answers: no library frame."""
    module = tmp_path / "test_greetings.py"
    module.write_text(INNER)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(module)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "GOLDEN": str(golden), "PYTHONPATH": CHECKOUT},
        timeout=120,
        check=False,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    report = done.stdout
    assert "1 failed" in report
    assert "intentusnet/testing/golden.py" not in report  # its frame is hidden
    failure = report.split(" FAILURES ")[1]
    source = [line for line in failure.splitlines() if line.startswith(">")]
    assert source == [">       check_golden(case, router)"]
    said = [line[1:].strip() for line in failure.splitlines() if line.startswith("E")]
    assert said[0].startswith("AssertionError: exec-")
    assert said[0].endswith(
        "changed: first deviation: output (output_changed); answer differs at text"
    )
    assert said[1:3] == [
        'recorded: {"text":"hello BOB"}',
        'today:    {"text":"hi BOB"}',
    ]
