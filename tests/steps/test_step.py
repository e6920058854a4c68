"""Steps inside agents: what STEP_START/STEP_END record, wherever the step runs."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from intentusnet import (
    AgentContext,
    IntentEnvelope,
    IntentRouter,
    MemoryExecutionStore,
    current_context,
    record_steps,
    step,
)
from intentusnet.hashing import canonical_json, hash_bytes
from intentusnet.record.fingerprint import compute_fingerprint
from intentusnet.record.model import EventType

CALLS: list[str] = []


@step("tools.add")
def add(a: int, b: int = 1) -> dict[str, int]:
    CALLS.append("add")
    return {"sum": a + b}


@step("tools.fetch")
async def fetch(url: str) -> dict[str, str]:
    await asyncio.sleep(0)
    CALLS.append("fetch")
    return {"url": url}


@step
def bare(x: int) -> int:
    return x * 2


class Client:
    @step("client.get", exclude=("secret",))
    def get(self, key: str, secret: str = "s3cret") -> str:
        return key.upper()


@pytest.fixture
def store() -> MemoryExecutionStore:
    """An in-memory store."""
    return MemoryExecutionStore()


@pytest.fixture
def router(store: MemoryExecutionStore) -> Iterator[IntentRouter]:
    """A router recording to the in-memory store."""
    CALLS.clear()
    with IntentRouter(store=store) as r:
        yield r


def _route(router: IntentRouter, intent: str, **routing: Any) -> str:
    env: dict[str, Any] = {"intent": {"name": intent}, "payload": {"n": 2}}
    if routing:
        env["routing"] = routing
    response = router.route_intent(env)
    assert response.metadata.execution_id is not None
    return response.metadata.execution_id


def _events(store: MemoryExecutionStore, execution_id: str, kind: EventType) -> list:
    return [e.data for e in store.load(execution_id).events if e.type is kind]


def test_ctx_step_records_start_and_end(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """ctx.step writes name, args, argsHash, output, outputHash and duration."""

    @router.agent("calc")
    def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        return {"x": ctx.step("tools.mul", {"a": 2, "b": 3}, lambda a, b: a * b)}

    execution_id = _route(router, "calc")
    (start,) = _events(store, execution_id, EventType.STEP_START)
    (end,) = _events(store, execution_id, EventType.STEP_END)
    args = {"a": 2, "b": 3}
    assert start["name"] == end["name"] == "tools.mul"
    assert start["args"] == args
    assert start["argsHash"] == hash_bytes(canonical_json(args)) == end["argsHash"]
    assert (start["agent"], start["attempt"], start["step"]) == ("calc", 1, 1)
    assert (end["outcome"], end["output"], end["error"]) == ("success", 6, None)
    assert end["outputHash"] == hash_bytes(canonical_json(6))
    assert end["durationMs"] >= 0
    assert end["replayable"] is True
    assert end["source"] == "live"


def test_decorated_steps_record_bound_arguments_and_nesting(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """@step records arguments bound with defaults; a step called in a step nests."""

    @step("tools.outer")
    def outer(n: int) -> dict[str, int]:
        return add(n)

    @router.agent("calc")
    def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        return {"r": outer(2), "b": bare(3), "c": Client().get("k")}

    execution_id = _route(router, "calc")
    steps = record_steps(store.load(execution_id))
    assert [(s.name, s.args, s.parent) for s in steps] == [
        ("tools.outer", {"n": 2}, None),
        ("tools.add", {"a": 2, "b": 1}, 1),
        (f"{__name__}.bare", {"x": 3}, None),
        ("client.get", {"key": "k"}, None),
    ]
    assert steps[1].output == {"sum": 3}


def test_step_outside_an_agent_is_a_plain_call() -> None:
    """A decorated function called outside any agent runs and records nothing."""
    CALLS.clear()
    assert current_context() is None
    assert add(1) == {"sum": 2}
    assert CALLS == ["add"]


def test_without_a_store_a_step_is_a_plain_call() -> None:
    """No store: ctx.step and @step just call the function."""
    with IntentRouter() as router:

        @router.agent("calc")
        def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
            return {"x": ctx.step("s", {"v": 1}, lambda v: v), "y": add(1)}

        assert router.route_intent({"intent": {"name": "calc"}}).payload == {
            "x": 1,
            "y": {"sum": 2},
        }


def test_async_agent_steps_through_await(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """An async agent's ctx.astep and async @step are recorded across awaits."""

    @router.agent("calc")
    async def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        first = await fetch("https://a.example")
        await asyncio.sleep(0)

        async def later() -> int:
            return 7

        second = await ctx.astep("tools.later", None, later)
        both = await asyncio.gather(fetch("https://b"), fetch("https://c"))
        return {"first": first, "second": second, "both": both}

    execution_id = _route(router, "calc")
    names = [s.name for s in record_steps(store.load(execution_id))]
    assert names[:2] == ["tools.fetch", "tools.later"]
    assert sorted(names[2:]) == ["tools.fetch", "tools.fetch"]


