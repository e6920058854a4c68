"""Durable sleep and waiting for signals (``routing/waits.py``, ``waiting.py``).

Real routers on the memory store (one process) and, where the record's bytes
matter, the signed file store; the process-crossing cases are in
test_refund_crash.py.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from intentusnet import (
    FileExecutionStore,
    IntentRouter,
    ListFilters,
    MemoryExecutionStore,
    RecordStatus,
    Recovery,
    SigningKey,
    WaitTimedOut,
    record_steps,
)
from intentusnet.record.model import EventType
from intentusnet.routing.waiting import DURABLE_WAIT_S

NAP = {"intent": {"name": "nap"}, "payload": {}}


def _napper(seconds: float) -> tuple[IntentRouter, list[str]]:
    router = IntentRouter(store=MemoryExecutionStore())
    ran: list[str] = []

    @router.agent("nap")
    def nap(envelope, ctx):  # type: ignore[no-untyped-def]
        ctx.step("before", {}, lambda: ran.append("before"))
        ctx.sleep(seconds)
        ctx.step("after", {}, lambda: ran.append("after"))
        return {"slept": seconds}

    return router, ran


def _due_now(router: IntentRouter) -> None:
    """Wait until every wake-up of the router's store is due."""
    store = router.store
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        later = store.due_wakeups(time.time_ns() // 1000 + 10**12, 100)  # type: ignore[union-attr]
        if all(due <= time.time_ns() // 1000 for _, due in later):
            return
        time.sleep(0.05)


def test_a_long_sleep_lets_the_execution_go_and_recovery_resumes_it_when_due() -> None:
    """WAITING answer, a ``waiting`` record with its due time; resumed once due."""
    router, ran = _napper(1.2)
    started = time.monotonic()
    answer = router.route_intent(NAP)
    assert time.monotonic() - started < 1.0  # not slept in place
    assert answer.error is not None
    assert answer.error.code.value == "WAITING"
    details = answer.error.details
    assert (details["waitingFor"], details["name"]) == ("sleep", "sleep")
    first = router.store.load(answer.metadata.execution_id)
    assert first.header.status is RecordStatus.WAITING
    [waiting] = [e.data for e in first.events if e.type is EventType.EXECUTION_WAITING]
    assert waiting["dueUtc"] == details["dueUtc"]
    listed = router.store.list(ListFilters(status="waiting"))
    assert [s.execution_id for s in listed] == [first.execution_id]

    recovery = Recovery(router, grace=0)
    assert recovery.run_once().outcomes == ()  # not due yet: nothing
    _due_now(router)
    [woken] = recovery.run_once().resumed
    done = router.store.load(woken.resumed_as)
    assert done.header.status is RecordStatus.COMPLETED
    assert done.final_response["payload"] == {"slept": 1.2}
    assert ran == ["before", "after"]  # the step before the sleep ran once
    served = [s.source for s in record_steps(done)]
    assert served[:2] == ["record", "record"]  # before, and the sleep's due time
    assert recovery.run_once().outcomes == ()  # its wake-up is gone
    router.close()


def test_a_sleep_that_ended_is_not_slept_again_on_resume() -> None:
    """Resumed long after its due time, the execution goes on at once."""
    router, _ran = _napper(1.0)
    answer = router.route_intent(NAP)
    _due_now(router)
    time.sleep(0.3)
    started = time.monotonic()
    resumed = router.resume(answer.metadata.execution_id)
    assert resumed.payload == {"slept": 1.0}
    assert time.monotonic() - started < 0.5
    router.close()


def test_a_short_sleep_waits_in_place_and_is_recorded() -> None:
    """Below DURABLE_WAIT_S: the call sleeps and finishes; its timer step recorded."""
    router, ran = _napper(0.2)
    started = time.monotonic()
    answer = router.route_intent(NAP)
    assert 0.2 <= time.monotonic() - started < DURABLE_WAIT_S
    assert answer.payload == {"slept": 0.2}
    assert ran == ["before", "after"]
    steps = record_steps(router.store.load(answer.metadata.execution_id))
    assert [s.name for s in steps] == ["before", "intentusnet.sleep", "after"]
    assert steps[1].output["dueUtc"].endswith("Z")
    router.close()


def test_a_sleep_without_a_store_is_a_plain_sleep() -> None:
    """A router that records nothing sleeps in place, whatever the length."""
    router = IntentRouter()
    router.agent("nap", name="nap")(lambda env, ctx: ctx.sleep(0.05) or {"ok": True})
    assert router.route_intent(NAP).payload == {"ok": True}
    router.close()


@pytest.mark.parametrize(
    ("duration", "error"),
    [(-1, ValueError), (float("nan"), ValueError), ("1", TypeError), (True, TypeError)],
)
def test_a_sleep_that_is_not_a_duration_is_refused(
    duration: object, error: type
) -> None:
    """Negative, NaN, text, bool: the agent's call raises, nothing is recorded of it."""
    router = IntentRouter(store=MemoryExecutionStore())
    caught: list[BaseException] = []

    @router.agent("nap")
    def nap(envelope, ctx):  # type: ignore[no-untyped-def]
        try:
            ctx.sleep(duration)
        except Exception as exc:
            caught.append(exc)
        return {}

    answer = router.route_intent(NAP)
    assert [type(e) for e in caught] == [error]
    assert record_steps(router.store.load(answer.metadata.execution_id)) == ()
    router.close()


def test_a_key_retried_while_waiting_gets_the_waiting_answer() -> None:
    """Same idempotency key: WAITING again, no agent run, no new record."""
    router, ran = _napper(5)
    first = router.route_intent(NAP, idempotency_key="nap-1")
    again = router.route_intent(NAP, idempotency_key="nap-1")
    assert again.error is not None
    assert again.error.code.value == "WAITING"
    assert again.metadata.execution_id == first.metadata.execution_id
    assert ran == ["before"]
    assert len(router.store.list()) == 1
    router.close()


def test_a_waiting_execution_can_be_cancelled_and_its_wakeup_is_dropped() -> None:
    """cancel closes it now; when due, recovery forgets its wake-up, runs nothing."""
    router, ran = _napper(1.0)
    answer = router.route_intent(NAP)
    record, closed = router.cancel(answer.metadata.execution_id, by="ann")
    assert closed
    assert router.store.load(record).header.status is RecordStatus.CANCELLED
    _due_now(router)
    report = Recovery(router, grace=0).run_once()
    assert [o.reason for o in report.outcomes] == ["resumed"]
    assert ran == ["before"]
    assert router.store.due_wakeups(time.time_ns() // 1000, 10) == []  # type: ignore[union-attr]
    router.close()


def _approver(store: object) -> tuple[IntentRouter, list[object]]:
    router = IntentRouter(store=store)  # type: ignore[arg-type]
    seen: list[object] = []

    @router.agent("approve")
    def approve(envelope, ctx):  # type: ignore[no-untyped-def]
        timeout = envelope.payload.get("timeout")
        try:
            first = ctx.wait_for("ok", timeout=timeout)
            second = ctx.wait_for("ok", timeout=timeout)
        except WaitTimedOut as exc:
            seen.append(str(exc))
            return {"timedOut": True}
        seen.append((first, second))
        return {"first": first, "second": second}

    return router, seen


def _approve(timeout: float | None = None) -> dict[str, object]:
    return {"intent": {"name": "approve"}, "payload": {"timeout": timeout}}


def test_signals_sent_before_and_after_the_wait_are_taken_in_order(
    tmp_path: Path,
) -> None:
    """A signal kept from before the wait, one sent while it waits; each taken once."""
    key = SigningKey.generate()
    store = FileExecutionStore(tmp_path / "records", signing_key=key)
    router, seen = _approver(store)
    recovery = Recovery(router, grace=0)

    # a first signal arrives while the execution still runs (it reaches the
    # wait right after): kept for it
    @router.agent("early")
    def early(envelope, ctx):  # type: ignore[no-untyped-def]
        router.signal(ctx.execution_id, "ok", {"n": 1}, by="ann")
        return {"got": ctx.wait_for("ok")}

    answer = router.route_intent({"intent": {"name": "early"}, "payload": {}})
    assert answer.payload == {"got": {"n": 1}}

    waiting = router.route_intent(_approve())
    assert waiting.error is not None
    assert waiting.error.details["waitingFor"] == "signal"
    execution_id = waiting.metadata.execution_id
    router.signal(execution_id, "ok", "one", by="ann")
    [woken] = recovery.run_once().of("waiting")  # the second wait waits
    router.signal(execution_id, "ok", ["two"], by="bob")
    [done] = recovery.run_once().resumed
    final = store.load(done.resumed_as)
    assert final.final_response["payload"] == {"first": "one", "second": ["two"]}
    assert seen == [("one", ["two"])]
    assert store.verify(done.resumed_as).valid
    taken = [s.output for s in record_steps(final) if s.name == "intentusnet.signal"]
    assert [t["signal"]["payload"] for t in taken] == ["one", ["two"]]
    assert [t["signal"]["by"] for t in taken] == ["ann", "bob"]
    assert woken.resumed_as is not None
    router.close()
    store.close()


def test_a_wait_times_out_with_wait_timed_out_and_the_timeout_is_recorded() -> None:
    """No signal before the timeout: WaitTimedOut, then and on every resume."""
    router, seen = _approver(MemoryExecutionStore())
    waiting = router.route_intent(_approve(timeout=1.0))
    assert waiting.error is not None
    assert waiting.error.details["dueUtc"]
    _due_now(router)
    [done] = Recovery(router, grace=0).run_once().resumed
    final = router.store.load(done.resumed_as)
    assert final.final_response["payload"] == {"timedOut": True}
    assert len(seen) == 1
    assert "no signal 'ok' came before" in str(seen[0])
    # a signal after the timeout changes nothing: the recorded answer stands
    router.close()


def test_a_signal_does_not_wake_an_execution_that_sleeps() -> None:
    """Sent to a sleeping execution: no wake-up now; its wait takes it later."""
    router = IntentRouter(store=MemoryExecutionStore())

    @router.agent("later")
    def later(envelope, ctx):  # type: ignore[no-untyped-def]
        ctx.sleep(1.0)
        return {"got": ctx.wait_for("go")}

    waiting = router.route_intent({"intent": {"name": "later"}, "payload": {}})
    router.signal(waiting.metadata.execution_id, "go", 5)
    recovery = Recovery(router, grace=0)
    assert recovery.run_once().outcomes == ()  # still sleeping
    _due_now(router)
    [done] = recovery.run_once().resumed
    assert router.store.load(done.resumed_as).final_response["payload"] == {"got": 5}
    router.close()
