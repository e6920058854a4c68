"""``debug``, ``rerun`` and ``diff`` on the example CRM pipeline; the inspect tree."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from intentusnet import AgentContext, IntentEnvelope, IntentRouter, record_steps
from intentusnet.store import FileExecutionStore

from .support import (
    CRM_APP,
    CRM_EXAMPLE,
    Invoke,
    forget_crm_app,
    record_crm_failure,
)


def test_debug_names_the_root_cause_and_how_to_resume(
    invoke: Invoke, crm: Path, store_root: Path, tmp_path: Path
) -> None:
    """debug prints the explanation, the timeline to the failure, how to resume."""
    failed = record_crm_failure(invoke, tmp_path)
    result = invoke("--store", str(store_root), "debug", failed)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "crm.lookup returned None; crm.score failed with AssertionError: " in out
    assert "root cause: crm.lookup (step 1)" in out
    timeline = out.split("Timeline up to the failure")[1].split("Once fixed")[0]
    assert "crm.score (step 3)" in timeline
    assert "FINAL_RESPONSE" not in timeline
    assert f"rerun {failed} --app MODULE:ATTR --from-root-cause" in out
    assert f"--store {store_root}" in out

    doc = orjson.loads(
        invoke("--store", str(store_root), "debug", "--json", failed).stdout
    )
    assert set(doc) == {"explanation", "timeline", "resume", "configuration"}
    assert doc["explanation"]["rootCause"]["name"] == "crm.lookup"


def test_rerun_strict_then_resumed_then_from_the_root_cause(
    invoke: Invoke, crm: Path, store_root: Path, tmp_path: Path
) -> None:
    """Strict and resumed re-runs fail again (exit 8); from the root cause it works."""
    failed = record_crm_failure(invoke, tmp_path)
    store = ("--store", str(store_root))

    same = invoke(*store, "rerun", failed, "--app", CRM_APP, "--json")
    assert same.exit_code == 8, same.output
    assert orjson.loads(same.stdout)["diff"]["same"] is True
    forget_crm_app()

    # Resuming serves the lookup's recorded None: the fix never runs.
    resumed = invoke(
        *store, "rerun", failed, "--app", CRM_APP, "--from-failure", CRM_FIXED="1"
    )
    assert resumed.exit_code == 8, resumed.output
    assert "served: crm.lookup (step 1), email.send (step 2)" in resumed.stdout
    assert ": failed" in resumed.stdout.splitlines()[0]
    forget_crm_app()

    fixed = invoke(
        *store, "rerun", failed, "--app", CRM_APP, "--from-root-cause", CRM_FIXED="1"
    )
    assert fixed.exit_code == 0, fixed.output
    first = fixed.stdout.splitlines()[0]
    assert f"Re-ran {failed} from the root cause, crm.lookup (step 1) as " in first
    assert "served: email.send (step 2)" in fixed.stdout
    assert "ran:    crm.lookup (step 1), crm.score (step 3) [not in the record]" in (
        fixed.stdout
    )
    assert "> output_changed   crm.lookup (step 1 -> 1): output null -> an object" in (
        fixed.stdout
    )
    assert sys.modules["debug_fix_replay"].MAILBOX == []  # served, not sent again
    new_id = fixed.stdout.split(" as ", 1)[1].split(":", 1)[0]

    diff = invoke(*store, "diff", failed, new_id)
    assert diff.exit_code == 0, diff.output
    assert "first deviation: crm.lookup (output_changed)" in diff.stdout
    doc = orjson.loads(invoke(*store, "diff", failed, new_id, "--json").stdout)
    steps = [e for e in doc["entries"] if e["scope"] == "step"]
    assert [(e["kind"], e["name"]) for e in steps] == [
        ("output_changed", "crm.lookup"),
        ("args_changed", "crm.score"),
    ]

    shown = invoke(*store, "inspect", new_id)
    assert f"replay of:   {failed}" in shown.stdout


def test_live_lookup_and_allow_live_score(
    invoke: Invoke, crm: Path, store_root: Path, tmp_path: Path
) -> None:
    """--live runs the fixed lookup; --allow-live the scoring the record lacks."""
    failed = record_crm_failure(invoke, tmp_path)
    result = invoke(
        "--store",
        str(store_root),
        "rerun",
        failed,
        "--app",
        CRM_APP,
        "--live",
        "crm.lookup",
        "--allow-live",
        "--json",
        CRM_FIXED="1",
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert doc["status"] == "success"
    assert doc["served"] == ["email.send"]
    assert [s["name"] for s in doc["steps"] if s["miss"]] == ["crm.score"]


def test_debug_of_a_completed_record(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """A completed record has nothing to debug, and no resume command."""
    result = invoke("--store", str(store_root), "debug", ids["completed"])
    assert result.exit_code == 0
    assert "nothing failed" in result.stdout
    assert "Once fixed" not in result.stdout


def test_debug_names_the_app_intentusnet_app_gives(
    invoke: Invoke, crm: Path, store_root: Path, tmp_path: Path
) -> None:
    """With INTENTUSNET_APP set, the resume command names that app, not MODULE:ATTR."""
    failed = record_crm_failure(invoke, tmp_path)
    result = invoke(
        "--store", str(store_root), "debug", failed, INTENTUSNET_APP=CRM_APP
    )
    assert result.exit_code == 0, result.output
    assert f"rerun {failed} --app {CRM_APP} --from-root-cause" in result.stdout
    assert "MODULE:ATTR" not in result.stdout
    doc = orjson.loads(
        invoke(
            "--store",
            str(store_root),
            "debug",
            "--json",
            failed,
            INTENTUSNET_APP=CRM_APP,
        ).stdout
    )
    assert f"--app {CRM_APP} " in doc["resume"]


def test_debug_of_an_mcp_session_suggests_no_rerun(
    invoke: Invoke, store_root: Path
) -> None:
    """A failed record of the MCP proxy's intent: no rerun hint, no MODULE:ATTR."""
    store = FileExecutionStore(store_root)
    with IntentRouter(store=store) as router:

        @router.agent("mcp.session")
        def session(env: IntentEnvelope, ctx: AgentContext) -> None:
            ctx.step("mcp:tools/call:search", {"q": "x"}, lambda q: 1 / 0)

        failed = router.route_intent({"intent": {"name": "mcp.session"}})
    store.close()
    assert failed.status == "error"
    execution_id = failed.metadata.execution_id
    result = invoke("--store", str(store_root), "debug", execution_id)
    assert result.exit_code == 0, result.output
    assert "MODULE:ATTR" not in result.stdout
    assert "rerun" not in result.stdout
    assert "Recorded by the MCP proxy" in result.stdout
    doc = orjson.loads(
        invoke("--store", str(store_root), "debug", "--json", execution_id).stdout
    )
    assert doc["resume"] is None


