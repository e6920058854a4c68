"""Re-runs that start anywhere: a step, the root cause, a snapshot; live; override."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from intentusnet import (
    AgentContext,
    CassetteMiss,
    IntentEnvelope,
    IntentRouter,
    InvalidRerunOption,
    MemoryExecutionStore,
    ReplayEngine,
    RerunOptions,
    plan_rerun,
    record_steps,
    rerun,
    step,
)
from intentusnet.record.model import EventType

CALLS: Counter[str] = Counter()
STATE: dict[str, Any] = {}
KNOWN = {"ada@x.io": {"name": "Ada", "size": 40}}


@step("crm.lookup")
def lookup(email: str) -> dict[str, Any] | None:
    CALLS["lookup"] += 1
    if email in KNOWN:
        return {**KNOWN[email], "size": STATE.get("size", KNOWN[email]["size"])}
    # the fix: an unknown sender is a new lead
    return {"name": email, "size": 10} if STATE.get("fixed") else None


@step("mail.send", side_effect=True)
def send(to: str, subject: str) -> dict[str, str]:
    CALLS["mail"] += 1
    return {"id": f"m{CALLS['mail']}"}


@step("model.score")
def score(contact: dict[str, Any] | None) -> dict[str, int]:
    CALLS["model"] += 1
    if contact is None:  # not `assert`: pytest would rewrite its message
        raise AssertionError("contact required")
    return {"score": contact["size"] // 2}


def pipeline(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
    email = str(env.payload["email"])
    contact = lookup(email)
    send(to=email, subject="Thanks")
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


def _run(router: IntentRouter, email: str = "ada@x.io") -> ReplayEngine:
    response = router.route_intent(
        {"intent": {"name": "qualify"}, "payload": {"email": email}}
    )
    execution_id = response.metadata.execution_id
    assert execution_id is not None
    assert router.store is not None
    return ReplayEngine.from_store(router.store, execution_id)


def _received(result: Any) -> dict[str, Any]:
    assert result.record is not None
    first = result.record.events[0]
    assert first.type is EventType.INTENT_RECEIVED
    return dict(first.data)


def test_resuming_from_the_failure_never_calls_the_fixed_lookup(
    router: IntentRouter,
) -> None:
    """The bug the issue reports: the lookup is served, so the fix never runs."""
    failed = _run(router, "grace@x.io")
    STATE["fixed"] = True
    result = rerun(failed, router, RerunOptions(from_failure=True))
    assert not result.ok
    assert [s.name for s in result.served] == ["crm.lookup", "mail.send"]


def test_from_root_cause_runs_the_fixed_lookup_and_serves_the_mail(
    router: IntentRouter,
) -> None:
    """The root cause runs live with the fix; the e-mail is served, not sent again."""
    failed = _run(router, "grace@x.io")
    assert CALLS == {"lookup": 1, "mail": 1, "model": 1}
    STATE["fixed"] = True
    result = rerun(failed, router, RerunOptions(from_root_cause=True))
    assert result.ok
    assert result.response.payload == {"score": 5}
    assert (result.mode, result.from_step) == ("from_root_cause", 1)
    assert [s.name for s in result.served] == ["mail.send"]
    assert [s.name for s in result.ran] == ["crm.lookup", "model.score"]
    assert CALLS == {"lookup": 2, "mail": 1, "model": 2}
    received = _received(result)
    assert received["replayOf"] == failed.record.execution_id
    assert (received["rerunMode"], received["rerunFrom"]) == ("from_root_cause", 1)
    assert result.to_json()["fromStep"] == 1


@pytest.mark.parametrize("ref", [3, "3", "model.score"])
def test_from_step_by_number_or_name(router: IntentRouter, ref: int | str) -> None:
    """Steps before the one named are served; it and what follows run live."""
    original = _run(router)
    result = rerun(original, router, RerunOptions(from_step=ref))
    assert result.ok
    assert result.mode == "from_step"
    assert result.from_step == 3
    assert [s.name for s in result.served] == ["crm.lookup", "mail.send"]
    assert [s.name for s in result.ran] == ["model.score"]
    assert CALLS == {"lookup": 1, "mail": 1, "model": 2}


def test_live_runs_one_step_and_serves_the_rest(router: IntentRouter) -> None:
    """--live runs the step named; the rest is served, and a changed input misses."""
    original = _run(router)
    result = rerun(original, router, RerunOptions(live=["crm.lookup"]))
    assert result.ok
    assert result.mode == "strict"
    assert [s.name for s in result.ran] == ["crm.lookup"]
    assert [s.name for s in result.served] == ["mail.send", "model.score"]
    assert _received(result)["rerunLive"] == [1]

    STATE["size"] = 80  # the live lookup now answers differently
    with pytest.raises(CassetteMiss, match=r"model\.score"):
        rerun(original, router, RerunOptions(live=[1]))
    result = rerun(original, router, RerunOptions(live=[1], allow_live=True))
    assert result.response.payload == {"score": 40}
    assert CALLS["mail"] == 1


def test_override_serves_an_edited_output_and_the_rest_follow(
    router: IntentRouter,
) -> None:
    """A fork: the lookup answers the output given; scoring follows it live."""
    failed = _run(router, "grace@x.io")
    edited = {"name": "Grace", "size": 30}
    for ref in (1, "crm.lookup"):
        result = rerun(failed, router, RerunOptions(override={ref: edited}))
        assert result.ok
        assert result.response.payload == {"score": 15}
        assert [s.name for s in result.served] == ["crm.lookup", "mail.send"]
        assert [(s.name, s.miss) for s in result.ran] == [("model.score", True)]
        assert result.record is not None
        first = record_steps(result.record)[0]
        assert first.output == edited
        assert first.source == "record"
        end = next(e for e in result.record.events if e.type is EventType.STEP_END)
        assert end.data["overridden"] is True
        assert _received(result)["rerunOverride"] == [1]
    assert CALLS == {"lookup": 1, "mail": 1, "model": 3}


def test_override_of_a_failed_step_serves_it_as_a_success(
    router: IntentRouter,
) -> None:
    """The failing step itself can be answered with the output it should have had."""
    failed = _run(router, "grace@x.io")
    result = rerun(
        failed, router, RerunOptions(override={"model.score": {"score": 99}})
    )
    assert result.ok
    assert result.response.payload == {"score": 99}
    assert CALLS["model"] == 1


def test_a_nested_step_starts_from_the_step_it_was_called_in(
    store: MemoryExecutionStore,
) -> None:
    """From an inner step: its outer step runs live (it would serve it otherwise)."""
    calls: list[str] = []

    @step("inner")
    def inner(x: int) -> int:
        calls.append("inner")
        return x * 10

    @step("outer")
    def outer(x: int) -> int:
        calls.append("outer")
        return inner(x) + 1

    with IntentRouter(store=store) as router:
        router.agent("nest", name="nest")(lambda env, ctx: {"a": outer(1)})
        response = router.route_intent({"intent": {"name": "nest"}})
        assert response.metadata.execution_id is not None
        engine = ReplayEngine.from_store(store, response.metadata.execution_id)
        result = rerun(engine, router, RerunOptions(from_step="inner"))
    assert result.from_step == 1
    assert calls == ["outer", "inner", "outer", "inner"]


def test_options_that_name_no_step_are_refused_before_anything_runs(
    router: IntentRouter, store: MemoryExecutionStore
) -> None:
    """Unknown steps, numbers out of range, side effects live: InvalidRerunOption."""
    original = _run(router)
    before = len(list(store.list()))
    cases: list[tuple[dict[str, Any], str, str]] = [
        ({"from_step": 9}, "from_step", "no step 9 (it has steps 1 to 3)"),
        ({"from_step": "crm.lokup"}, "from_step", "did you mean crm.lookup"),
        ({"live": ["nope"]}, "live", "no step named 'nope'"),
        ({"live": ["mail.send"]}, "live", "is a side effect"),
        ({"override": {"x.y": 1}}, "override", "no step named 'x.y'"),
        ({"override": {1: float("nan")}}, "override", "is not JSON"),
        ({"from_snapshot": "gone"}, "from_snapshot", "no snapshot 'gone'"),
        (
            {"from_failure": True, "from_step": 1},
            "from_step",
            "one starting point, not from_failure and from_step",
        ),
        ({"from_root_cause": True}, "from_root_cause", "did not fail"),
    ]
    for given, option, text in cases:
        with pytest.raises(InvalidRerunOption, match=re.escape(text)) as caught:
            rerun(original, router, RerunOptions(**given))
        assert caught.value.option == option
        assert caught.value.exit_code == 2
        with pytest.raises(InvalidRerunOption):
            plan_rerun(original, RerunOptions(**given))
    assert len(list(store.list())) == before
    assert CALLS == {"lookup": 1, "mail": 1, "model": 1}


def test_from_root_cause_when_explain_finds_none(store: MemoryExecutionStore) -> None:
    """A failure with no suspicious step before it names the failing step instead."""

    def boom(x: int) -> int:
        raise ValueError("bad")

    with IntentRouter(store=store) as router:
        router.agent("job", name="job")(
            lambda env, ctx: {"v": ctx.step("only", {"x": 1}, boom)}
        )
        response = router.route_intent({"intent": {"name": "job"}})
        assert response.metadata.execution_id is not None
        engine = ReplayEngine.from_store(store, response.metadata.execution_id)
        with pytest.raises(InvalidRerunOption, match=r"failed at only, step 1"):
            rerun(engine, router, RerunOptions(from_root_cause=True))


# -- the dry run ---------------------------------------------------------------------


def _actions(plan: Any) -> list[tuple[str, str]]:
    return [(s.name, s.action) for s in plan.steps]


def test_plan_says_what_each_mode_would_do(router: IntentRouter) -> None:
    """plan_rerun predicts serve / live / side effect / error again, running nothing."""
    failed = _run(router, "grace@x.io")
    before = CALLS.copy()
    strict = plan_rerun(failed)
    assert _actions(strict) == [
        ("crm.lookup", "serve"),
        ("mail.send", "side_effect"),
        ("model.score", "replay_error"),
    ]
    assert strict.steps[1].side_effect
    assert "never made again" in strict.steps[1].why
    root = plan_rerun(failed, RerunOptions(from_root_cause=True))
    assert (root.mode, root.from_step) == ("from_root_cause", 1)
    assert _actions(root) == [
        ("crm.lookup", "live"),
        ("mail.send", "side_effect"),
        ("model.score", "live"),
    ]
    assert root.steps[0].why == "the root cause: runs live"
    assert _actions(plan_rerun(failed, RerunOptions(from_failure=True)))[2] == (
        "model.score",
        "live",
    )
    forked = plan_rerun(
        failed, RerunOptions(override={1: {"size": 1}}, live=["model.score"])
    )
    assert _actions(forked) == [
        ("crm.lookup", "override"),
        ("mail.send", "side_effect"),
        ("model.score", "live"),
    ]
    doc = root.to_json()
    assert doc["executionId"] == failed.record.execution_id
    assert doc["steps"][1] == {  # type: ignore[index]
        "number": 2,
        "name": "mail.send",
        "action": "side_effect",
        "why": "a side effect: never made again, served",
        "sideEffect": True,
    }
    assert root.of_action("live") == (root.steps[0], root.steps[2])
    assert before == CALLS


def test_plan_marks_what_cannot_be_served_and_what_runs_inside_a_served_step(
    store: MemoryExecutionStore,
) -> None:
    """A non-JSON output stops a strict re-run (miss); nested calls are 'inside'."""

    @step("inner")
    def inner(x: int) -> int:
        return x

    @step("outer")
    def outer(x: int) -> int:
        return inner(x)

    def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("opaque", {}, object)
        return {"v": outer(1)}

    with IntentRouter(store=store) as router:
        router.agent("job", name="job")(agent)
        response = router.route_intent({"intent": {"name": "job"}})
    assert response.metadata.execution_id is not None
    engine = ReplayEngine.from_store(store, response.metadata.execution_id)
    plan = plan_rerun(engine)
    assert _actions(plan) == [
        ("opaque", "miss"),
        ("outer", "serve"),
        ("inner", "inside"),
    ]
    assert "would stop here" in plan.steps[0].why
    assert _actions(plan_rerun(engine, RerunOptions(allow_live=True)))[0] == (
        "opaque",
        "live",
    )


# -- snapshots -------------------------------------------------------------------------


def test_snapshot_is_recorded_and_restored_with_the_steps_before_it_served(
    store: MemoryExecutionStore,
) -> None:
    """from_snapshot: steps before it served, its state restored, the rest live."""
    calls: list[str] = []
    clock = {"now": 100}

    def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        first = ctx.step("fetch", {"n": 1}, lambda n: calls.append("fetch") or 7)
        # a value no step records: only the snapshot brings it back
        state = ctx.snapshot("fetched", {"first": first, "at": clock["now"]})
        total = ctx.step(
            "sum", {"state": state}, lambda state: calls.append("sum") or 1
        )
        return {"at": state["at"], "total": total}

    with IntentRouter(store=store) as router:
        router.agent("job", name="job")(agent)
        response = router.route_intent({"intent": {"name": "job"}})
        assert response.payload == {"at": 100, "total": 1}
        assert response.metadata.execution_id is not None
        engine = ReplayEngine.from_store(store, response.metadata.execution_id)
        steps = record_steps(engine.record)
        assert [s.name for s in steps] == ["fetch", "snapshot:fetched", "sum"]
        assert steps[1].output == {"first": 7, "at": 100}

        clock["now"] = 200  # today the state would differ
        result = rerun(engine, router, RerunOptions(from_snapshot="fetched"))
        assert (result.mode, result.from_step) == ("from_snapshot", None)
        assert result.response.payload == {"at": 100, "total": 1}  # restored
        assert [s.name for s in result.served] == ["fetch", "snapshot:fetched"]
        assert [s.name for s in result.ran] == ["sum"]
        assert calls == ["fetch", "sum", "sum"]
        assert _actions(plan_rerun(engine, RerunOptions(from_snapshot=2))) == [
            ("fetch", "serve"),
            ("snapshot:fetched", "serve"),
            ("sum", "live"),
        ]


def test_a_new_snapshot_in_old_code_is_no_miss(store: MemoryExecutionStore) -> None:
    """A strict re-run of a record made before ctx.snapshot was added still works."""
    STATE.clear()

    def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        value = ctx.step("fetch", {}, lambda: 3)
        if STATE.get("snapshots"):
            value = ctx.snapshot("fetched", value)
        return {"v": value}

    with IntentRouter(store=store) as router:
        router.agent("job", name="job")(agent)
        response = router.route_intent({"intent": {"name": "job"}})
        assert response.metadata.execution_id is not None
        engine = ReplayEngine.from_store(store, response.metadata.execution_id)
        STATE["snapshots"] = True
        result = rerun(engine, router)
    assert result.ok
    assert result.response.payload == {"v": 3}
    assert [(s.name, s.source, s.miss) for s in result.steps] == [
        ("fetch", "record", False),
        ("snapshot:fetched", "live", False),
    ]


def test_snapshot_state_must_be_json(store: MemoryExecutionStore) -> None:
    """A state JSON cannot carry fails the agent, naming the path; nothing recorded."""

    def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.snapshot("bad", {"when": object()})
        return {}

    with IntentRouter(store=store) as router:
        router.agent("job", name="job")(agent)
        response = router.route_intent({"intent": {"name": "job"}})
    assert response.error is not None
    assert "snapshot 'bad'.when" in response.error.message
    assert response.metadata.execution_id is not None
    assert record_steps(store.load(response.metadata.execution_id)) == ()


def test_snapshot_outside_a_recorded_execution_returns_its_state() -> None:
    """Without a store, ctx.snapshot is the identity."""
    with IntentRouter() as router:
        router.agent("job", name="job")(
            lambda env, ctx: {"v": ctx.snapshot("s", {"a": 1})}
        )
        assert router.route_intent({"intent": {"name": "job"}}).payload == {
            "v": {"a": 1}
        }
