import asyncio
import datetime as dt
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from intentusnet import (
    AgentResponse,
    EnvelopeValidationError,
    ErrorCode,
    ErrorInfo,
    IntentEnvelope,
    IntentRef,
    RoutingOptions,
)


def env(strategy="DIRECT", target=None, fallbacks=(), timeout_ms=None, **payload):
    return IntentEnvelope(
        intent=IntentRef(name="work"),
        payload=payload,
        routing=RoutingOptions(
            strategy=strategy,
            target_agent=target,
            fallback_agents=list(fallbacks),
            timeout_ms=timeout_ms,
        ),
    )


@pytest.fixture
def three(router):
    """Three agents for 'work': slow async (prio 1), failing (prio 2), ok (prio 2)."""
    calls = []

    @router.agent("work", name="slow", priority=1)
    async def slow(e, ctx):
        calls.append("slow")
        await asyncio.sleep(0.3)
        return {"by": "slow"}

    @router.agent("work", name="broken", priority=2)
    def broken(e, ctx):
        calls.append("broken")
        raise RuntimeError("disk on fire")

    @router.agent("work", name="good", priority=2)
    def good(e, ctx):
        calls.append("good")
        return {"by": "good", "attempt": ctx.attempt}

    router.calls = calls
    return router


def test_direct_picks_first_candidate(three):
    """DIRECT with no target runs only the first candidate by priority."""
    resp = three.route_intent(env())
    assert resp.status == "success"
    assert resp.payload == {"by": "slow"}
    assert resp.metadata.agent == "slow"
    assert three.calls == ["slow"]
    assert resp.metadata.decision.candidates == ["slow"]
    assert resp.metadata.decision.skipped == {
        "broken": "not selected by DIRECT",
        "good": "not selected by DIRECT",
    }


def test_direct_target(three):
    """DIRECT with targetAgent runs exactly that agent."""
    resp = three.route_intent(env(target="good"))
    assert resp.payload == {"by": "good", "attempt": 1}
    assert three.calls == ["good"]


def test_direct_unknown_target_is_no_agent(three):
    """A target that is not registered gives NO_AGENT naming it, runs nothing."""
    resp = three.route_intent(env(target="ghost"))
    assert resp.status == "error"
    assert resp.error.code is ErrorCode.NO_AGENT
    assert "ghost: not registered" in resp.error.message
    assert three.calls == []


def test_direct_failure_is_data(three):
    """An agent that raises gives an error response, not an exception."""
    resp = three.route_intent(env(target="broken"))
    assert resp.status == "error"
    assert resp.error.code is ErrorCode.AGENT_ERROR
    assert resp.error.agent == "broken"
    assert resp.error.message == "agent 'broken' raised RuntimeError: disk on fire"
    assert resp.error.details == {"exception": "RuntimeError"}


def test_fallback_walks_target_then_fallbacks_then_rest(three):
    """FALLBACK tries target, fallbackAgents in order, then the remaining agents."""
    resp = three.route_intent(
        env("FALLBACK", target="broken", fallbacks=["broken", "good"])
    )
    assert resp.status == "success"
    assert resp.payload == {"by": "good", "attempt": 2}
    assert [(a.agent, a.outcome) for a in resp.metadata.attempts] == [
        ("broken", "error"),
        ("good", "success"),
    ]
    assert resp.metadata.decision.candidates == ["broken", "good", "slow"]


def test_fallback_all_fail(router):
    """FALLBACK where every agent fails summarises every failure."""

    @router.agent("work", name="a")
    def a(e, ctx):
        raise ValueError("a broke")

    @router.agent("work", name="b")
    def b(e, ctx):
        return ["not", "a", "dict"]

    resp = router.route_intent(env("FALLBACK"))
    assert resp.status == "error"
    assert resp.error.code is ErrorCode.INVALID_RESPONSE
    assert resp.error.message.startswith(
        "all 2 agents failed (a: AGENT_ERROR; b: INVALID_RESPONSE)"
    )
    assert [d["code"] for d in resp.error.details["attempts"]] == [
        "AGENT_ERROR",
        "INVALID_RESPONSE",
    ]


