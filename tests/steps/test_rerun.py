"""ReplayEngine.rerun: today's code against the recorded steps, strict or resumed."""

from __future__ import annotations

import contextlib
import http.server
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from intentusnet import (
    AgentContext,
    CassetteMiss,
    IntentEnvelope,
    IntentRouter,
    MemoryExecutionStore,
    NondeterminismError,
    PostgresExecutionStore,
    ReplayedStepError,
    ReplayEngine,
    RerunOptions,
    SideEffectMismatch,
    record_steps,
    rerun,
    step,
)
from intentusnet.record.model import EventType, RecordStatus

#: A re-run that resumes from the first failure.
RESUME = RerunOptions(from_failure=True)

CALLS: Counter[str] = Counter()
STATE: dict[str, Any] = {}


@step("crm.lookup")
def lookup(email: str) -> dict[str, Any] | None:
    CALLS["lookup"] += 1
    return {"ada@x.io": {"name": "Ada", "size": 40}}.get(email)


@step("model.score")
def score(contact: dict[str, Any] | None) -> dict[str, int]:
    CALLS["model"] += 1
    if contact is None:  # not `assert`: pytest would rewrite its message
        raise AssertionError("contact required")
    return {"score": contact["size"] // 2}


@step("mail.send", side_effect=True)
def send(to: str, subject: str) -> dict[str, str]:
    CALLS["mail"] += 1
    return {"id": f"m{CALLS['mail']}"}


def pipeline(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
    email = str(env.payload["email"])
    contact = lookup(email)
    if contact is None and STATE.get("fixed"):
        contact = {"name": email, "size": 0}
    send(to=email, subject=STATE.get("subject", "Thanks"))
    return {"score": score(contact)["score"]}


@pytest.fixture
def store() -> MemoryExecutionStore:
    """An in-memory store."""
    return MemoryExecutionStore()


@pytest.fixture
def router(store: MemoryExecutionStore) -> Iterator[IntentRouter]:
    """A router with the pipeline agent, counters and flags reset."""
    CALLS.clear()
    STATE.clear()
    with IntentRouter(store=store) as r:
        r.agent("qualify", name="qualifier")(pipeline)
        yield r


def _run(router: IntentRouter, email: str = "ada@x.io") -> str:
    response = router.route_intent(
        {"intent": {"name": "qualify"}, "payload": {"email": email}}
    )
    assert response.metadata.execution_id is not None
    return response.metadata.execution_id


def _engine(store: MemoryExecutionStore, execution_id: str) -> ReplayEngine:
    return ReplayEngine.from_store(store, execution_id)


def test_strict_rerun_serves_every_step_and_calls_nothing(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """A strict re-run answers each step from the record: no tool, model or mail."""
    original = _run(router)
    before = CALLS.copy()
    result = rerun(_engine(store, original), router)
    assert before == CALLS
    assert result.ok
    assert result.response.payload == {"score": 20}
    assert [s.name for s in result.served] == ["crm.lookup", "mail.send", "model.score"]
    assert result.ran == ()
    assert (result.mode, result.original_execution_id) == ("strict", original)
    assert result.record is not None
    assert result.record.replay_of == original
    assert result.record.fingerprint == store.load(original).fingerprint
    assert result.diff is not None
    assert result.diff.same
    ends = [e.data for e in result.record.events if e.type is EventType.STEP_END]
    assert {e["source"] for e in ends} == {"record"}
    assert ends[0]["servedFrom"] == {"executionId": original, "step": 1}


def test_a_rerun_without_compare_answers_and_leaves_its_record_unloaded(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """compare=False: the same answer and steps, no record loaded, no diff."""
    original = _run(router)
    result = rerun(_engine(store, original), router, compare=False)
    assert result.response.payload == {"score": 20}
    assert [s.name for s in result.served] == ["crm.lookup", "mail.send", "model.score"]
    assert (result.record, result.diff) == (None, None)
    assert result.execution_id is not None
    assert store.load(result.execution_id).replay_of == original  # still recorded


class _Hello(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"weather": "sunny"}'
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_strict_rerun_makes_no_network_call(
    store: MemoryExecutionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An HTTP step recorded against a live server re-runs with sockets refused."""
    server = http.server.HTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(
        target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True
    )
    thread.start()
    url = f"http://127.0.0.1:{server.server_port}/"

    @step("tools.weather")
    def weather(city: str) -> dict[str, Any]:
        with httpx.Client(trust_env=False) as client:
            answer: dict[str, Any] = client.get(url, params={"q": city}).json()
            return answer

    with IntentRouter(store=store) as router:
        router.agent("weather", name="weather")(lambda env, ctx: weather("Paris"))
        original = router.route_intent({"intent": {"name": "weather"}})
        server.shutdown()
        server.server_close()
        assert original.payload == {"weather": "sunny"}

        def refuse(*args: object, **kwargs: object) -> None:
            raise AssertionError("a strict re-run opened a network connection")

        monkeypatch.setattr(socket.socket, "connect", refuse)
        monkeypatch.setattr(socket, "create_connection", refuse)
        execution_id = original.metadata.execution_id
        assert execution_id is not None
        result = rerun(_engine(store, execution_id), router)
    assert result.response.payload == {"weather": "sunny"}


def test_changed_args_raise_nondeterminism_naming_the_nearest(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """A step asked for where the record holds another stops the strict re-run."""
    original = _run(router)
    STATE["fixed"] = True

    @step("crm.lookup")
    def other_lookup(email: str) -> None:
        raise AssertionError("must not run")

    def changed(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        # The agent swallows the miss; the re-run still stops.
        with contextlib.suppress(Exception):
            other_lookup("ADA@x.io")
        return {}

    with IntentRouter(store=store) as today:
        today.agent("qualify", name="qualifier")(changed)
        with pytest.raises(CassetteMiss) as caught:
            rerun(_engine(store, original), today)
    miss = caught.value
    assert (miss.name, miss.occurrence, miss.execution_id) == (
        "crm.lookup",
        1,
        original,
    )
    assert miss.candidates == ["crm.lookup (step 1, args differ at email)"]
    assert isinstance(miss, NondeterminismError)
    assert miss.code == "nondeterminism"
    assert miss.exit_code == 7
    assert miss.position == 1
    assert miss.recorded[0] == miss.requested[0] == "crm.lookup"
    assert miss.recorded[1] != miss.requested[1]
    assert "at step 1 the record holds 'crm.lookup'" in str(miss)
    assert "parked" not in str(miss)
    assert miss.rerun_execution_id is not None
    rerun_record = store.load(miss.rerun_execution_id)
    (failed,) = record_steps(rerun_record)
    assert (failed.source, failed.error["type"]) == ("miss", "NondeterminismError")  # type: ignore[index]


def test_a_step_past_the_recorded_ones_is_a_plain_miss(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """Every recorded step served, then one more: CassetteMiss, not nondeterminism."""
    original = _run(router)

    def more(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        result = pipeline(env, ctx)
        lookup("new@x.io")
        return result

    with IntentRouter(store=store) as today:
        today.agent("qualify", name="qualifier")(more)
        with pytest.raises(CassetteMiss) as caught:
            rerun(_engine(store, original), today)
    assert not isinstance(caught.value, NondeterminismError)
    assert caught.value.code == "cassette_miss"


def test_allow_live_runs_the_missing_step_and_marks_it(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """With allow_live a step the record lacks runs live, marked as a miss."""
    original = _run(router)

    def more(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        result = pipeline(env, ctx)
        result["extra"] = ctx.step("tools.extra", {"n": 1}, lambda n: n + 1)
        return result

    with IntentRouter(store=store) as today:
        today.agent("qualify", name="qualifier")(more)
        with pytest.raises(CassetteMiss):
            rerun(_engine(store, original), today)
        result = rerun(_engine(store, original), today, RerunOptions(allow_live=True))
    assert result.response.payload == {"score": 20, "extra": 2}
    assert [s.name for s in result.live_misses] == ["tools.extra"]
    assert result.record is not None
    end = [e.data for e in result.record.events if e.type is EventType.STEP_END][-1]
    assert end["liveMiss"] is True
    assert result.diff is not None
    assert [e.kind for e in result.diff.entries if e.scope == "step"] == ["step_added"]


def test_resume_from_failure_serves_before_and_runs_from_the_failure(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """from_failure serves what succeeded before the failure, runs the rest live."""
    original = _run(router, "grace@x.io")
    assert store.load(original).header.status is RecordStatus.FAILED
    assert CALLS == {"lookup": 1, "mail": 1, "model": 1}
    STATE["fixed"] = True
    result = rerun(_engine(store, original), router, RESUME)
    assert result.ok
    assert result.mode == "from_failure"
    assert [s.name for s in result.served] == ["crm.lookup", "mail.send"]
    assert [s.name for s in result.ran] == ["model.score"]
    assert CALLS == {"lookup": 1, "mail": 1, "model": 2}  # no second e-mail
    assert result.diff is not None
    steps = [
        e
        for e in result.diff.entries
        if e.scope == "step" and e.kind != "duration_changed"  # timings: noise
    ]
    assert [(e.kind, e.name) for e in steps] == [("args_changed", "model.score")]
    assert steps[0].deviation_point


def test_strict_rerun_of_a_failure_fails_the_same_way(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """Without the fix, a strict re-run replays the recorded error: same fingerprint."""
    original = _run(router, "grace@x.io")
    seen: list[BaseException] = []

    def watching(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        try:
            return pipeline(env, ctx)
        except Exception as exc:
            seen.append(exc)
            raise

    with IntentRouter(store=store) as today:
        today.agent("qualify", name="qualifier")(watching)
        result = rerun(_engine(store, original), today)
    assert not result.ok
    (error,) = seen
    assert isinstance(error, ReplayedStepError)
    assert (error.name, error.error_type, error.message) == (
        "model.score",
        "AssertionError",
        "contact required",
    )
    assert result.record is not None
    assert result.record.fingerprint == store.load(original).fingerprint
    assert CALLS["model"] == 1


def test_side_effect_with_other_args_stops_even_with_allow_live(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """A side-effect step needed with new arguments is never sent: it stops."""
    original = _run(router)
    STATE["subject"] = "Welcome!"
    for allow_live in (False, True):
        with pytest.raises(SideEffectMismatch) as caught:
            rerun(_engine(store, original), router, RerunOptions(allow_live=allow_live))
        assert "side effects" in str(caught.value)
        assert caught.value.exit_code == 7
    assert CALLS["mail"] == 1


def test_resume_runs_recorded_steps_after_the_failure_live(
    store: MemoryExecutionStore,
) -> None:
    """Steps recorded after the first failure run again; side effects do not."""
    calls: Counter[str] = Counter()

    def flaky(n: int) -> int:
        calls["flaky"] += 1
        if not STATE.get("fixed"):
            raise TimeoutError("slow")
        return n

    def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        first = ctx.step("a", {"n": 1}, lambda n: calls.update(["a"]) or n)
        with contextlib.suppress(TimeoutError):
            ctx.step("flaky", {"n": 2}, flaky)
        later = ctx.step("b", {"n": 3}, lambda n: calls.update(["b"]) or n)
        ctx.step(
            "notify", {"n": 4}, lambda n: calls.update(["notify"]), side_effect=True
        )
        return {"sum": first + later}

    STATE.clear()
    with IntentRouter(store=store) as router:
        router.agent("job")(agent)
        original = router.route_intent({"intent": {"name": "job"}})
        execution_id = original.metadata.execution_id
        assert execution_id is not None
        STATE["fixed"] = True
        result = rerun(_engine(store, execution_id), router, RESUME)
    assert [s.name for s in result.served] == ["a", "notify"]
    assert [s.name for s in result.ran] == ["flaky", "b"]
    assert calls == {"a": 1, "flaky": 2, "b": 2, "notify": 1}


def test_rerun_without_a_store_records_in_memory() -> None:
    """A router without a store still gives a re-run record, held in memory."""
    source = MemoryExecutionStore()
    with IntentRouter(store=source) as recording:
        recording.agent("calc", name="calc")(
            lambda env, ctx: {"v": ctx.step("f", {"x": 1}, int)}
        )
        original = recording.route_intent({"intent": {"name": "calc"}})
    execution_id = original.metadata.execution_id
    assert execution_id is not None
    with IntentRouter() as today:
        today.agent("calc", name="calc")(
            lambda env, ctx: {"v": ctx.step("f", {"x": 1}, int)}
        )
        result = rerun(ReplayEngine(source.load(execution_id)), today)
    assert result.record is not None
    assert result.record.replay_of == execution_id
    assert not source.exists(result.record.execution_id)


def test_a_record_in_postgresql_reruns_from_the_database(pg_dsn: str) -> None:
    """Records in PostgreSQL, re-run strictly or resumed, are served from the database.

    The re-runs are recorded there, linked and valid.
    """
    CALLS.clear()
    STATE.clear()
    with PostgresExecutionStore(pg_dsn) as pg, IntentRouter(store=pg) as router:
        router.agent("qualify", name="qualifier")(pipeline)
        completed = _run(router)
        failed = _run(router, "nobody@x.io")
    before = CALLS.copy()
    # Another connection, as a router in another process would have.
    with PostgresExecutionStore(pg_dsn) as pg, IntentRouter(store=pg) as today:
        today.agent("qualify", name="qualifier")(pipeline)
        strict = rerun(ReplayEngine.from_store(pg, completed), today)
        STATE["fixed"] = True
        with pytest.raises(CassetteMiss) as caught:
            rerun(ReplayEngine.from_store(pg, failed), today)
        resumed = rerun(ReplayEngine.from_store(pg, failed), today, RESUME)
    assert strict.ok
    assert [s.name for s in strict.served] == ["crm.lookup", "mail.send", "model.score"]
    assert strict.ran == ()
    assert strict.diff is not None
    assert strict.diff.same
    assert resumed.ok
    assert [s.name for s in resumed.served] == ["crm.lookup", "mail.send"]
    assert [s.name for s in resumed.ran] == ["model.score"]
    assert CALLS - before == Counter({"model": 1})  # no lookup, no second e-mail
    missed = caught.value.rerun_execution_id
    assert missed is not None
    with PostgresExecutionStore(pg_dsn) as reader:
        assert reader.load(missed).replay_of == failed
        for result, original in ((strict, completed), (resumed, failed)):
            assert result.execution_id is not None
            record = reader.load(result.execution_id)
            assert record.replay_of == original
            assert reader.verify(result.execution_id).valid
            same = record.fingerprint == reader.load(original).fingerprint
            assert same is (result is strict)  # the resumed run behaved otherwise


def test_child_intents_are_served_or_rerun_against_their_record(
    store: MemoryExecutionStore,
) -> None:
    """A strict re-run serves a child; resuming re-runs a failed child on its record."""
    calls: Counter[str] = Counter()

    def child(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        got = ctx.step("child.fetch", {"k": 1}, lambda k: calls.update(["fetch"]) or k)
        calls["child"] += 1
        if not STATE.get("fixed"):
            raise RuntimeError("child bug")
        return {"got": got}

    def parent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        answer = ctx.route({"intent": {"name": "child"}})
        return {"child": answer.status}

    STATE.clear()
    with IntentRouter(store=store) as router:
        router.agent("child")(child)
        router.agent("parent")(parent)
        original = router.route_intent({"intent": {"name": "parent"}})
        parent_id = original.metadata.execution_id
        assert parent_id is not None
        assert original.payload == {"child": "error"}
        strict = rerun(_engine(store, parent_id), router)
        assert calls == {"fetch": 1, "child": 1}
        assert [s.name for s in strict.served] == ["route:child"]
        STATE["fixed"] = True
        resumed = rerun(_engine(store, parent_id), router, RESUME)
    assert resumed.response.payload == {"child": "success"}
    assert calls == {"fetch": 1, "child": 2}  # the child's fetch was served
    assert resumed.record is not None
    (route_step,) = record_steps(resumed.record)
    assert route_step.child_execution_id is not None
    child_record = store.load(route_step.child_execution_id)
    (original_route,) = record_steps(store.load(parent_id))
    assert child_record.replay_of == original_route.child_execution_id
    assert child_record.header.parent_execution_id == resumed.execution_id


def test_resume_an_unfinished_record(store: MemoryExecutionStore) -> None:
    """A crashed run (a step never ended) resumes: finished steps served, rest live."""
    from intentusnet.hashing import canonical_json, compute_hash, hash_bytes

    wire = {"intent": {"name": "job", "version": "1.0"}, "payload": {}}
    writer = store.open(wire, envelope_hash=compute_hash(wire))
    writer.append(EventType.INTENT_RECEIVED, {"requestId": "r", "envelopeHash": ""})
    digest = hash_bytes(canonical_json({"n": 1}))
    for number, end in ((1, True), (2, False)):
        writer.append(
            EventType.STEP_START,
            {
                "step": number,
                "name": f"s{number}",
                "args": {"n": 1},
                "argsHash": digest,
            },
        )
        if end:
            writer.append(
                EventType.STEP_END,
                {
                    "step": number,
                    "name": "s1",
                    "argsHash": digest,
                    "outcome": "success",
                    "output": 10,
                    "outputHash": hash_bytes(canonical_json(10)),
                    "replayable": True,
                },
            )
    writer.close()
    calls: list[str] = []

    def job(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        one = ctx.step("s1", {"n": 1}, lambda n: calls.append("s1") or 0)
        two = ctx.step("s2", {"n": 1}, lambda n: calls.append("s2") or 5)
        return {"total": one + two}

    with IntentRouter(store=store) as router:
        router.agent("job")(job)
        with pytest.raises(CassetteMiss, match="cannot be served"):
            rerun(_engine(store, writer.execution_id), router)
        result = rerun(_engine(store, writer.execution_id), router, RESUME)
    assert result.response.payload == {"total": 15}
    assert calls == ["s2"]


def test_golden_step_record_explains_and_resumes(tmp_path: Any) -> None:
    """records/steps.jsonl still loads, explains, and resumes with today's code."""
    from record.test_samples import _into_store

    from intentusnet import explain
    from intentusnet.record.fingerprint import compute_fingerprint

    def qualify(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        # The agent of records/make_step_sample.py, as it was recorded.
        email = str(env.payload["email"])
        contact = ctx.step("crm.lookup", {"email": email}, lambda email: None)
        ctx.step(
            "email.send",
            {"to": email, "subject": "Thanks"},
            lambda to, subject: calls.append("mail") or {"messageId": "m"},
            side_effect=True,
        )
        return ctx.step("crm.score", {"contact": contact}, lambda contact: {"s": 1})

    calls: list[str] = []
    store, execution_id = _into_store(tmp_path, "steps")
    record = store.load(execution_id)
    assert [s.name for s in record_steps(record)] == [
        "crm.lookup",
        "email.send",
        "crm.score",
    ]
    assert "fingerprint" in record.events[-1].data
    assert record.fingerprint == compute_fingerprint(
        record.events, record.final_response
    )
    assert explain(record).summary == (
        "crm.lookup returned None; crm.score failed with "
        "AssertionError: contact required"
    )
    with IntentRouter(store=store) as router:
        router.agent("crm.qualify", name="qualifier")(qualify)
        resumed = rerun(
            ReplayEngine.from_store(store, execution_id),
            router,
            RESUME,
        )
    assert [s.name for s in resumed.served] == ["crm.lookup", "email.send"]
    assert [s.name for s in resumed.ran] == ["crm.score"]
    assert resumed.response.payload == {"s": 1}
    assert calls == []
    store.close()


def test_rerun_is_not_answered_by_the_replay_cache(tmp_path: Any) -> None:
    """A router with a replay cache still runs the re-run (the directive is bypass)."""
    from intentusnet import FileExecutionStore
    from intentusnet.cache.replay_cache import ReplayCache

    store = FileExecutionStore(tmp_path / "store")
    with IntentRouter(store=store, cache=ReplayCache()) as router:
        router.agent("x", name="x")(
            lambda env, ctx: {"v": ctx.step("t", {"a": 1}, lambda a: a)}
        )
        first = router.route_intent({"intent": {"name": "x"}})
        assert router.route_intent({"intent": {"name": "x"}}).metadata.from_replay
        execution_id = first.metadata.execution_id
        assert execution_id is not None
        result = rerun(ReplayEngine.from_store(store, execution_id), router)
    assert not result.response.metadata.from_replay
    assert [s.source for s in result.steps] == ["record"]
    assert result.record is not None
    assert result.record.envelope["routing"]["cache"] == "bypass"  # type: ignore[index]
    store.close()


def test_served_step_answers_its_nested_steps_too(store: MemoryExecutionStore) -> None:
    """A served outer step does not run its inner steps; later calls still match."""
    calls: list[str] = []

    @step("inner")
    def inner(x: int) -> int:
        calls.append("inner")
        return x * 10

    @step("outer")
    async def outer(x: int) -> int:
        calls.append("outer")
        return inner(x) + 1

    async def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        return {"a": await outer(1), "b": inner(1)}

    with IntentRouter(store=store) as router:
        router.agent("nest", name="nest")(agent)
        original = router.route_intent({"intent": {"name": "nest"}})
        assert original.payload == {"a": 11, "b": 10}
        assert calls == ["outer", "inner", "inner"]
        execution_id = original.metadata.execution_id
        assert execution_id is not None
        result = rerun(_engine(store, execution_id), router)
    assert result.response.payload == {"a": 11, "b": 10}
    assert calls == ["outer", "inner", "inner"]  # nothing ran again
    assert [(s.name, s.recorded) for s in result.steps] == [("outer", 1), ("inner", 3)]
