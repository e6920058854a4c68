"""The observer seam: what a router tells an ExecutionObserver, and when."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading

import httpx
import httpx2
import pytest

from intentusnet import (
    FileExecutionStore,
    IntentRouter,
    MemoryExecutionStore,
    ObservedCall,
    ObservedExecution,
    ObservedStep,
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
        self.steps: list[tuple[str, ObservedStep]] = []
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

    def step_started(self, step):
        self.steps.append(("started", step))
        self._add(
            "step_started",
            step.step,
            step.name,
            step.parent,
            step.child_execution_id is not None,
        )

    def step_ended(self, step, outcome, error):
        self.steps.append(("ended", step))
        self._add("step_ended", step.step, outcome, error)

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
    outer, inner = log.steps[0][1], log.steps[1][1]
    assert log.steps[2:] == [("ended", inner), ("ended", outer)]  # the same values
    assert inner == ObservedStep(execution.execution_id, 2, "inner", "good", 2, 1, None)


def test_parallel_attempts_are_told_under_the_numbers_they_started_with():
    """PARALLEL: each attempt ends under its own number, whoever finished first."""
    router = IntentRouter()
    release = threading.Event()

    @router.agent("work", name="a")
    def a(env, ctx):
        release.wait(30)  # b answers first; a is cancelled
        return {"a": 1}

    router.agent("work", name="b")(lambda env, ctx: {"b": 1})
    log = Log()
    router.add_observer(log)
    with router:
        try:
            router.route_intent(wire(strategy="PARALLEL"))
        finally:
            release.set()
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


class Broken(Log):
    """An observer that writes every call down, then raises."""

    def _add(self, *call: object) -> None:
        super()._add(*call)
        raise RuntimeError(f"observer bug in {call[0]}")


def test_an_observer_that_raises_changes_no_outcome(caplog):
    """Every method raising: the answer, steps and calls stand; logged and counted."""
    store = MemoryExecutionStore()
    transport = RecordingTransport(
        store,
        wrapped=httpx.MockTransport(lambda request: httpx.Response(200, json={})),
    )
    client = httpx.Client(transport=transport)
    router = IntentRouter(store=store)

    @router.agent("work", name="w")
    def w(env, ctx):
        client.post("http://api.test/v1/x", json={})
        return {"n": ctx.step("add", {"x": 1}, lambda x: x + 1)}

    broken, healthy = Broken(), Log()
    router.add_observer(broken)
    router.add_observer(healthy)  # told after the broken one, all the same
    with caplog.at_level("ERROR", logger="intentusnet.observers"), router:
        response = router.route_intent(wire())
    client.close()
    transport.close()
    assert response.status == "success"
    assert response.payload == {"n": 2}
    record = store.load(response.metadata.execution_id)
    assert record.header.status.value == "completed"
    assert "RECORDING_FAILURE" not in [e.type for e in record.events]
    assert [c[0] for c in broken.calls] == [c[0] for c in healthy.calls]
    told = [c[0] for c in healthy.calls]
    assert told == [
        "execution_started",
        "attempt_started",
        "step_started",  # the HTTP call's step
        "step_ended",
        "call_made",
        "step_started",  # add
        "step_ended",
        "attempt_ended",
        "execution_ended",
    ]
    assert router.observer_errors == len(told)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == len(told)
    assert messages[0] == (
        "observer Broken.execution_started raised (the execution goes on as it was)"
    )
    assert all(r.exc_info is not None for r in caplog.records)


def test_a_transports_raising_observer_is_counted_on_the_transport(caplog):
    """A transport's own observer raising: the call is answered; counted there."""
    transport = RecordingTransport(
        MemoryExecutionStore(),
        wrapped=httpx.MockTransport(lambda request: httpx.Response(200, json={})),
    )
    broken = Broken()
    transport.add_observer(broken)
    client = httpx.Client(transport=transport)
    with caplog.at_level("ERROR", logger="intentusnet.observers"), client:
        assert client.get("http://api.test/").status_code == 200
    transport.close()
    assert transport.observer_errors == 1
    assert broken.calls == [("call_made", "GET", 200, "miss")]
    assert "Broken.call_made raised" in caplog.records[0].getMessage()