def test_fallback_skips_unknown_fallback_agents(three):
    """Fallback agents that are unknown or do not handle the intent are skipped."""

    @three.agent("other", name="stranger")
    def stranger(e, ctx):
        return {}

    resp = three.route_intent(env("FALLBACK", fallbacks=["ghost", "stranger"]))
    assert resp.metadata.decision.skipped == {
        "ghost": "not registered",
        "stranger": "does not handle intent 'work' v1.0",
    }
    assert "stranger" not in three.calls


def test_broadcast_maps_agent_to_result(three):
    """BROADCAST runs every candidate in order; payload maps name to result."""
    resp = three.route_intent(env("BROADCAST"))
    assert resp.status == "success"
    assert resp.payload == {
        "slow": {"by": "slow"},
        "good": {"by": "good", "attempt": 3},
    }
    assert three.calls == ["slow", "broken", "good"]
    assert [a.outcome for a in resp.metadata.attempts] == [
        "success",
        "error",
        "success",
    ]


def test_broadcast_all_fail(router):
    """BROADCAST where every agent fails is an error response."""

    @router.agent("work", name="a")
    def a(e, ctx):
        raise KeyError("k")

    resp = router.route_intent(env("BROADCAST"))
    assert resp.status == "error"
    assert resp.error.code is ErrorCode.AGENT_ERROR


@pytest.fixture
def race(router):
    """'work' agents for PARALLEL: slow async (never done in time), failing, ok."""
    router.cancelled, router.finished = threading.Event(), threading.Event()

    @router.agent("work", name="slow", priority=1)
    async def slow(e, ctx):
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            router.cancelled.set()
            raise
        router.finished.set()
        return {"by": "slow"}

    @router.agent("work", name="broken", priority=2)
    def broken(e, ctx):
        raise RuntimeError("disk on fire")

    @router.agent("work", name="good", priority=2)
    def good(e, ctx):
        return {"by": "good"}

    return router


def test_parallel_first_success_wins_and_rest_cancelled(race):
    """PARALLEL returns the first success, reports the winner, cancels the slow."""
    resp = race.route_intent(env("PARALLEL"))
    assert not race.finished.is_set()  # answered without waiting for 'slow'
    assert resp.status == "success"
    assert resp.metadata.agent == "good"
    outcomes = {a.agent: a.outcome for a in resp.metadata.attempts}
    assert outcomes == {"good": "success", "broken": "error", "slow": "cancelled"}
    assert race.cancelled.wait(5)


def test_parallel_async_path(race):
    """PARALLEL through the async route gives the same winner."""
    resp = asyncio.run(race.route(env("PARALLEL")))
    assert resp.metadata.agent == "good"
    assert not race.finished.is_set()


def test_parallel_all_fail(router):
    """PARALLEL where every agent fails is an error listing all attempts."""

    @router.agent("work", name="a")
    def a(e, ctx):
        raise ValueError("x")

    @router.agent("work", name="b")
    async def b(e, ctx):
        raise ValueError("y")

    resp = router.route_intent(env("PARALLEL"))
    assert resp.status == "error"
    assert len(resp.error.details["attempts"]) == 2


def test_timeout_sync_agent(router):
    """A sync agent past timeoutMs is abandoned: AGENT_TIMEOUT, router moves on."""
    release, finished = threading.Event(), threading.Event()

    @router.agent("work", name="stuck")
    def stuck(e, ctx):
        release.wait(30)
        finished.set()
        return {}

    resp = router.route_intent(env(timeout_ms=50))
    assert not finished.is_set()  # answered while the agent was still stuck
    release.set()
    assert resp.error.code is ErrorCode.AGENT_TIMEOUT
    assert resp.error.retryable is True
    assert resp.error.message == "agent 'stuck' did not answer within 50 ms"


def test_timeout_async_agent_is_cancelled(router):
    """An async agent past timeoutMs is cancelled and reported as a timeout."""
    was_cancelled = threading.Event()

    @router.agent("work", name="sleepy")
    async def sleepy(e, ctx):
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            was_cancelled.set()
            raise
        return {}

    resp = router.route_intent(env(timeout_ms=50))
    assert resp.error.code is ErrorCode.AGENT_TIMEOUT
    assert was_cancelled.wait(2)


