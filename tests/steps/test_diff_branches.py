"""diff_records on BROADCAST and PARALLEL executions: a deviation point per branch."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import pytest

from intentusnet import (
    AgentContext,
    IntentEnvelope,
    IntentRouter,
    MemoryExecutionStore,
    diff_records,
)

STATE: dict[str, Any] = {}


def _router(store: MemoryExecutionStore) -> IntentRouter:
    """Three agents for one intent; each calls its own steps, some of them shared."""
    router = IntentRouter(store=store)

    @router.agent("plan", name="alpha", priority=1)
    def alpha(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        city = ctx.step("geo.find", {"city": "Oslo"}, lambda city: {"lat": 59})
        return {"lat": city["lat"]}

    @router.agent("plan", name="beta", priority=2)
    def beta(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("geo.find", {"city": "Oslo"}, lambda city: {"lat": 59})
        day = STATE.get("day", "mon")
        sky = ctx.step("weather", {"day": day}, lambda day: "clear")
        return {"sky": sky}

    @router.agent("plan", name="gamma", priority=3)
    def gamma(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        if STATE.get("gamma_fails"):
            raise RuntimeError("gamma is down")
        return {"ok": True}

    return router


def _run(store: MemoryExecutionStore, strategy: str) -> Any:
    with _router(store) as router:
        response = router.route_intent(
            {"intent": {"name": "plan"}, "routing": {"strategy": strategy}}
        )
    assert response.metadata.execution_id is not None
    return store.load(response.metadata.execution_id)


@pytest.fixture
def store() -> MemoryExecutionStore:
    """An in-memory store; flags reset."""
    STATE.clear()
    return MemoryExecutionStore()


def test_broadcast_reports_a_deviation_point_per_branch(
    store: MemoryExecutionStore,
) -> None:
    """beta's step and gamma's answer changed; alpha did not: one point each."""
    first = _run(store, "BROADCAST")
    STATE.update(day="tue", gamma_fails=True)
    second = _run(store, "BROADCAST")
    found = diff_records(first, second, duration_min_ms=math.inf)  # timings: noise
    assert [b.agent for b in found.branches] == ["alpha", "beta", "gamma"]
    alpha, beta, gamma = found.branches
    assert alpha.same
    assert alpha.entries == ()
    assert beta.deviation_point is not None
    assert (beta.deviation_point.kind, beta.deviation_point.name) == (
        "args_changed",
        "weather",
    )
    assert beta.deviation_point.branch == "beta"
    assert gamma.deviation_point is not None
    assert gamma.deviation_point.kind == "attempt_changed"
    assert gamma.deviation_point.detail == "gamma: attempt success -> error"
    # the record's point is the branch point that came first: beta's step
    assert found.deviation_point is beta.deviation_point
    assert sum(e.deviation_point for e in found.entries) == 1
    doc = found.to_json()
    branches = doc["branches"]
    assert isinstance(branches, list)
    assert [b["agent"] for b in branches] == ["alpha", "beta", "gamma"]  # type: ignore[index]
    entries = doc["entries"]
    assert isinstance(entries, list)
    beta_doc = branches[1]
    assert isinstance(beta_doc, dict)
    point = beta_doc["deviationPoint"]
    assert isinstance(point, int)
    assert entries[point]["name"] == "weather"  # type: ignore[index]
    assert entries[point]["branch"] == "beta"  # type: ignore[index]


def test_the_same_step_in_two_branches_pairs_within_its_branch(
    store: MemoryExecutionStore,
) -> None:
    """alpha and beta both call geo.find(Oslo): a change in one is not in the other."""
    first = _run(store, "BROADCAST")
    second = _run(store, "BROADCAST")
    found = diff_records(first, second)
    assert found.same
    assert all(b.same for b in found.branches)
    assert found.deviation_point is None


def test_parallel_branches_are_diffed_each_on_its_own(
    store: MemoryExecutionStore,
) -> None:
    """A race: the winner's branch changed, the loser (cancelled both times) did not."""

    def build() -> IntentRouter:
        router = IntentRouter(store=store)

        @router.agent("race", name="fast")
        async def fast(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
            value = STATE.get("q", "a")
            return {"v": ctx.step("search", {"q": value}, lambda q: q.upper())}

        @router.agent("race", name="slow")
        async def slow(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
            ctx.step("warm", {}, lambda: 1)
            await asyncio.sleep(5)
            return {"v": "late"}

        return router

    ids = []
    for query in ("a", "b"):
        STATE["q"] = query
        with build() as router:
            response = router.route_intent(
                {"intent": {"name": "race"}, "routing": {"strategy": "PARALLEL"}}
            )
        assert response.payload == {"v": query.upper()}
        ids.append(response.metadata.execution_id)
    found = diff_records(store.load(ids[0]), store.load(ids[1]))
    by_agent = {b.agent: b for b in found.branches}
    assert set(by_agent) == {"fast", "slow"}
    assert by_agent["slow"].same
    point = by_agent["fast"].deviation_point
    assert point is not None
    assert (point.kind, point.name) == ("args_changed", "search")
    assert found.deviation_point is point


def test_other_strategies_have_no_branches(store: MemoryExecutionStore) -> None:
    """DIRECT and FALLBACK are diffed as one run, as before."""
    first = _run(store, "DIRECT")
    second = _run(store, "DIRECT")
    found = diff_records(first, second)
    assert found.branches == ()
    assert found.to_json()["branches"] == []
