"""Side effects are never cut in half by a timeout or a lost PARALLEL race."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest

from intentusnet import (
    AgentContext,
    IntentEnvelope,
    IntentRouter,
    MemoryExecutionStore,
    SideEffectRefused,
    record_steps,
)
from intentusnet.record.model import EventType, ExecutionRecord
from intentusnet.routing.guard import AttemptGuard

DONE: Counter[str] = Counter()


@pytest.fixture(autouse=True)
def _reset() -> None:
    DONE.clear()


def _send(seconds: float) -> dict[str, bool]:
    time.sleep(seconds)
    DONE["mail"] += 1
    return {"sent": True}


async def _asend(seconds: float) -> dict[str, bool]:
    await asyncio.sleep(seconds)
    DONE["mail"] += 1
    return {"sent": True}


def _route(store: MemoryExecutionStore, router: IntentRouter, **routing: Any) -> Any:
    response = router.route_intent({"intent": {"name": "job"}, "routing": routing})
    assert response.metadata.execution_id is not None
    return response, store.load(response.metadata.execution_id)


def _attempt_end(record: ExecutionRecord, agent: str) -> Any:
    return next(
        e
        for e in record.events
        if e.type is EventType.AGENT_ATTEMPT_END and e.data["agent"] == agent
    )


def test_a_timeout_lets_a_running_side_effect_finish() -> None:
    """A sync agent timing out mid e-mail: the e-mail ends, then the attempt does."""
    store = MemoryExecutionStore()

    def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("mail.send", {"seconds": 0.3}, _send, side_effect=True)
        time.sleep(5)  # abandoned here: never reaches the next step
        return {}

    with IntentRouter(store=store) as router:
        router.agent("job", name="mailer")(agent)
        response, record = _route(store, router, timeoutMs=50)
    assert response.error is not None
    assert response.error.code.value == "AGENT_TIMEOUT"
    assert "its side effect mail.send was running and was let finish" in (
        response.error.message
    )
    assert DONE["mail"] == 1
    (sent,) = record_steps(record)
    assert (sent.name, sent.outcome) == ("mail.send", "success")
    end = _attempt_end(record, "mailer")
    assert sent.end_seq is not None
    assert sent.end_seq < end.seq  # recorded whole, before the attempt's end
    assert end.data["error"]["details"]["sideEffectsFinished"] == ["mail.send"]


def test_a_side_effect_after_the_timeout_is_refused_and_recorded() -> None:
    """An abandoned thread that reaches a side effect later is refused; nothing sent."""
    store = MemoryExecutionStore()
    refused: list[BaseException] = []
    go, told = threading.Event(), threading.Event()

    def slow(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        go.wait(10)  # the timeout passes; the router moves on to `backup`
        try:
            ctx.step("mail.send", {"seconds": 0}, _send, side_effect=True)
        except SideEffectRefused as exc:
            refused.append(exc)
        told.set()
        return {}

    def backup(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        go.set()  # `slow` was abandoned: let it reach its e-mail ...
        told.wait(10)  # ... while this record is still open
        return {"from": "backup"}

    with IntentRouter(store=store) as router:
        router.agent("job", name="slow", priority=1)(slow)
        router.agent("job", name="backup", priority=2)(backup)
        response, record = _route(store, router, strategy="FALLBACK", timeoutMs=200)
    assert response.payload == {"from": "backup"}
    assert DONE["mail"] == 0
    (exc,) = refused
    assert "attempt 1 of agent 'slow' timed out before it started" in str(exc)
    (step,) = record_steps(record)
    assert step.name == "mail.send"
    assert step.error is not None
    assert step.error["type"] == "SideEffectRefused"
    assert (
        "sideEffectsFinished"
        not in _attempt_end(record, "slow").data["error"]["details"]
    )


def test_a_lost_race_lets_an_async_side_effect_finish_then_cancels() -> None:
    """PARALLEL: the loser's running e-mail ends, then it stops at its next await."""
    store = MemoryExecutionStore()

    async def fast(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"from": "fast"}

    async def loser(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        await ctx.astep("mail.send", {"seconds": 0.3}, _asend, side_effect=True)
        await asyncio.sleep(0)  # cancelled here, right after the e-mail
        DONE["after"] += 1
        return {"from": "loser"}

    with IntentRouter(store=store) as router:
        router.agent("job", name="fast")(fast)
        router.agent("job", name="loser")(loser)
        response, record = _route(store, router, strategy="PARALLEL")
    assert response.payload == {"from": "fast"}
    assert DONE == {"mail": 1}
    (sent,) = record_steps(record)
    assert (sent.name, sent.outcome, sent.agent) == ("mail.send", "success", "loser")
    end = _attempt_end(record, "loser")
    assert end.data["outcome"] == "cancelled"
    assert sent.end_seq is not None
    assert sent.end_seq < end.seq
    assert end.data["error"]["details"] == {"sideEffectsFinished": ["mail.send"]}
    assert "was running and was let finish" in end.data["error"]["message"]


def test_a_lost_race_lets_a_sync_side_effect_finish() -> None:
    """PARALLEL with a sync loser on a worker thread: its e-mail is waited for."""
    store = MemoryExecutionStore()

    async def fast(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"from": "fast"}

    def loser(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("mail.send", {"seconds": 0.3}, _send, side_effect=True)
        return {"from": "loser"}

    with IntentRouter(store=store) as router:
        router.agent("job", name="fast")(fast)
        router.agent("job", name="loser")(loser)
        response, record = _route(store, router, strategy="PARALLEL")
    assert response.payload == {"from": "fast"}
    assert DONE["mail"] == 1
    (sent,) = record_steps(record)
    assert sent.outcome == "success"
    assert sent.end_seq is not None
    assert sent.end_seq < _attempt_end(record, "loser").seq


def test_an_async_timeout_lets_the_side_effect_finish() -> None:
    """An async agent's timeout waits for its running side effect."""
    store = MemoryExecutionStore()

    async def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        await ctx.astep("mail.send", {"seconds": 0.3}, _asend, side_effect=True)
        await asyncio.sleep(5)
        return {}

    with IntentRouter(store=store) as router:
        router.agent("job", name="mailer")(agent)
        response, record = _route(store, router, timeoutMs=50)
    assert response.error is not None
    assert response.error.code.value == "AGENT_TIMEOUT"
    assert DONE["mail"] == 1
    end = _attempt_end(record, "mailer")
    assert end.data["error"]["details"]["sideEffectsFinished"] == ["mail.send"]
    (sent,) = record_steps(record)
    assert sent.outcome == "success"


def test_steps_that_are_not_side_effects_are_cut_as_before() -> None:
    """An ordinary step in a lost race is cancelled (recorded as cancelled)."""
    store = MemoryExecutionStore()

    async def fast(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"from": "fast"}

    async def loser(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        await ctx.astep("search", {"seconds": 5}, _asend)
        return {}

    with IntentRouter(store=store) as router:
        router.agent("job", name="fast")(fast)
        router.agent("job", name="loser")(loser)
        response, record = _route(store, router, strategy="PARALLEL")
    assert response.payload == {"from": "fast"}
    (step,) = record_steps(record)
    assert step.outcome == "cancelled"  # not awaited to its end
    assert DONE["mail"] == 0


def test_the_guard_alone() -> None:
    """stop() says whether side effects run; check() refuses after it."""
    guard = AttemptGuard("a", 1)
    guard.check("x")  # not stopped: nothing happens
    assert guard.run("x", lambda: 7) == 7
    assert guard.stop("cancelled") is False
    assert guard.wait() == []
    with pytest.raises(SideEffectRefused, match="was cancelled before it started"):
        guard.check("x")