#: What a Scoped observer's scopes set while they are entered.
SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "test_scope", default=None
)


class Scoped(Log):
    """An observer with the optional scopes: each sets SCOPE while entered."""

    def __init__(self) -> None:
        super().__init__()
        self.entered: list[tuple[str, int, int]] = []  # (kind, number, thread)

    @contextlib.contextmanager
    def _scope(self, kind: str, number: int):
        self._add(f"{kind}_scope", number)
        with self.lock:
            self.entered.append((kind, number, threading.get_ident()))
        token = SCOPE.set(f"{kind} {number}")
        try:
            yield
        finally:
            SCOPE.reset(token)  # fails unless left in the context it was set in
            self._add(f"{kind}_scope_left", number)

    def attempt_scope(self, execution_id, attempt):
        return self._scope("attempt", attempt)

    def step_scope(self, execution_id, step):
        return self._scope("step", step)


@pytest.mark.parametrize(
    ("timeout_ms", "asynchronous"),
    [(None, False), (5000, False), (None, True)],
    ids=["caller-thread", "worker-thread", "route"],
)
def test_scopes_are_entered_where_the_agent_and_its_steps_run(timeout_ms, asynchronous):
    """attempt_scope and step_scope wrap the agent and its step, in their thread."""
    router = IntentRouter(store=MemoryExecutionStore())
    seen = []

    @router.agent("work", name="w")
    def work(env, ctx):
        seen.append(("agent", SCOPE.get(), threading.get_ident()))

        def inner():
            seen.append(("step", SCOPE.get(), threading.get_ident()))
            return 1

        ctx.step("inner", {}, inner)
        seen.append(("agent", SCOPE.get(), threading.get_ident()))
        return {}

    scoped = Scoped()
    router.add_observer(scoped)
    with router:
        if asynchronous:
            response = asyncio.run(router.route(wire(timeout_ms=timeout_ms)))
        else:
            response = router.route_intent(wire(timeout_ms=timeout_ms))
    assert response.status == "success"
    agent_thread = seen[0][2]
    assert seen == [
        ("agent", "attempt 1", agent_thread),
        ("step", "step 1", agent_thread),
        ("agent", "attempt 1", agent_thread),
    ]
    assert scoped.entered == [("attempt", 1, agent_thread), ("step", 1, agent_thread)]
    if timeout_ms is None and not asynchronous:
        assert agent_thread == threading.get_ident()
    else:
        assert agent_thread != threading.get_ident()
    names = [c[0] for c in scoped.calls]
    start = names.index("attempt_started")
    assert names[start:] == [
        "attempt_started",
        "attempt_scope",
        "step_started",
        "step_scope",
        "step_scope_left",
        "step_ended",
        "attempt_scope_left",
        "attempt_ended",
        "execution_ended",
    ]
    assert SCOPE.get() is None


def test_async_agents_and_their_async_steps_run_in_their_scopes():
    """An async agent's task, and an astep, see their scopes across awaits."""
    router = IntentRouter(store=MemoryExecutionStore())
    seen = []

    @router.agent("work", name="w")
    async def work(env, ctx):
        await asyncio.sleep(0)
        seen.append(SCOPE.get())

        async def inner():
            await asyncio.sleep(0)
            seen.append(SCOPE.get())
            return 1

        await ctx.astep("inner", {}, inner, side_effect=True)
        await asyncio.sleep(0)
        seen.append(SCOPE.get())
        return {}

    router.add_observer(Scoped())
    with router:
        assert router.route_intent(wire()).status == "success"
    assert seen == ["attempt 1", "step 1", "attempt 1"]


def test_parallel_attempts_each_run_in_their_own_scope():
    """A PARALLEL race: every agent sees its own attempt's scope, not another's."""
    router = IntentRouter()
    seen = {}

    for name, delay in (("a", 0.0), ("b", 0.05), ("c", 0.0)):

        @router.agent("work", name=name)
        async def work(env, ctx, delay=delay):
            await asyncio.sleep(delay)
            seen[ctx.attempt] = SCOPE.get()
            return {}

    router.add_observer(Scoped())
    with router:
        response = router.route_intent(wire(strategy="PARALLEL"))
    assert response.status == "success"
    assert seen  # the race is won; losers may be cancelled before they record
    assert all(scope == f"attempt {attempt}" for attempt, scope in seen.items())