def test_timeout_async_route(router):
    """The async route enforces timeouts on sync agents too."""

    @router.agent("work", name="stuck")
    def stuck(e, ctx):
        time.sleep(0.5)
        return {}

    resp = asyncio.run(router.route(env(timeout_ms=30)))
    assert resp.error.code is ErrorCode.AGENT_TIMEOUT


def test_timeout_falls_back(router):
    """Under FALLBACK a timed-out agent is followed by the next one."""

    @router.agent("work", name="a", priority=1)
    async def a(e, ctx):
        await asyncio.sleep(5)

    @router.agent("work", name="b", priority=2)
    def b(e, ctx):
        return {"ok": True}

    resp = router.route_intent(env("FALLBACK", timeout_ms=50))
    assert resp.payload == {"ok": True}
    assert [a.outcome for a in resp.metadata.attempts] == ["timeout", "success"]


def test_agent_raising_timeout_error_is_not_a_timeout(router):
    """An agent that raises TimeoutError itself is an AGENT_ERROR, not a timeout."""

    @router.agent("work", name="a")
    def a(e, ctx):
        raise TimeoutError("upstream timed out")

    resp = router.route_intent(env(timeout_ms=1000))
    assert resp.error.code is ErrorCode.AGENT_ERROR
    assert "upstream timed out" in resp.error.message


def test_no_agent_for_intent(router):
    """An intent nobody handles gives NO_AGENT with the intent named."""
    resp = router.route_intent(env())
    assert resp.status == "error"
    assert resp.error.code is ErrorCode.NO_AGENT
    assert resp.error.message == "no agent is registered for intent 'work' v1.0"


@pytest.mark.parametrize(
    ("returned", "fragment"),
    [
        (["a", "list"], "returned list"),
        ({1, 2}, "returned set"),
        (dt.datetime(2026, 1, 1), "returned datetime"),
        ({"when": dt.datetime(2026, 1, 1)}, "payload.when: datetime is not"),
        ({"x": float("nan")}, "payload.x: nan is not a JSON number"),
        (None, "returned NoneType"),
    ],
)
def test_invalid_agent_results(router, returned, fragment):
    """An agent returning something other than a JSON object is INVALID_RESPONSE."""

    @router.agent("work", name="odd")
    def odd(e, ctx):
        return returned

    resp = router.route_intent(env())
    assert resp.status == "error"
    assert resp.error.code is ErrorCode.INVALID_RESPONSE
    assert fragment in resp.error.message


def test_agent_may_return_agent_response(router):
    """An agent returning an AgentResponse error keeps its code; agent is filled."""

    @router.agent("work", name="polite")
    def polite(e, ctx):
        return AgentResponse(
            status="error",
            error=ErrorInfo(code=ErrorCode.VALIDATION_ERROR, message="need text"),
        )

    resp = router.route_intent(env())
    assert resp.error.code is ErrorCode.VALIDATION_ERROR
    assert resp.error.agent == "polite"


def test_route_intent_accepts_wire_dict(router):
    """route_intent validates a camelCase dict into an envelope."""

    @router.agent("work", name="a")
    def a(e, ctx):
        return {"target": e.routing.target_agent}

    resp = router.route_intent(
        {"intent": {"name": "work"}, "routing": {"targetAgent": "a"}}
    )
    assert resp.payload == {"target": "a"}


@pytest.mark.parametrize(
    ("wire", "path"),
    [
        ({"payload": {}}, "intent"),
        ({"intent": {"name": "work"}, "payload": "text"}, "payload"),
        ({"intent": {"name": 5}}, "intent.name"),
        ({"intent": {"name": "work"}, "extra": 1}, "extra"),
        (
            {"intent": {"name": "work"}, "routing": {"timeoutMs": -1}},
            "routing.timeoutMs",
        ),
    ],
)
def test_hostile_envelopes_raise_validation_error(router, wire, path):
    """Invalid wire envelopes raise EnvelopeValidationError naming the field."""
    with pytest.raises(EnvelopeValidationError) as info:
        router.route_intent(wire)
    assert info.value.path == path


