"""explain(record): the failing agent and step, its error, the probable root cause."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from intentusnet import (
    AgentContext,
    IntentEnvelope,
    IntentRouter,
    MemoryExecutionStore,
    explain,
)
from intentusnet.record.model import ExecutionRecord


def _raise(kind: type[Exception], message: str) -> None:
    # Not `assert`: pytest rewrites the message of asserts in test modules.
    raise kind(message)


@pytest.fixture
def store() -> MemoryExecutionStore:
    """An in-memory store."""
    return MemoryExecutionStore()


@pytest.fixture
def router(store: MemoryExecutionStore) -> Iterator[IntentRouter]:
    """A router recording to the in-memory store."""
    with IntentRouter(store=store) as r:
        yield r


def _route(
    router: IntentRouter, store: MemoryExecutionStore, intent: str
) -> ExecutionRecord:
    response = router.route_intent({"intent": {"name": intent}, "payload": {"id": 7}})
    assert response.metadata.execution_id is not None
    return store.load(response.metadata.execution_id)


def test_null_output_feeding_a_failing_step_is_the_root_cause(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """A lookup that returned None, passed to a step that fails, is named."""

    def score(contact: dict[str, Any] | None) -> int:
        if contact is None:
            _raise(AssertionError, "contact required")
        return 1

    @router.agent("crm", name="pipeline")
    def pipeline(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        contact = ctx.step("crm.lookup", {"id": env.payload["id"]}, lambda id: None)
        ctx.step("crm.log", {"id": 1}, lambda id: {"ok": True})
        return {"score": ctx.step("crm.score", {"contact": contact}, score)}

    record = _route(router, store, "crm")
    found = explain(record)
    assert found.failed
    assert found.summary == (
        "crm.lookup returned None; crm.score failed with "
        "AssertionError: contact required"
    )
    assert (found.agent, found.attempt) == ("pipeline", 1)
    assert found.step is not None
    assert found.step.name == "crm.score"
    assert found.root_cause is not None
    assert found.root_cause.name == "crm.lookup"
    assert found.error == {"type": "AssertionError", "message": "contact required"}
    assert found.traceback is not None
    assert "contact required" in found.traceback
    assert found.failure_seq == found.step.end_seq
    assert "that value is in the arguments of crm.score" in found.evidence


def test_value_of_another_type_is_named(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """A string where an object was expected, then a TypeError, points at its source."""

    @router.agent("crm", name="pipeline")
    def pipeline(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        contact = ctx.step("crm.lookup", {"id": 1}, lambda id: "not found")
        ctx.step("crm.other", {"id": 2}, lambda id: {"fine": True})
        return ctx.step(
            "crm.score", {"contact": contact}, lambda contact: contact["size"]
        )

    found = explain(_route(router, store, "crm"))
    assert found.root_cause is not None
    assert found.root_cause.name == "crm.lookup"
    assert found.summary.startswith(
        'crm.lookup returned a str ("not found"); crm.score'
    )
    assert "TypeError" in found.summary


def test_agent_level_failure_after_an_empty_result(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """With no failing step, the agent's error and the empty step before it."""

    @router.agent("report", name="reporter")
    def reporter(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        rows = ctx.step("db.rows", {"table": "t"}, lambda table: [])
        return {"first": rows[0]}

    found = explain(_route(router, store, "report"))
    assert found.step is None
    assert found.summary == (
        "db.rows returned an empty list; agent reporter failed with "
        "IndexError: list index out of range"
    )


def test_no_suspect_step_names_just_the_failure(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """When no earlier step looks wrong, the failure alone is reported."""

    @router.agent("job", name="worker")
    def worker(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("fetch", {"n": 1}, lambda n: {"rows": 3})
        ctx.step("upload", {"n": 1}, lambda n: _raise(TimeoutError, "storage slow"))
        return {}

    found = explain(_route(router, store, "job"))
    assert found.root_cause is None
    assert found.summary == "upload failed with TimeoutError: storage slow"


def test_completed_record_has_nothing_to_explain(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """A completed record says nothing failed."""
    router.agent("ok", name="fine")(lambda env, ctx: {"ok": True})
    found = explain(_route(router, store, "ok"))
    assert not found.failed
    assert found.summary == "the execution completed: nothing failed"
    assert found.to_json()["rootCause"] is None


def test_no_agent_failure(router: IntentRouter, store: MemoryExecutionStore) -> None:
    """A record whose intent had no agent explains itself from its answer."""
    found = explain(_route(router, store, "nobody"))
    assert found.failed
    assert found.summary.startswith("the execution failed with NO_AGENT: ")


def test_failed_child_is_explained_from_its_own_record(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """A failed route: step leads into the child's record when a store is given."""

    @router.agent("child", name="kid")
    def kid(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        found = ctx.step("kid.find", {"q": 1}, lambda q: None)
        return {"v": ctx.step("kid.use", {"found": found}, lambda found: found["v"])}

    @router.agent("parent", name="boss")
    def boss(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        answer = ctx.route({"intent": {"name": "child"}})
        if answer.status != "success":
            _raise(RuntimeError, "child failed")
        return {}

    record = _route(router, store, "parent")
    found = explain(record, store)
    assert found.step is not None
    assert found.step.name == "route:child"
    assert found.child is not None
    assert found.child.summary == (
        "kid.find returned None; kid.use failed with TypeError: "
        "'NoneType' object is not subscriptable"
    )
    assert found.child.execution_id in found.summary
    assert explain(record).child is None  # without a store, not followed
