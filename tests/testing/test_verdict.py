"""check_record: one record re-run strictly, classified same/changed/diverged/error."""

from __future__ import annotations

import contextlib
import socket
from pathlib import Path

import pytest
from recordkit import edit, line_offsets, record_file, start

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
    record_steps,
    step,
)
from intentusnet.testing import check_record

#: What today's code does differently: set by each test before it re-runs.
RELEASE = {"double": False, "extra_step": False, "boom": False, "dial": False}


@step("lookup")
def lookup(n: int) -> int:
    return n + 1


@step("extra")
def extra(n: int) -> int:
    return n


def _router(store: FileExecutionStore | None) -> IntentRouter:
    router = IntentRouter(store=store)

    @router.agent("calc", name="calc")
    def calc(envelope: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        n = int(str(envelope.payload["n"]))
        value = lookup(n)
        if RELEASE["extra_step"] and n == 2:
            value = extra(value)
        if RELEASE["boom"]:
            raise RuntimeError("new code broke")
        if RELEASE["dial"]:
            # the agent swallows the refusal: the block still tells
            with contextlib.suppress(OSError):
                socket.create_connection(("192.0.2.1", 80), timeout=1)
        return {"n": n, "value": value * 2 if RELEASE["double"] else value}

    @router.agent("parent", name="parent")
    def parent(envelope: IntentEnvelope, ctx: AgentContext) -> object:
        child = {"intent": {"name": "calc"}, "payload": {"n": 5}}
        return ctx.route(child).payload

    return router


@pytest.fixture
def recorded(tmp_path: Path) -> tuple[FileExecutionStore, list[str]]:
    """A store holding two recorded ``calc`` runs (n=1, n=2) made by release 1."""
    for key in RELEASE:
        RELEASE[key] = False
    store = FileExecutionStore(tmp_path / "records")
    router = _router(store)
    ids = [
        str(
            router.route_intent(
                {"intent": {"name": "calc"}, "payload": {"n": n}}
            ).metadata.execution_id
        )
        for n in (1, 2)
    ]
    yield store, ids
    store.close()


def test_unchanged_code_is_same(recorded: tuple[FileExecutionStore, list[str]]) -> None:
    """Re-running with the code that recorded the runs answers the same."""
    store, ids = recorded
    verdicts = [check_record(store, i, _router(None)) for i in ids]
    assert [v.outcome for v in verdicts] == ["same", "same"]
    assert verdicts[0].intent == "calc@1.0"
    assert verdicts[0].reason == ""


def test_another_answer_is_changed_with_its_paths(
    recorded: tuple[FileExecutionStore, list[str]],
) -> None:
    """A different final answer is `changed`, naming the deviation, paths, answers."""
    store, ids = recorded
    same = check_record(store, ids[0], _router(None))
    assert (same.recorded, same.answer) == (None, None)  # only `changed` has them
    RELEASE["double"] = True
    verdict = check_record(store, ids[0], _router(None))
    assert verdict.outcome == "changed"
    assert verdict.paths == ("value",)
    assert verdict.deviation == "output (output_changed)"
    assert "answer differs at value" in verdict.reason
    recorded_value, answer_value = verdict.recorded, verdict.answer
    assert isinstance(recorded_value, dict)
    assert isinstance(answer_value, dict)
    assert answer_value["value"] == 2 * recorded_value["value"]


def test_a_step_not_recorded_is_diverged_with_its_position(
    recorded: tuple[FileExecutionStore, list[str]],
) -> None:
    """Code asking for a step the record lacks is `diverged` at that step's number."""
    store, ids = recorded
    RELEASE["extra_step"] = True
    first, second = (check_record(store, i, _router(None)) for i in ids)
    assert first.outcome == "same"  # n=1 takes no new step
    assert (second.outcome, second.step, second.position) == ("diverged", "extra", 2)
    assert "asked for 'extra' at step 2" in second.reason


def test_new_code_raising_is_error(
    recorded: tuple[FileExecutionStore, list[str]],
) -> None:
    """An agent that now raises is `error`, with its message."""
    store, ids = recorded
    RELEASE["boom"] = True
    verdict = check_record(store, ids[0], _router(None))
    assert verdict.outcome == "error"
    assert "new code broke" in verdict.reason


def test_a_connection_is_refused_and_reported(
    recorded: tuple[FileExecutionStore, list[str]],
) -> None:
    """The network is blocked during the re-run; a tried connection is an `error`."""
    store, ids = recorded
    RELEASE["dial"] = True
    verdict = check_record(store, ids[0], _router(None))
    assert verdict.outcome == "error"
    assert verdict.reason == "connected to 192.0.2.1:80 (the network is blocked)"


def test_records_that_cannot_be_rerun_are_errors_with_reasons(
    recorded: tuple[FileExecutionStore, list[str]],
) -> None:
    """Tampered, incomplete, invalidated and foreign records are refused as `error`."""
    store, ids = recorded
    path = record_file(store, ids[0])
    edit(path, line_offsets(path)[1] + 20)
    unfinished = start(store)
    unfinished.close()
    store.invalidate(ids[1], "bad data")
    foreign = _router(store).route_intent({"intent": {"name": "parent"}, "payload": {}})
    router = IntentRouter()  # today's app: handles none of these intents
    reasons = {
        i: check_record(store, i, router).reason
        for i in (
            ids[0],
            unfinished.execution_id,
            ids[1],
            foreign.metadata.execution_id,
        )
    }
    assert reasons[ids[0]].startswith("tampered: ")
    assert reasons[unfinished.execution_id] == "not replayable: execution_incomplete"
    assert reasons[ids[1]] == "not replayable: manually_invalidated"
    assert reasons[str(foreign.metadata.execution_id)] == (
        "no agent of this application handles parent@1.0 (from another app?)"
    )
    assert all(check_record(store, i, router).outcome == "error" for i in reasons)


def test_a_child_record_is_skipped_and_rerun_with_its_parent(tmp_path: Path) -> None:
    """A ctx.route child is `skipped`; its parent re-runs it and is `same`."""
    store = FileExecutionStore(tmp_path)
    answer = _router(store).route_intent({"intent": {"name": "parent"}, "payload": {}})
    parent = store.load(str(answer.metadata.execution_id))
    (route,) = record_steps(parent)
    child = route.child_execution_id
    assert child is not None
    router = _router(None)
    skipped = check_record(store, child, router)
    assert skipped.outcome == "skipped"
    assert skipped.reason == f"a child of {parent.execution_id}, re-run with it"
    assert check_record(store, parent.execution_id, router).outcome == "same"
    store.close()
