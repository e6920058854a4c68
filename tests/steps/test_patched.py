"""``ctx.patched`` and ``ctx.deprecate_patch`` in one process: new executions,
strict re-runs, repeated checks, bad names (resumes: tests/routing/test_patched.py)."""

from __future__ import annotations

from typing import Any

import pytest

from intentusnet import (
    AgentContext,
    IntentEnvelope,
    IntentRouter,
    MemoryExecutionStore,
    ReplayEngine,
    record_steps,
    rerun,
)

ENV = {"intent": {"name": "job"}, "payload": {"n": 1}}


def _router(version: dict[str, int], seen: list[object]) -> IntentRouter:
    """``job`` runs A then B (v1) or A then C behind ``patched("c")`` (v2)."""
    router = IntentRouter(store=MemoryExecutionStore())

    @router.agent("job")
    def job(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.step("A", {}, lambda: "A")
        if version["v"] == 1:
            return {"took": ctx.step("B", {}, lambda: "B")}
        first, again = ctx.patched("c"), ctx.patched("c")
        seen.append((first, again))
        return {"took": ctx.step("C" if first else "B", {}, lambda: "live")}

    return router


def _names(router: IntentRouter, execution_id: str | None) -> list[str]:
    assert execution_id is not None
    return [s.name for s in record_steps(router.store.load(execution_id))]


def test_a_new_execution_takes_the_patch_and_records_one_marker() -> None:
    """patched is True on new code; a second check repeats it, unrecorded."""
    seen: list[object] = []
    router = _router({"v": 2}, seen)

    answer = router.route_intent(ENV)

    assert answer.payload == {"took": "live"}
    assert seen == [(True, True)]
    assert _names(router, answer.metadata.execution_id) == ["A", "patch:c", "C"]


def test_a_strict_rerun_of_an_old_record_takes_the_old_path() -> None:
    """Re-run on v2, a v1 record (A, B) gets False twice and B is served."""
    version, seen = {"v": 1}, []
    router = _router(version, seen)
    old = router.route_intent(ENV).metadata.execution_id
    assert old is not None
    version["v"] = 2

    result = rerun(ReplayEngine.from_store(router.store, old), router)

    assert result.ok
    assert result.response.payload == {"took": "B"}
    assert seen == [(False, False)]
    assert [(s.name, s.source) for s in result.steps] == [
        ("A", "record"),
        ("B", "record"),
    ]


def test_a_strict_rerun_of_a_patched_record_serves_its_marker() -> None:
    """Re-run on v2, a v2 record gets True from its marker; nothing runs."""
    seen: list[object] = []
    router = _router({"v": 2}, seen)
    first = router.route_intent(ENV).metadata.execution_id
    assert first is not None

    result = rerun(ReplayEngine.from_store(router.store, first), router)

    assert result.ok
    assert seen == [(True, True), (True, True)]
    assert {s.source for s in result.steps} == {"record"}
    assert [s.name for s in result.steps] == ["A", "patch:c", "C"]


def test_an_execution_recording_nothing_takes_the_patch() -> None:
    """Without a store the check is True and nothing is recorded."""
    router = IntentRouter()

    @router.agent("job")
    def job(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        ctx.deprecate_patch("old")
        return {"patched": ctx.patched("c")}

    assert router.route_intent(ENV).payload == {"patched": True}


@pytest.mark.parametrize(
    ("name", "error", "says"),
    [
        (3, TypeError, "must be a string, not int"),
        (None, TypeError, "must be a string, not NoneType"),
        ("", ValueError, "must not be empty"),
        ("  ", ValueError, "must not be empty"),
    ],
)
@pytest.mark.parametrize("method", ["patched", "deprecate_patch"])
def test_a_patch_name_that_is_not_a_nonempty_string_is_refused(
    name: object, error: type[Exception], says: str, method: str
) -> None:
    """A bad patch name raises TypeError/ValueError, and no marker is recorded."""
    caught: list[BaseException] = []
    router = IntentRouter(store=MemoryExecutionStore())

    @router.agent("job")
    def job(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        try:
            getattr(ctx, method)(name)
        except (TypeError, ValueError) as exc:
            caught.append(exc)
        return {}

    answer = router.route_intent(ENV)

    [exc] = caught
    assert type(exc) is error
    assert says in str(exc)
    assert _names(router, answer.metadata.execution_id) == []