def test_deep_nesting_refused_quickly(router):
    """A payload nested 10,000 levels deep is refused without a RecursionError."""
    deep: dict = {}
    cur = deep
    for _ in range(10_000):
        cur["a"] = {}
        cur = cur["a"]
    with pytest.raises(EnvelopeValidationError, match="nested deeper than"):
        router.route_intent({"intent": {"name": "work"}, "payload": deep})


def test_ten_megabyte_payload_routes(router):
    """A 10 MB payload is accepted and reaches the agent intact."""

    @router.agent("work", name="size")
    def size(e, ctx):
        return {"n": len(e.payload["blob"])}

    blob = "x" * (10 * 1024 * 1024)
    resp = router.route_intent({"intent": {"name": "work"}, "payload": {"blob": blob}})
    assert resp.payload == {"n": len(blob)}


def test_concurrent_route_intent_from_threads(router):
    """route_intent from 8 threads at once answers every call correctly."""

    @router.agent("work", name="echo")
    def echo(e, ctx):
        return {"n": e.payload["n"], "exec": ctx.execution_id}

    @router.agent("work", name="aecho", priority=200)
    async def aecho(e, ctx):
        await asyncio.sleep(0)
        return {"n": e.payload["n"]}

    def call(n):
        target = "echo" if n % 2 else "aecho"
        return router.route_intent(env(target=target, n=n))

    with ThreadPoolExecutor(8) as pool:
        responses = list(pool.map(call, range(400)))
    assert [r.payload["n"] for r in responses] == list(range(400))
    ids = {r.metadata.execution_id for r in responses}
    assert len(ids) == 400


def test_sync_path_reuses_one_event_loop(router, monkeypatch):
    """Async agents called through route_intent never create a loop per call."""

    @router.agent("work", name="a")
    async def a(e, ctx):
        return {"loop": id(asyncio.get_running_loop())}

    loops = {router.route_intent(env()).payload["loop"] for _ in range(20)}
    created = []
    monkeypatch.setattr(asyncio, "new_event_loop", lambda: created.append(1))
    loops |= {router.route_intent(env()).payload["loop"] for _ in range(20)}
    assert len(loops) == 1
    assert created == []


def test_execution_ids_are_time_sortable(router):
    """Execution ids of later calls sort after earlier ones."""

    @router.agent("work", name="a")
    def a(e, ctx):
        return {}

    first = router.route_intent(env()).metadata.execution_id
    time.sleep(0.002)
    second = router.route_intent(env()).metadata.execution_id
    assert first.startswith("exec-")
    assert first < second


def test_metadata_reports_duration_and_attempts(router):
    """Response metadata carries duration, attempts and the strategy used."""

    @router.agent("work", name="a")
    def a(e, ctx):
        time.sleep(0.01)
        return {}

    meta = router.route_intent(env()).metadata
    assert meta.duration_ms >= 10
    assert meta.attempts[0].agent == "a"
    assert meta.attempts[0].duration_ms >= 10
    assert meta.strategy.value == "DIRECT"
    assert meta.from_replay is False
    assert meta.original_execution_id is None


def test_middleware_wraps_routing_in_order(router):
    """Middleware run outermost first and can change the answer."""
    seen = []

    async def outer(e, call_next):
        seen.append("outer")
        resp = await call_next(e)
        seen.append("outer-done")
        return resp

    async def inner(e, call_next):
        seen.append("inner")
        if e.payload.get("short"):
            return AgentResponse(payload={"short": True})
        return await call_next(e)

    router.use(outer)
    router.use(inner)

    @router.agent("work", name="a")
    def a(e, ctx):
        seen.append("agent")
        return {}

    asyncio.run(router.route(env()))
    assert seen == ["outer", "inner", "agent", "outer-done"]
    seen.clear()
    assert router.route_intent(env(short=True)).payload == {"short": True}
    assert seen == ["outer", "inner", "outer-done"]


