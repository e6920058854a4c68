"""The observer seam: what a router tells an ExecutionObserver, and when."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time

import httpx
import httpx2
import pytest

from intentusnet import (
    FileExecutionStore,
    IntentRouter,
    MemoryExecutionStore,
    ObservedCall,
    ObservedExecution,
    ReplayCache,
)
from intentusnet.integrations import httpx as via_httpx
from intentusnet.integrations import httpx2 as via_httpx2
from intentusnet.integrations.httpx import RecordingTransport


class Log:
    """An observer that writes down every call, in order (from any thread)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.executions: list[ObservedExecution] = []
        self.http: list[ObservedCall] = []
        self.lock = threading.Lock()

    def _add(self, *call: object) -> None:
        with self.lock:
            self.calls.append(call)

    def execution_started(self, execution):
        self.executions.append(execution)
        self._add("execution_started", execution.intent, execution.cache)

    def execution_ended(self, execution, response):
        self._add("execution_ended", execution.intent, response.status)

    def attempt_started(self, execution_id, agent, attempt):
        self._add("attempt_started", agent, attempt)

    def attempt_ended(self, execution_id, agent, attempt, outcome, error):
        self._add("attempt_ended", agent, attempt, outcome)

    def step_started(
        self, execution_id, step, name, agent, attempt, parent, child_execution_id
    ):
        self._add("step_started", step, name, parent, child_execution_id is not None)

    def step_ended(self, execution_id, step, outcome, error):
        self._add("step_ended", step, outcome, error)

    def call_made(self, call):
        self.http.append(call)
        self._add("call_made", call.method, call.status, call.cache)


def wire(intent: str = "work", **routing) -> dict:
    return {"intent": {"name": intent}, "payload": {}, "routing": routing}


def test_execution_attempts_and_steps_are_told_in_order():
    """Started/ended pairs, attempts in the execution, steps (nested) in attempts."""
    router = IntentRouter(store=MemoryExecutionStore())

    @router.agent("work", name="bad", priority=1)
    def bad(env, ctx):
        raise RuntimeError("no")

    @router.agent("work", name="good", priority=2)
    def good(env, ctx):
        def outer():
            ctx.step("inner", {}, lambda: 1)
            raise ValueError("outer failed")

        with contextlib.suppress(ValueError):
            ctx.step("outer", {}, outer)
        return {}

    log = Log()
    router.add_observer(log)
    with router:
        response = router.route_intent(wire(strategy="FALLBACK"))
    assert response.status == "success"
    assert log.calls == [
        ("execution_started", "work", "bypass"),
        ("attempt_started", "bad", 1),
        ("attempt_ended", "bad", 1, "error"),
        ("attempt_started", "good", 2),
        ("step_started", 1, "outer", None, False),
        ("step_started", 2, "inner", 1, False),
        ("step_ended", 2, "success", None),
        ("step_ended", 1, "error", "outer failed"),
        ("attempt_ended", "good", 2, "success"),
        ("execution_ended", "work", "success"),
    ]
    (execution,) = log.executions
    assert execution.execution_id == response.metadata.execution_id
    assert execution.envelope_hash == response.metadata.envelope_hash
    assert execution.parent_execution_id is None


def test_parallel_attempts_are_told_under_the_numbers_they_started_with():
    """PARALLEL: each attempt ends under its own number, whoever finished first."""
    router = IntentRouter()

    @router.agent("work", name="a")
    def a(env, ctx):
        time.sleep(0.2)  # b answers first; a is cancelled
        return {"a": 1}

    router.agent("work", name="b")(lambda env, ctx: {"b": 1})
    log = Log()
    router.add_observer(log)
    with router:
        router.route_intent(wire(strategy="PARALLEL"))
    started = {c[1:] for c in log.calls if c[0] == "attempt_started"}
    ended = {c[1:] for c in log.calls if c[0] == "attempt_ended"}
    assert started == {("a", 1), ("b", 2)}
    assert ended == {("a", 1, "cancelled"), ("b", 2, "success")}


def test_a_child_intent_names_its_parent_and_its_route_step():
    """ctx.route: a route: step with a child id, the child names its parent."""
    router = IntentRouter(store=MemoryExecutionStore())
    router.agent("work", name="parent")(
        lambda env, ctx: {"c": ctx.route(wire("child")).payload}
    )
    router.agent("child", name="child")(lambda env, ctx: {"x": 1})
    log = Log()
    router.add_observer(log)
    with router:
        router.route_intent(wire())
    parent, child = log.executions
    assert child.parent_execution_id == parent.execution_id
    assert ("step_started", 1, "route:child", None, True) in log.calls


def test_add_twice_is_once_and_remove_stops_it():
    """add_observer is idempotent; remove_observer stops it, ignores unknown ones."""
    router = IntentRouter()
    router.agent("work", name="w")(lambda env, ctx: {})
    log, other = Log(), Log()
    router.add_observer(log)
    router.add_observer(log)
    router.add_observer(other)
    assert router.observers == (log, other)
    with router:
        router.route_intent(wire())
        router.remove_observer(log)
        router.remove_observer(Log())  # never added: ignored
        router.route_intent(wire())
    assert len(log.executions) == 1
    assert len(other.executions) == 2


def test_an_observer_removed_mid_execution_still_sees_it_end():
    """The execution keeps the observers it started with."""
    router = IntentRouter()
    log = Log()

    @router.agent("work", name="w")
    def w(env, ctx):
        router.remove_observer(log)
        return {}

    router.add_observer(log)
    with router:
        router.route_intent(wire())
    assert log.calls[-1] == ("execution_ended", "work", "success")