def test_a_scope_that_raises_is_left_out_and_the_attempt_stands(caplog):
    """A scope method, its enter or its exit raising: counted; the agent answers."""

    class Failing(Scoped):
        def attempt_scope(self, execution_id, attempt):
            raise RuntimeError("scope bug")

        @contextlib.contextmanager
        def _failing(self):
            raise RuntimeError("enter bug")
            yield

        def step_scope(self, execution_id, step):
            if step == 1:
                return self._failing()
            return super().step_scope(execution_id, step)

    class Leaving(Scoped):
        def step_scope(self, execution_id, step):
            scope = super().step_scope(execution_id, step)

            class Exit:
                def __enter__(self):
                    scope.__enter__()

                def __exit__(self, *exc_info):
                    scope.__exit__(*exc_info)
                    raise RuntimeError("exit bug")

            return Exit()

    router = IntentRouter(store=MemoryExecutionStore())

    @router.agent("work", name="first")
    def first(env, ctx):
        one = ctx.step("one", {}, lambda: SCOPE.get())
        two = ctx.step("two", {}, lambda: SCOPE.get())
        return {"one": one, "two": two}

    before, failing, leaving = Scoped(), Failing(), Leaving()
    for observer in (before, failing, leaving):
        router.add_observer(observer)
    with caplog.at_level("ERROR", logger="intentusnet.observers"), router:
        response = router.route_intent(wire())
    assert response.status == "success"
    assert response.payload == {"one": "step 1", "two": "step 2"}
    assert [c for c in before.calls if c[0].startswith("attempt_scope")] == [
        ("attempt_scope", 1),
        ("attempt_scope_left", 1),
    ]
    assert [e[:2] for e in failing.entered] == [("step", 2)]
    assert [e[:2] for e in leaving.entered] == [
        ("attempt", 1),
        ("step", 1),
        ("step", 2),
    ]
    # attempt_scope (1), step 1's enter (1), Leaving's exit of steps 1 and 2 (2)
    assert router.observer_errors == 4
    assert [r.getMessage().split(" raised")[0] for r in caplog.records] == [
        f"observer {Failing.__qualname__}.attempt_scope",
        f"observer {Failing.__qualname__}.step_scope",
        f"observer {Leaving.__qualname__}.step_scope",
        f"observer {Leaving.__qualname__}.step_scope",
    ]


def test_a_scope_of_none_enters_nothing_and_observers_without_scopes_mix():
    """None from a scope method, and observers without one, change nothing."""

    class Declining(Log):
        def attempt_scope(self, execution_id, attempt):
            return None

        step_scope = attempt_scope

    router = IntentRouter(store=MemoryExecutionStore())
    seen = []

    @router.agent("work", name="w")
    def work(env, ctx):
        seen.append(SCOPE.get())
        return {"n": ctx.step("s", {}, lambda: SCOPE.get())}

    plain, declining = Log(), Declining()
    router.add_observer(plain)
    router.add_observer(declining)
    with router:
        response = router.route_intent(wire())
    assert response.payload == {"n": None}
    assert seen == [None]
    assert [c[0] for c in plain.calls] == [c[0] for c in declining.calls]


@pytest.mark.parametrize("asynchronous", [False, True], ids=["route_intent", "route"])
def test_a_coroutine_made_by_a_sync_callable_is_awaited_in_its_scope(asynchronous):
    """A lambda returning a coroutine: the coroutine's code sees the attempt scope."""
    router = IntentRouter()
    seen = []

    async def later():
        await asyncio.sleep(0)
        seen.append(SCOPE.get())
        return {}

    router.agent("work", name="w")(lambda env, ctx: later())
    router.add_observer(Scoped())
    with router:
        if asynchronous:
            response = asyncio.run(router.route(wire()))
        else:
            response = router.route_intent(wire())
    assert response.status == "success"
    assert seen == ["attempt 1"]
