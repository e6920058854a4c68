"""ctx.now(), ctx.uuid4() and ctx.random(): recorded as steps, served by a re-run."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime

import pytest

from intentusnet import (
    CassetteMiss,
    IntentRouter,
    MemoryExecutionStore,
    ReplayEngine,
    RerunOptions,
    record_steps,
    rerun,
)

#: How many ids today's agent mints (a test changes it: a code change).
IDS = {"count": 1}


def make_router(store: MemoryExecutionStore | None) -> IntentRouter:
    """A router whose agent mints ids, reads the clock and draws a number."""
    router = IntentRouter(store=store)

    @router.agent("order")
    def order(env, ctx):
        ids = [ctx.uuid4() for _ in range(IDS["count"])]
        at = ctx.now()
        draw = ctx.random()
        assert all(isinstance(i, uuid.UUID) and i.version == 4 for i in ids)
        assert isinstance(at, datetime)
        assert at.tzinfo is not None
        assert at.utcoffset().total_seconds() == 0
        assert isinstance(draw, float)
        assert 0.0 <= draw < 1.0
        return {"ids": [str(i) for i in ids], "at": at.isoformat(), "draw": draw}

    @router.agent("later")
    async def later(env, ctx):
        await asyncio.sleep(0)
        return {"id": ctx.uuid4().hex, "at": ctx.now().isoformat()}

    return router


def test_each_is_a_step_with_its_output_as_json() -> None:
    """Named intentusnet.uuid4/now/random, no arguments, JSON outputs."""
    store = MemoryExecutionStore()
    with make_router(store) as router:
        answer = router.route_intent({"intent": {"name": "order"}})
    steps = record_steps(store.load(answer.metadata.execution_id))
    assert [(s.name, s.args) for s in steps] == [
        ("intentusnet.uuid4", {}),
        ("intentusnet.now", {}),
        ("intentusnet.random", {}),
    ]
    assert [s.output for s in steps] == [
        answer.payload["ids"][0],
        answer.payload["at"],
        answer.payload["draw"],
    ]
    assert datetime.fromisoformat(steps[1].output) <= datetime.now(UTC)


def test_a_strict_rerun_answers_identically() -> None:
    """The recorded ids, time and number come back; a new run gets new ones."""
    store = MemoryExecutionStore()
    with make_router(store) as router:
        first = router.route_intent({"intent": {"name": "order"}})
        other = router.route_intent({"intent": {"name": "order"}})
        result = rerun(
            ReplayEngine.from_store(store, first.metadata.execution_id), router
        )
    assert other.payload["ids"] != first.payload["ids"]
    assert result.ok
    assert result.response.payload == first.payload
    assert {s.source for s in result.steps} == {"record"}
    assert result.diff is not None
    assert result.diff.same


def test_an_async_agent_reads_them_too() -> None:
    """No async twins needed: they never wait; an async agent re-runs the same."""
    store = MemoryExecutionStore()
    with make_router(store) as router:
        first = asyncio.run(router.route({"intent": {"name": "later"}}))
        again = rerun(
            ReplayEngine.from_store(store, first.metadata.execution_id), router
        )
    assert first.status == "success", first.error
    assert again.response.payload == first.payload


def test_without_a_store_they_are_plain_values() -> None:
    """A router recording nothing: fresh values of the same types, no step."""
    with make_router(None) as router:
        one = router.route_intent({"intent": {"name": "order"}})
        two = router.route_intent({"intent": {"name": "order"}})
    assert one.status == "success", one.error
    assert one.payload["ids"] != two.payload["ids"]


def test_one_more_call_than_recorded_is_a_miss_unless_live_is_allowed() -> None:
    """Today's code mints a second id: strict stops on it; allow_live mints it."""
    store = MemoryExecutionStore()
    with make_router(store) as router:
        first = router.route_intent({"intent": {"name": "order"}})
        engine = ReplayEngine.from_store(store, first.metadata.execution_id)
        IDS["count"] = 2
        try:
            with pytest.raises(CassetteMiss, match=r"'intentusnet\.uuid4'"):
                rerun(engine, router)
            lenient = rerun(engine, router, RerunOptions(allow_live=True))
        finally:
            IDS["count"] = 1
    assert lenient.ok
    assert lenient.response.payload["ids"][0] == first.payload["ids"][0]
    assert [s.name for s in lenient.live_misses] == ["intentusnet.uuid4"]


def test_an_overridden_draw_of_zero_is_still_a_float() -> None:
    """A number given back as the JSON integer 0 is returned as 0.0."""
    store = MemoryExecutionStore()
    with make_router(store) as router:
        first = router.route_intent({"intent": {"name": "order"}})
        engine = ReplayEngine.from_store(store, first.metadata.execution_id)
        result = rerun(engine, router, RerunOptions(override={"intentusnet.random": 0}))
    assert result.ok, result.response.error
    assert result.response.payload["draw"] == 0.0
    assert isinstance(result.response.payload["draw"], float)
