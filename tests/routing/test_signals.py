"""Delivering signals (``routing/signals.py``): what is refused; nothing kept then."""

from __future__ import annotations

import pytest

from intentusnet import (
    IntentRouter,
    InvalidExecutionId,
    InvalidSignal,
    MemoryExecutionStore,
    RecordNotFound,
    SignalRefused,
)
from intentusnet.routing.waits import MAX_SIGNAL_BYTES, MAX_SIGNALS

WAIT = {"intent": {"name": "wait"}, "payload": {}}


@pytest.fixture
def router() -> IntentRouter:
    """A router whose ``wait`` agent waits for ``go``; ``done`` finishes at once."""
    made = IntentRouter(store=MemoryExecutionStore())
    made.agent("wait", name="wait")(lambda env, ctx: {"got": ctx.wait_for("go")})
    made.agent("done", name="done")(lambda env, ctx: {})
    return made


def _kept(router: IntentRouter, execution_id: str) -> list[object]:
    return router.store.signals(execution_id)  # type: ignore[union-attr,no-any-return]


@pytest.mark.parametrize(
    ("name", "payload", "why"),
    [
        (7, None, "a signal name is a string, not int"),
        ("", None, "printable characters"),
        ("   ", None, "printable characters"),
        ("a" * 201, None, "printable characters"),
        ("go\n", None, "printable characters"),
        ("go", {1, 2}, "the payload is not JSON"),
        ("go", float("nan"), "the payload is not JSON"),
        ("go", "x" * MAX_SIGNAL_BYTES, "bytes of JSON; at most 65536"),
    ],
)
def test_a_bad_name_or_payload_is_invalid_and_nothing_is_kept(
    router: IntentRouter, name: object, payload: object, why: str
) -> None:
    """InvalidSignal (exit 2) naming the problem; the execution keeps no signal."""
    waiting = router.route_intent(WAIT)
    execution_id = str(waiting.metadata.execution_id)
    with pytest.raises(InvalidSignal, match=why) as caught:
        router.signal(execution_id, name, payload)  # type: ignore[arg-type]
    assert caught.value.exit_code == 2
    assert _kept(router, execution_id) == []


def test_a_signal_to_a_finished_execution_is_refused(router: IntentRouter) -> None:
    """SignalRefused ``finished`` (exit 4): nothing waits for it."""
    done = str(
        router.route_intent(
            {"intent": {"name": "done"}, "payload": {}}
        ).metadata.execution_id
    )
    with pytest.raises(SignalRefused, match="completed") as caught:
        router.signal(done, "go", 1)
    assert (caught.value.reason, caught.value.exit_code) == ("finished", 4)
    assert _kept(router, done) == []


def test_a_signal_to_an_unknown_execution_is_refused(router: IntentRouter) -> None:
    """No such record (exit 3), or not an id at all."""
    with pytest.raises(RecordNotFound):
        router.signal("exec-" + "0" * 32, "go", 1)
    with pytest.raises(InvalidExecutionId):
        router.signal("../etc", "go", 1)


def test_a_flood_of_signals_stops_at_the_cap(router: IntentRouter) -> None:
    """MAX_SIGNALS are kept; the next is SignalRefused ``full``, not kept."""
    execution_id = str(router.route_intent(WAIT).metadata.execution_id)
    for n in range(MAX_SIGNALS):
        router.signal(execution_id, "other", n)
    with pytest.raises(SignalRefused) as caught:
        router.signal(execution_id, "go", "one too many")
    assert caught.value.reason == "full"
    assert len(_kept(router, execution_id)) == MAX_SIGNALS


def test_waiting_for_a_signal_needs_a_store_that_keeps_them() -> None:
    """Without a store, ``wait_for`` is SignalRefused ``no_store``."""
    plain = IntentRouter()
    caught: list[BaseException] = []

    @plain.agent("wait")
    def wait(envelope, ctx):  # type: ignore[no-untyped-def]
        try:
            ctx.wait_for("go")
        except SignalRefused as exc:
            caught.append(exc)
        return {}

    plain.route_intent(WAIT)
    assert [e.reason for e in caught] == ["no_store"]  # type: ignore[attr-defined]
