"""diff_records: steps paired by content first, the first deviation marked."""

from __future__ import annotations

from typing import Any

import pytest
from recordkit import envelope

from intentusnet import MemoryExecutionStore, diff_records
from intentusnet.hashing import canonical_json, compute_hash, hash_bytes
from intentusnet.record.model import EventType, ExecutionRecord

Spec = tuple[str, Any, Any]  # name, args, output (an Exception: the step failed)


def _record(
    store: MemoryExecutionStore,
    specs: list[Spec],
    *,
    agent: str = "worker",
    candidates: list[str] | None = None,
    durations: list[float] | None = None,
    total_ms: float = 5.0,
) -> ExecutionRecord:
    """Write a record whose agent made the steps in ``specs``, in order."""
    wire = envelope()
    writer = store.open(wire, envelope_hash=compute_hash(wire))
    writer.append(EventType.INTENT_RECEIVED, {"requestId": "r", "envelopeHash": ""})
    writer.append(
        EventType.ROUTER_DECISION,
        {"strategy": "DIRECT", "candidates": candidates or [agent], "reason": "r"},
    )
    writer.append(EventType.AGENT_ATTEMPT_START, {"agent": agent, "attempt": 1})
    failed = None
    for number, (name, args, output) in enumerate(specs, 1):
        args_hash = hash_bytes(canonical_json(args))
        writer.append(
            EventType.STEP_START,
            {"step": number, "name": name, "args": args, "argsHash": args_hash},
        )
        error = None
        if isinstance(output, Exception):
            error = {"type": type(output).__name__, "message": str(output)}
            failed = failed or error
        writer.append(
            EventType.STEP_END,
            {
                "step": number,
                "name": name,
                "argsHash": args_hash,
                "outcome": "error" if error else "success",
                "durationMs": durations[number - 1] if durations else 0.5,
                "output": None if error else output,
                "outputHash": None if error else hash_bytes(canonical_json(output)),
                "error": error,
                "replayable": True,
                "source": "live",
            },
        )
    outcome = "error" if failed else "success"
    writer.append(
        EventType.AGENT_ATTEMPT_END,
        {"agent": agent, "attempt": 1, "outcome": outcome, "output": None},
    )
    writer.complete(
        {
            "status": outcome,
            "payload": None if failed else {"done": True},
            "error": None if failed is None else {"code": "AGENT_ERROR", **failed},
            "metadata": {"agent": agent, "durationMs": total_ms},
        }
    )
    return store.load(writer.execution_id)


@pytest.fixture
def store() -> MemoryExecutionStore:
    """An in-memory store."""
    return MemoryExecutionStore()


def _steps(count: int) -> list[Spec]:
    return [(f"tool.{i % 7}", {"i": i}, {"out": i}) for i in range(count)]


def test_identical_runs_have_no_differences(store: MemoryExecutionStore) -> None:
    """Two records of the same steps diff as the same, with equal fingerprints."""
    found = diff_records(_record(store, _steps(10)), _record(store, _steps(10)))
    assert found.same
    assert found.deviation_point is None
    assert found.a_fingerprint == found.b_fingerprint


def test_one_step_inserted_at_the_start_is_one_step_added(
    store: MemoryExecutionStore,
) -> None:
    """A step inserted before 50 others is exactly one step_added: no cascade."""
    base = _steps(50)
    found = diff_records(
        _record(store, base), _record(store, [("tool.new", {"x": 1}, 1), *base])
    )
    assert [(e.kind, e.name) for e in found.entries] == [("step_added", "tool.new")]
    assert found.deviation_point is found.entries[0]
    assert found.a_fingerprint != found.b_fingerprint


def test_removed_step_is_placed_where_it_was(store: MemoryExecutionStore) -> None:
    """A step missing in the middle is one step_removed, in its place in the order."""
    base = _steps(20)
    other = base[:9] + base[10:]
    changed = list(other)
    changed[15] = (changed[15][0], changed[15][1], {"out": "different"})
    found = diff_records(_record(store, base), _record(store, changed))
    assert [e.kind for e in found.entries] == ["step_removed", "output_changed"]
    removed = found.entries[0]
    assert removed.a is not None
    assert removed.a.number == 10
    assert removed.deviation_point


