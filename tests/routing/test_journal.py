"""Resuming from a record by position: served, live, in doubt, nondeterministic."""

from __future__ import annotations

import pytest

from intentusnet import (
    IdempotencyConflict,
    IntentRouter,
    MemoryExecutionStore,
    NondeterminismError,
    RecordStatus,
    ResumeRefused,
)
from intentusnet.envelope import IntentEnvelope

ENV = {"intent": {"name": "job"}, "payload": {"n": 1}}


class Crash(BaseException):
    """Stands for the process dying: routing closes the record unfinished."""


def _router(calls: list[str], plan: dict[str, object]) -> IntentRouter:
    """A router whose ``job`` runs ``plan["order"]``, crashing at ``plan["crash"]``."""
    router = IntentRouter(store=MemoryExecutionStore())

    @router.agent("job")
    def job(env, ctx):  # type: ignore[no-untyped-def]
        order = plan.get("order", ("a", "b", "c"))
        for name in order:  # type: ignore[attr-defined]
            if name == plan.get("crash"):
                raise Crash
            ctx.step(name, {"n": 1}, lambda n, name=name: calls.append(name) or n)
        return {"done": list(order)}  # type: ignore[call-overload]

    return router


def _interrupted(router: IntentRouter) -> str:
    with pytest.raises(Crash):
        router.route_intent(ENV)
    [summary] = router.store.list()
    assert summary.status is RecordStatus.INCOMPLETE
    return summary.execution_id


def test_resume_serves_ended_steps_and_runs_the_rest() -> None:
    """Steps that ended are served; the rest runs live, once."""
    calls: list[str] = []
    plan: dict[str, object] = {"crash": "c"}
    router = _router(calls, plan)
    old = _interrupted(router)
    plan["crash"] = None

    answer = router.resume(old)

    assert answer.payload == {"done": ["a", "b", "c"]}
    assert calls == ["a", "b", "c"]


def test_resume_of_a_finished_or_resumed_execution_is_refused() -> None:
    """A record that finished, or whose chain finished, is not resumed again."""
    calls: list[str] = []
    plan: dict[str, object] = {"crash": "c"}
    router = _router(calls, plan)
    old = _interrupted(router)
    plan["crash"] = None
    router.resume(old)
    with pytest.raises(ResumeRefused) as refused:
        router.resume(old)
    assert refused.value.reason == "complete"


def test_a_step_out_of_recorded_order_parks_the_execution() -> None:
    """Code asking for another step than recorded stops with nondeterminism."""
    calls: list[str] = []
    plan: dict[str, object] = {"crash": "c"}
    router = _router(calls, plan)
    old = _interrupted(router)
    plan.update(crash=None, order=("b", "a", "c"))

    answer = router.resume(old)

    assert answer.error is not None
    assert answer.error.details["reason"] == "nondeterminism"
    assert answer.error.details["step"] == 1
    assert calls == ["a", "b"]  # nothing ran live after the mismatch
    record = router.store.load(str(answer.metadata.execution_id))
    assert record.header.status is RecordStatus.NEEDS_ATTENTION
    ends = [e.data for e in record.events if e.type.value == "STEP_END"]
    assert ends[-1]["error"] == {
        "type": NondeterminismError.__name__,
        "message": answer.error.details["message"],
    }


def test_a_changed_configuration_needs_force() -> None:
    """Another agent set for the intent refuses resume unless forced."""
    calls: list[str] = []
    plan: dict[str, object] = {"crash": "c"}
    router = _router(calls, plan)
    old = _interrupted(router)
    plan["crash"] = None

    @router.agent("job", name="second", priority=200)
    def second(env, ctx):  # type: ignore[no-untyped-def]
        return {}

    with pytest.raises(ResumeRefused) as refused:
        router.resume(old)
    assert refused.value.reason == "configuration_changed"
    assert router.resume(old, force=True).status == "success"


def test_a_key_answers_once_and_refuses_another_envelope() -> None:
    """A repeated key returns the recorded answer; another envelope is a conflict."""
    calls: list[str] = []
    router = _router(calls, {})
    first = router.route_intent(ENV, idempotency_key="order-1")
    again = router.route_intent(ENV, idempotency_key="order-1")
    assert again.metadata.from_replay
    assert again.payload == first.payload
    assert calls == ["a", "b", "c"]
    other = IntentEnvelope.model_validate({**ENV, "payload": {"n": 2}})
    with pytest.raises(IdempotencyConflict) as conflict:
        router.route_intent(other, idempotency_key="order-1")
    assert conflict.value.recorded_hash == first.metadata.envelope_hash
    assert conflict.value.given_hash == router.envelope_hash(other)
    assert calls == ["a", "b", "c"]


def test_a_resume_interrupted_before_its_steps_is_resumed_from_the_chain() -> None:
    """A resume that died holding no step loses none: the next serves the first."""
    calls: list[str] = []
    plan: dict[str, object] = {"crash": "c"}
    router = _router(calls, plan)
    old = _interrupted(router)
    plan["crash"] = "a"  # the resume dies before it re-opens step 1
    with pytest.raises(Crash):
        router.resume(old)
    between = router.store.resumed_by(old)
    assert between is not None
    plan["crash"] = None

    answer = router.resume(old)

    assert answer.payload == {"done": ["a", "b", "c"]}
    assert calls == ["a", "b", "c"]  # a and b ran once, in the first record
    record = router.store.load(str(answer.metadata.execution_id))
    served = [
        e.data["servedFrom"]
        for e in record.events
        if e.type.value == "STEP_END" and e.data.get("source") == "record"
    ]
    assert served == [{"executionId": old, "step": 1}, {"executionId": old, "step": 2}]


def test_a_chain_missing_a_record_is_not_resumed() -> None:
    """A resume chain whose first record is gone is refused, nothing run."""
    calls: list[str] = []
    plan: dict[str, object] = {"crash": "c"}
    router = _router(calls, plan)
    old = _interrupted(router)
    plan["crash"] = "a"
    with pytest.raises(Crash):
        router.resume(old)
    newest = router.store.resumed_by(old)
    assert newest is not None
    router.store.delete(old)
    plan["crash"] = None

    with pytest.raises(ResumeRefused) as refused:
        router.resume(newest)

    assert refused.value.reason == "chain_broken"
    assert old in refused.value.detail
    assert calls == ["a", "b"]
    assert router.store.resumed_by(newest) is None