@pytest.mark.parametrize("timeout_ms", [None, 5000])
def test_sync_agent_steps_on_worker_threads(
    router: IntentRouter, store: MemoryExecutionStore, timeout_ms: int | None
) -> None:
    """A sync agent on a worker thread (timeout, or async route) finds its context."""
    threads: list[str] = []

    @router.agent("calc")
    def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        threads.append(threading.current_thread().name)
        assert current_context() is ctx
        return add(1)

    routing = {} if timeout_ms is None else {"timeoutMs": timeout_ms}
    execution_id = _route(router, "calc", **routing)
    env = {"intent": {"name": "calc"}, "payload": {}}
    async_id = asyncio.run(router.route(env)).metadata.execution_id
    assert async_id is not None
    for made in (execution_id, async_id):
        assert [s.name for s in record_steps(store.load(made))] == ["tools.add"]
    assert any(name.startswith("intentusnet-agent") for name in threads)


def test_parallel_agents_number_their_steps_apart(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """Agents racing on threads each record their own steps, numbered uniquely."""
    for name in ("one", "two"):

        @router.agent("race", name=name)
        def racer(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
            return {
                "who": ctx.step("tools.who", {"agent": ctx.agent}, lambda agent: agent)
            }

    execution_id = _route(router, "race", strategy="BROADCAST")
    steps = record_steps(store.load(execution_id))
    assert sorted(s.number for s in steps) == [1, 2]
    assert {(s.agent, s.output) for s in steps} == {("one", "one"), ("two", "two")}


def test_failed_step_records_error_and_traceback(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """A step that raises records its error and traceback, and re-raises."""

    def boom(text: str) -> None:
        raise ValueError(text)

    @router.agent("calc")
    def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("tools.boom", {"text": "bad input"}, boom)
        return {}

    execution_id = _route(router, "calc")
    (failed,) = record_steps(store.load(execution_id))
    assert failed.outcome == "error"
    assert failed.error == {"type": "ValueError", "message": "bad input"}
    assert failed.traceback is not None
    assert "ValueError: bad input" in failed.traceback
    assert (failed.output, failed.output_hash) == (None, None)
    assert store.load(execution_id).header.status.value == "failed"


def test_non_json_values_are_recorded_as_repr_and_not_replayable(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """Args or output JSON cannot carry are stored as repr and marked, with why."""

    class Thing:
        def __repr__(self) -> str:
            return "<Thing>"

    @router.agent("calc")
    def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("tools.in", {"thing": Thing()}, lambda thing: 1)
        ctx.step("tools.out", None, Thing)
        return {}

    execution_id = _route(router, "calc")
    args_bad, output_bad = record_steps(store.load(execution_id))
    assert args_bad.args == "{'thing': <Thing>}"
    assert not args_bad.replayable
    assert args_bad.reason is not None
    assert args_bad.reason.startswith("args are not JSON")
    assert output_bad.output == "<Thing>"
    assert not output_bad.replayable
    assert output_bad.reason is not None
    assert output_bad.reason.startswith("output is not JSON")


def test_side_effect_flag_is_recorded(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """side_effect=True is written with the step, from ctx.step and from @step."""

    @step("mail.send", side_effect=True)
    def send(to: str) -> dict[str, str]:
        return {"sent": to}

    @router.agent("calc")
    def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("db.write", {"row": 1}, lambda row: row, side_effect=True)
        return send("a@b.c")

    steps = record_steps(store.load(_route(router, "calc")))
    assert [s.side_effect for s in steps] == [True, True]


def test_fingerprint_is_stored_and_equals_the_computed_one(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """The FINAL_RESPONSE line carries the fingerprint its events hash to."""

    @router.agent("calc")
    def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        return add(int(env.payload["n"]))

    record = store.load(_route(router, "calc"))
    final = record.events[-1]
    assert final.type is EventType.FINAL_RESPONSE
    assert (
        final.data["fingerprint"]
        == record.fingerprint
        == compute_fingerprint(record.events, record.final_response)
    )
    assert record.fingerprint.startswith("sha256:")


def test_same_run_same_fingerprint_other_output_another(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """Two runs doing the same thing share a fingerprint; another output changes it."""
    offset = {"value": 0}

    @router.agent("calc")
    def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        return {"r": ctx.step("tools.f", {"n": 1}, lambda n: n + offset["value"])}

    first, second = _route(router, "calc"), _route(router, "calc")
    offset["value"] = 1
    third = _route(router, "calc")
    prints = [store.load(i).fingerprint for i in (first, second, third)]
    assert prints[0] == prints[1] != prints[2]


def test_record_without_stored_fingerprint_computes_it() -> None:
    """A record written without a fingerprint (older releases) gets one on load."""
    store = MemoryExecutionStore()
    from recordkit import finished

    record = store.load(finished(store))
    assert "fingerprint" not in record.events[-1].data
    assert record.fingerprint == compute_fingerprint(
        record.events, record.final_response
    )


def test_child_intent_is_its_own_record_linked_both_ways(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """ctx.route gives the child its own record naming the parent, and vice versa."""

    @router.agent("child")
    def child(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        return {"doubled": int(env.payload["n"]) * 2}

    @router.agent("parent")
    def parent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        answer = ctx.route({"intent": {"name": "child"}, "payload": {"n": 21}})
        return {"child": answer.payload, "id": answer.metadata.execution_id}

    parent_id = _route(router, "parent")
    parent_record = store.load(parent_id)
    (route_step,) = record_steps(parent_record)
    assert route_step.name == "route:child"
    assert route_step.output == {
        "status": "success",
        "payload": {"doubled": 42},
        "error": None,
    }
    child_id = route_step.child_execution_id
    assert child_id == parent_record.final_response["payload"]["id"]  # type: ignore[index]
    assert store.load(child_id).header.parent_execution_id == parent_id


def test_async_child_intent(router: IntentRouter, store: MemoryExecutionStore) -> None:
    """await ctx.aroute routes a child from an async agent."""

    @router.agent("child")
    async def child(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        return {"ok": True}

    @router.agent("parent")
    async def parent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        answer = await ctx.aroute({"intent": {"name": "child"}})
        return {"child": answer.status}

    record = store.load(_route(router, "parent"))
    (route_step,) = record_steps(record)
    assert route_step.child_execution_id is not None
    assert store.load(route_step.child_execution_id).header.parent_execution_id == (
        record.execution_id
    )


def test_blocking_route_inside_a_coroutine_is_refused(router: IntentRouter) -> None:
    """ctx.route in an async agent says to use aroute instead of deadlocking."""

    @router.agent("parent")
    async def parent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.route({"intent": {"name": "child"}})
        return {}

    response = router.route_intent({"intent": {"name": "parent"}})
    assert response.error is not None
    assert "aroute" in response.error.message


def test_step_lines_match_the_documented_schema(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """Step lines of a real record validate against the schemas in docs/records.md."""
    import jsonschema
    import orjson
    from record.test_reader import _schemas

    @router.agent("calc")
    def calc(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("tools.ok", {"n": 1}, lambda n: n)
        ctx.step("tools.bad", {"n": 2}, lambda n: 1 / 0)
        return {}

    execution_id = _route(router, "calc")
    schema = _schemas()["event-line"]
    lines = store.raw(execution_id).splitlines()[1:]
    kinds = set()
    for line in lines:
        event = orjson.loads(line)
        kinds.add(event["type"])
        jsonschema.validate(event, schema)
    assert {"STEP_START", "STEP_END", "FINAL_RESPONSE"} <= kinds


def test_fingerprint_follows_file_order_under_concurrency(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """Agents stepping on several threads at once still store the load-time value."""
    for name in ("one", "two", "three"):

        @router.agent("race", name=name)
        def racer(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
            for i in range(40):
                ctx.step(
                    "tools.tick", {"agent": ctx.agent, "i": i}, lambda **kw: kw["i"]
                )
            return {"who": ctx.agent}

    record = store.load(_route(router, "race", strategy="BROADCAST"))
    parallel = store.load(_route(router, "race", strategy="PARALLEL"))
    for made in (record, parallel):
        assert made.events[-1].data["fingerprint"] == compute_fingerprint(
            made.events, made.final_response
        )