def test_a_cache_hit_is_told_as_an_execution_without_attempts(tmp_path):
    """Hit: started and ended at once, cache 'hit', the source record's id."""
    store = FileExecutionStore(tmp_path / "records")
    router = IntentRouter(store=store, cache=ReplayCache())
    router.agent("work", name="w")(lambda env, ctx: {"n": 1})
    log = Log()
    router.add_observer(log)
    with router:
        first = router.route_intent(wire())
        log.calls.clear()
        router.route_intent(wire())
    store.close()
    assert log.calls == [
        ("execution_started", "work", "hit"),
        ("execution_ended", "work", "success"),
    ]
    assert log.executions[-1].execution_id == first.metadata.execution_id
    assert log.executions[0].cache == "miss"


def test_async_routing_tells_the_same():
    """route() tells what route_intent() tells."""
    router = IntentRouter(store=MemoryExecutionStore())

    @router.agent("work", name="w")
    async def w(env, ctx):
        return {"n": ctx.step("s", {}, lambda: 1)}

    log = Log()
    router.add_observer(log)
    with router:
        asyncio.run(asyncio.wait_for(router.route(wire()), 10))
    assert [c[0] for c in log.calls] == [
        "execution_started",
        "attempt_started",
        "step_started",
        "step_ended",
        "attempt_ended",
        "execution_ended",
    ]


def test_transport_calls_are_told_to_the_agents_router_and_the_transport():
    """A call in an agent: told once to an observer of both, with the attempt."""
    store = MemoryExecutionStore()
    transport = RecordingTransport(
        store,
        wrapped=httpx.MockTransport(lambda request: httpx.Response(200, json={})),
    )
    client = httpx.Client(transport=transport)
    router = IntentRouter(store=store)

    @router.agent("work", name="w")
    def w(env, ctx):
        client.post("http://api.test/v1/x", json={"a": 1})
        return {}

    both, transport_only = Log(), Log()
    router.add_observer(both)
    transport.add_observer(both)
    transport.add_observer(transport_only)
    with router:
        response = router.route_intent(wire())
    client.post("http://api.test/v1/x", json={"a": 1})  # outside any agent: a hit
    transport.remove_observer(transport_only)
    client.post("http://api.test/v1/x", json={"a": 1})
    client.close()
    transport.close()
    assert [c.cache for c in both.http] == ["miss", "hit", "hit"]
    assert [c.cache for c in transport_only.http] == ["miss", "hit"]
    inside = both.http[0]
    assert inside.execution_id == response.metadata.execution_id
    assert inside.attempt == 1
    assert inside.method == "POST"
    assert inside.url == "http://api.test/v1/x"
    assert inside.request_body == b'{"a":1}'
    assert inside.response_body == b"{}"
    assert inside.content_type == "application/json"
    assert inside.record_id is not None
    assert inside.started_ns <= inside.ended_ns
    assert both.http[1].execution_id is None


@pytest.mark.parametrize("lib", [httpx, httpx2])
def test_async_transports_of_both_libraries_tell_their_observers(lib):
    """AsyncRecordingTransport (httpx and httpx2): a call in an async agent is told."""
    module = via_httpx if lib is httpx else via_httpx2
    store = MemoryExecutionStore()
    transport = module.AsyncRecordingTransport(
        store,
        wrapped=lib.MockTransport(lambda request: lib.Response(201, text="made")),
    )
    router = IntentRouter(store=store)

    @router.agent("work", name="w")
    async def w(env, ctx):
        async with lib.AsyncClient(transport=transport) as client:
            answer = await client.put("http://api.test/items/1", content=b"x")
        return {"status": answer.status_code}

    log = Log()
    transport.add_observer(log)

    async def main():
        try:
            return await asyncio.wait_for(router.route(wire()), 10)
        finally:
            await transport.aclose()

    with router:
        response = asyncio.run(main())
    assert response.payload == {"status": 201}
    (call,) = log.http
    assert (call.method, call.status, call.cache) == ("PUT", 201, "miss")
    assert call.response_body == b"made"
    assert call.content_type.startswith("text/plain")
    assert call.execution_id is None  # the router itself has no observers


@pytest.mark.parametrize("store", [None, MemoryExecutionStore()])
def test_without_observers_nothing_is_told(store):
    """A router with no observers routes as before (and has none)."""
    router = IntentRouter(store=store)
    router.agent("work", name="w")(lambda env, ctx: {})
    with router:
        assert router.route_intent(wire()).status == "success"
    assert router.observers == ()


def test_an_observer_that_raises_fails_the_execution_as_recorded():
    """A raising observer: an INTERNAL_ERROR answer, and the record still closed."""

    class Broken(Log):
        def execution_started(self, execution):
            super().execution_started(execution)
            raise RuntimeError("observer bug")

    store = MemoryExecutionStore()
    router = IntentRouter(store=store)
    router.agent("work", name="w")(lambda env, ctx: {})
    broken = Broken()
    router.add_observer(broken)
    with router:
        response = router.route_intent(wire())
    assert response.status == "error"
    assert response.error.code.value == "INTERNAL_ERROR"
    assert "observer bug" in response.error.message
    record = store.load(response.metadata.execution_id)
    assert record.final_response is not None
    assert "RECORDING_FAILURE" in [e.type for e in record.events]
    assert broken.calls[-1] == ("execution_ended", "work", "error")