def test_decision_changes_when_agents_register(router):
    """A cached decision is refreshed after a new agent registers."""

    @router.agent("work", name="b", priority=5)
    def b(e, ctx):
        return {"by": "b"}

    assert router.route_intent(env()).payload == {"by": "b"}

    @router.agent("work", name="a", priority=1)
    def a(e, ctx):
        return {"by": "a"}

    assert router.route_intent(env()).payload == {"by": "a"}


def test_internal_fault_is_an_internal_error_response(router, monkeypatch):
    """A fault inside the router itself comes back as INTERNAL_ERROR, not a raise."""
    import intentusnet.routing.router as router_module

    @router.agent("work", name="a")
    def a(e, ctx):
        return {}

    def broken(*args):
        raise RuntimeError("bug")

    monkeypatch.setattr(router_module, "from_result", broken)
    resp = router.route_intent(env())
    assert resp.status == "error"
    assert resp.error.code is ErrorCode.INTERNAL_ERROR
    assert "RuntimeError: bug" in resp.error.details["traceback"]


def test_parallel_attempt_ends_are_recorded_under_their_start_numbers():
    """PARALLEL: each AGENT_ATTEMPT_END names the attempt number its START had."""
    from intentusnet import IntentRouter, MemoryExecutionStore

    store = MemoryExecutionStore()
    router = IntentRouter(store=store)
    release = threading.Event()

    @router.agent("work", name="first")
    def slow(e, ctx):
        release.wait(30)  # "second" (attempt 2) finishes first
        return {"slow": True}

    router.agent("work", name="second")(lambda e, ctx: {"fast": True})
    with router:
        try:
            response = router.route_intent(env("PARALLEL"))
        finally:
            release.set()
    record = store.load(response.metadata.execution_id)
    starts = {
        (e.data["agent"], e.data["attempt"])
        for e in record.events
        if e.type.value == "AGENT_ATTEMPT_START"
    }
    ends = {
        (e.data["agent"], e.data["attempt"], e.data["outcome"])
        for e in record.events
        if e.type.value == "AGENT_ATTEMPT_END"
    }
    assert starts == {("first", 1), ("second", 2)}
    assert ends == {("first", 1, "cancelled"), ("second", 2, "success")}


def test_an_answer_is_checked_once_and_built_in_one_validation(router, monkeypatch):
    """The agent's answer is walked once; the answer's models are validated."""
    import intentusnet.envelope as envelope_module
    import intentusnet.routing.strategies as strategies_module

    walks = []
    real = envelope_module.check_json

    def counting(value, path=""):
        walks.append(path)
        return real(value, path)

    monkeypatch.setattr(envelope_module, "check_json", counting)
    monkeypatch.setattr(strategies_module, "check_json", counting)

    @router.agent("work", name="good")
    def good(e, ctx):
        return {"nested": {"list": [1, 2.5, "x"]}}

    prebuilt = env(a=1)
    walks.clear()
    resp = router.route_intent(prebuilt)
    assert walks == ["payload"]  # from_result's check of the agent's answer
    assert resp.payload == {"nested": {"list": [1, 2.5, "x"]}}
    assert resp.metadata.attempts[0].agent == "good"
    assert resp.metadata.decision is not None
    assert resp.metadata.decision.candidates == ["good"]
    assert AgentResponse.model_validate(resp.to_wire()) == resp


def test_a_first_sync_route_imports_only_what_it_runs():
    """A sync route of a sync agent loads neither asyncio nor what it does not run."""
    probe = (
        "import sys\n"
        "from intentusnet import IntentRouter\n"
        "router = IntentRouter()\n"
        "router.agent('echo', name='echo')(lambda env, ctx: {'x': 1})\n"
        "answer = router.route_intent({'intent': {'name': 'echo'}})\n"
        "assert answer.status == 'success', answer\n"
        "loaded = ({'asyncio', 'logging', 'concurrent.futures',\n"
        "          'intentusnet.store.memory', 'intentusnet.routing.durable',\n"
        "          'intentusnet.routing.journal', 'intentusnet.routing.retries',\n"
        "          'intentusnet.routing.signals', 'intentusnet.routing.queued'}\n"
        "         & set(sys.modules))\n"
        "assert not loaded, loaded\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True)