def test_unknown_records_exit_3(invoke: Invoke, store_root: Path) -> None:
    """debug, diff and rerun on a missing record exit 3."""
    store = ("--store", str(store_root))
    assert invoke(*store, "debug", "exec-missing").exit_code == 3
    assert invoke(*store, "diff", "exec-a", "exec-b").exit_code == 3
    assert invoke(*store, "rerun", "exec-a", "--app", CRM_APP).exit_code == 3


def test_inspect_shows_the_tree_of_child_intents(
    invoke: Invoke, store_root: Path
) -> None:
    """inspect shows a child among its parent's children, in text and JSON."""

    def parent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        return {"child": ctx.route({"intent": {"name": "leaf"}}).status}

    store = FileExecutionStore(store_root)
    with IntentRouter(store=store) as router:
        router.agent("leaf", name="leaf")(lambda env, ctx: {"ok": True})
        router.agent("root", name="root")(parent)
        response = router.route_intent({"intent": {"name": "root"}})
    store.close()
    parent_id = response.metadata.execution_id
    assert parent_id is not None
    reader = FileExecutionStore(store_root)
    (child_id,) = [s.child_execution_id for s in record_steps(reader.load(parent_id))]
    reader.close()
    assert child_id is not None
    text = invoke("--store", str(store_root), "inspect", child_id).stdout
    tree = text.split("\nTree\n")[1]
    assert parent_id in tree.splitlines()[0]
    assert f"└─ {child_id}" in tree
    assert "(route:leaf, step 1)  <- this record" in tree
    doc = orjson.loads(
        invoke("--store", str(store_root), "inspect", "--json", parent_id).stdout
    )
    assert doc["tree"]["current"] is True
    assert [c["executionId"] for c in doc["tree"]["children"]] == [child_id]


def test_example_walks_the_whole_loop(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """examples/debug_fix_replay.py fails, explains, re-runs from the root cause."""
    import runpy
    import tempfile

    monkeypatch.delenv("CRM_STORE", raising=False)
    monkeypatch.delenv("CRM_FIXED", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    namespace = runpy.run_path(str(CRM_EXAMPLE), run_name="__main__")
    namespace["router"].close()
    out = capsys.readouterr().out
    assert "crm.lookup returned None; crm.score failed with AssertionError" in out
    assert "served ['email.send'], ran ['crm.lookup', 'crm.score']" in out
    assert "e-mails sent: 1 (before: 1); CRM lookups: 2 (before: 1)" in out
    diff = out.split("5. ")[1]
    assert diff.count("<- deviation point") == 1
    assert "output_changed   crm.lookup (step 1 -> 1): output null" in diff


KILLED_IN_ATTEMPT_2 = """
import sys, time
from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

router = IntentRouter(store=FileExecutionStore(sys.argv[1]))

@router.agent("flaky", name="first", priority=1)
def first(env, ctx):
    raise ValueError("first one fails")

@router.agent("flaky", name="second", priority=2)
def second(env, ctx):
    print(ctx.execution_id, flush=True)
    time.sleep(120)  # killed here, during attempt 2
    return {"late": True}

router.route_intent({"intent": {"name": "flaky"}, "routing": {"strategy": "FALLBACK"}})
"""


def test_debug_of_a_run_killed_during_its_second_attempt(
    invoke: Invoke, store_root: Path
) -> None:
    """The kill in attempt 2 is the failure, not attempt 1's handled error."""
    import os
    import signal
    import subprocess

    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_IN_ATTEMPT_2, str(store_root)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        killed = child.stdout.readline().strip()
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert killed.startswith("exec-")

    result = invoke("--store", str(store_root), "debug", killed)
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert "second (attempt 2)" in out
    assert "killed" in out or "stopped" in out
    probable = out.split("Probable cause")[1].split("Timeline")[0]
    assert "attempt 2" in probable
    assert "ValueError" not in probable.splitlines()[1]  # not the summary
    assert "AGENT_ATTEMPT_START" in out.split("Timeline up to the failure")[1]

    doc = orjson.loads(
        invoke("--store", str(store_root), "debug", "--json", killed).stdout
    )
    explained = doc["explanation"]
    assert (explained["agent"], explained["attempt"]) == ("second", 2)
    assert explained["status"] == "incomplete"
    assert explained["error"]["type"] == "unfinished"
    assert "first one fails" not in explained["summary"]
    assert any("first one fails" in line for line in explained["evidence"])
    last = doc["timeline"][-1]
    assert last["type"] == "AGENT_ATTEMPT_START"
