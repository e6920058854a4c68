"""``intentusnet.fork``: today's code from a step on, the steps before it served
from the execution's whole resume chain (killed processes: tests/cli/test_fork.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from intentusnet import (
    AgentContext,
    IntentEnvelope,
    IntentRouter,
    InvalidRerunOption,
    MemoryExecutionStore,
    RecordStatus,
    fork,
)
from intentusnet.record.durable import resume_of
from intentusnet.record.model import EventType, ExecutionRecord

ENV = {"intent": {"name": "order"}, "payload": {"n": 2}}


class Crash(BaseException):
    """Stands for the process dying between two steps: the record stays open."""


def _shop(calls: Counter[str], plan: dict[str, Any]) -> IntentRouter:
    """``order``: fetch, e-mail (a side effect), charge; ``plan`` bends it."""
    router = IntentRouter(store=MemoryExecutionStore())

    def run(ctx: AgentContext, name: str, value: object, **kw: bool) -> Any:
        def call() -> object:
            calls[name] += 1
            if plan.get("fail") == name:
                raise ValueError(f"{name} failed")
            return value

        return ctx.step(name, {}, call, **kw)

    @router.agent("order")
    def order(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        price = run(ctx, "fetch", plan.get("price", 10))
        if plan.get("reordered"):
            run(ctx, "audit", "ok")
        run(ctx, "email", "sent", side_effect=True)
        if plan.get("crash"):
            raise Crash
        return {"total": run(ctx, "charge", price * int(env.payload["n"]))}

    return router


def _received(record: ExecutionRecord) -> dict[str, Any]:
    [event] = [e for e in record.events if e.type is EventType.INTENT_RECEIVED]
    return dict(event.data)


def test_a_completed_execution_is_forked_from_a_step() -> None:
    """A completed execution forked from a step: the steps before it served.

    Steps before STEP served (the e-mail not sent again), the rest live, the new record
    naming the one it forks.
    """
    calls: Counter[str] = Counter()
    plan: dict[str, Any] = {}
    router = _shop(calls, plan)
    old = router.route_intent(ENV).metadata.execution_id
    assert old is not None
    plan["price"] = 99  # today's code would fetch another price: it is served

    result = fork(router, old, "charge")

    assert result.ok
    assert result.response.payload == {"total": 20}
    assert calls == Counter(fetch=1, email=1, charge=2)
    assert [(s.name, s.source) for s in result.steps] == [
        ("fetch", "record"),
        ("email", "record"),
        ("charge", "live"),
    ]
    assert result.original_execution_id == old
    assert result.execution_id is not None
    received = _received(router.store.load(result.execution_id))
    assert received["replayOf"] == old
    assert received["rerunMode"] == "from_step"
    assert received["rerunFrom"] == 3
    assert "rerunChain" not in received  # one record: no chain to name


def test_a_fork_from_the_first_step_serves_the_side_effect_after_it() -> None:
    """Forked from step 1, fetch runs live; the e-mail that succeeded is served."""
    calls: Counter[str] = Counter()
    router = _shop(calls, {})
    old = router.route_intent(ENV).metadata.execution_id
    assert old is not None

    result = fork(router, old, 1)

    assert result.ok
    assert calls == Counter(fetch=2, email=1, charge=2)


def test_a_failed_execution_is_forked_with_the_fix() -> None:
    """A failed charge, fixed: the fork from charge succeeds, e-mail served."""
    calls: Counter[str] = Counter()
    plan: dict[str, Any] = {"fail": "charge"}
    router = _shop(calls, plan)
    answer = router.route_intent(ENV)
    assert answer.status == "error"
    old = answer.metadata.execution_id
    assert old is not None
    del plan["fail"]

    result = fork(router, old, "charge")

    assert result.ok
    assert calls == Counter(fetch=1, email=1, charge=2)


def test_a_parked_execution_is_forked_over_its_whole_chain() -> None:
    """A parked execution is forked over its whole chain.

    Parked by a reordered deploy, forked from the e-mail (step 2): fetch and the e-mail
    served from the chain's first record, charge live; the fork names the chain.
    """
    calls: Counter[str] = Counter()
    plan: dict[str, Any] = {"crash": True}
    router = _shop(calls, plan)
    with pytest.raises(Crash):
        router.route_intent(ENV)
    [origin] = router.store.list()
    plan.update(crash=False, reordered=True)
    parked = router.resume(origin.execution_id)
    head = parked.metadata.execution_id
    assert head is not None
    assert router.store.load(head).header.status is RecordStatus.NEEDS_ATTENTION
    # the parked record answers nothing: its miss is no step to serve
    plan["reordered"] = False

    result = fork(router, origin.execution_id, 2)

    assert result.ok
    assert result.original_execution_id == head
    assert calls == Counter(fetch=1, email=1, charge=1)
    assert result.execution_id is not None
    record = router.store.load(result.execution_id)
    assert _received(record)["rerunChain"] == [origin.execution_id, head]
    served = {
        e.data["name"]: e.data.get("servedFrom", {}).get("executionId")
        for e in record.events
        if e.type is EventType.STEP_END
    }
    assert served == {
        "fetch": origin.execution_id,
        "email": origin.execution_id,
        "charge": None,
    }
    assert resume_of(record) is None  # a fork is no resume: the chain stays closed
    assert router.store.resumed_by(head) is None


@pytest.mark.parametrize("step", ["refund", 9])
def test_a_fork_from_a_step_the_execution_does_not_hold_writes_nothing(
    step: str | int,
) -> None:
    """An unknown step is InvalidRerunOption naming the steps; no record written."""
    calls: Counter[str] = Counter()
    router = _shop(calls, {})
    old = router.route_intent(ENV).metadata.execution_id
    assert old is not None
    calls.clear()

    with pytest.raises(InvalidRerunOption) as refused:
        fork(router, old, step)

    assert "no step" in str(refused.value)
    assert "fetch" in str(refused.value) or "steps 1 to 3" in str(refused.value)
    assert [s.execution_id for s in router.store.list()] == [old]
    assert not calls