def test_changed_args_pair_by_position_as_a_fallback(
    store: MemoryExecutionStore,
) -> None:
    """A step whose args changed pairs with the old call of that name: args_changed."""
    base = _steps(12)
    changed = list(base)
    changed[5] = ("tool.5", {"i": 500, "extra": True}, {"out": 5})
    found = diff_records(_record(store, base), _record(store, changed))
    (entry,) = found.entries
    assert (entry.kind, entry.name, entry.changes) == (
        "args_changed",
        "tool.5",
        ("args",),
    )
    assert entry.paths == ("extra", "i")
    assert entry.a is not None
    assert entry.b is not None
    assert entry.a.number == entry.b.number == 6


def test_error_and_status_changes(store: MemoryExecutionStore) -> None:
    """A step that now fails is error_changed; the record's status and answer follow."""
    base = _steps(4)
    broken = list(base)
    broken[2] = (base[2][0], base[2][1], ValueError("bad"))
    found = diff_records(_record(store, base), _record(store, broken))
    assert [(e.scope, e.kind) for e in found.entries] == [
        ("step", "error_changed"),
        ("record", "output_changed"),
        ("record", "error_changed"),
        ("record", "status_changed"),
    ]
    step_entry = found.entries[0]
    assert step_entry.deviation_point
    assert "success -> ValueError: bad" in step_entry.detail
    status = found.of_kind("status_changed")[0]
    assert (status.before, status.after) == ("completed", "failed")


def test_decision_change_comes_first(store: MemoryExecutionStore) -> None:
    """Another routing decision is the first deviation; another agent is reported."""
    found = diff_records(
        _record(store, _steps(3), candidates=["a", "b"], agent="a"),
        _record(store, _steps(3), candidates=["b", "a"], agent="b"),
    )
    assert [e.kind for e in found.entries] == ["decision_changed", "agent_changed"]
    assert found.entries[0].deviation_point
    assert found.entries[0].after == {"strategy": "DIRECT", "candidates": ["b", "a"]}


def test_repeated_steps_pair_by_occurrence(store: MemoryExecutionStore) -> None:
    """The n-th call of a step with equal args pairs with the n-th: one removal."""
    same: Spec = ("poll", {"job": 1}, {"state": "running"})
    done: Spec = ("poll", {"job": 1}, {"state": "done"})
    found = diff_records(
        _record(store, [same, same, same, done]), _record(store, [same, same, done])
    )
    assert [e.kind for e in found.entries] == ["output_changed", "step_removed"]


def test_durations_count_only_when_much_longer(store: MemoryExecutionStore) -> None:
    """Small timing noise is ignored; a large slowdown is reported, not a deviation."""
    specs = _steps(3)
    fast = _record(store, specs, durations=[1.0, 2.0, 3.0])
    noisy = _record(store, specs, durations=[1.6, 2.5, 3.2])
    slow = _record(store, specs, durations=[1.0, 250.0, 3.0], total_ms=300.0)
    assert diff_records(fast, noisy).same
    found = diff_records(fast, slow)
    assert [(e.scope, e.kind) for e in found.entries] == [
        ("step", "duration_changed"),
        ("record", "duration_changed"),
    ]
    assert found.deviation_point is None
    assert found.same  # durations alone are not another behaviour


def test_json_form(store: MemoryExecutionStore) -> None:
    """to_json names both records, their fingerprints and the deviation index."""
    a = _record(store, _steps(2))
    b = _record(store, [*_steps(2), ("tool.late", {}, None)])
    doc = diff_records(a, b).to_json()
    assert doc["a"] == a.execution_id
    assert doc["b"] == b.execution_id
    assert doc["deviationPoint"] == 0
    assert doc["sameFingerprint"] is False
    entries = doc["entries"]
    assert isinstance(entries, list)
    assert entries[0]["kind"] == "step_added"
    assert entries[0]["b"]["name"] == "tool.late"
