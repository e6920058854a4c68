"""Cassette without a router: a record's steps served to plain code by argument hash."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest

from intentusnet import (
    AgentContext,
    Cassette,
    CassetteMiss,
    IntentEnvelope,
    IntentRouter,
    MemoryExecutionStore,
    ReplayedStepError,
    SideEffectMismatch,
    step,
)

CALLS: list[str] = []


@step("crm.lookup")
def lookup(email: str) -> dict[str, Any] | None:
    CALLS.append(f"lookup:{email}")
    return {"ada@x.io": {"name": "Ada"}}.get(email)


@step("llm.summarize")
async def summarize(text: str, words: int = 3) -> str:
    CALLS.append("summarize")
    return " ".join(text.split()[:words])


@step("mail.send", side_effect=True)
def send(to: str) -> str:
    CALLS.append(f"send:{to}")
    return "m1"


def _flaky(n: int) -> int:
    raise TimeoutError("slow upstream")


@pytest.fixture
def recorded() -> tuple[MemoryExecutionStore, str]:
    """A record of lookups (twice), a summary, an e-mail and a failed call."""

    async def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, Any]:
        lookup("ada@x.io")
        lookup("ada@x.io")
        lookup("bob@x.io")
        text = await summarize("one two three four")
        send("ada@x.io")
        with contextlib.suppress(TimeoutError):
            ctx.step("flaky", {"n": 1}, _flaky)
        return {"text": text}

    store = MemoryExecutionStore()
    with IntentRouter(store=store) as router:
        router.agent("job", name="job")(agent)
        response = router.route_intent({"intent": {"name": "job"}})
    assert response.metadata.execution_id is not None
    CALLS.clear()
    return store, response.metadata.execution_id


def test_serve_answers_by_name_and_argument_hash(
    recorded: tuple[MemoryExecutionStore, str],
) -> None:
    """serve() returns the recorded output; nothing is called."""
    cassette = Cassette.from_store(*recorded)
    first = cassette.serve("crm.lookup", {"email": "ada@x.io"})
    assert first == {"name": "Ada"}
    assert isinstance(first, dict)
    first["name"] = "changed"  # a copy: the record is untouched
    assert cassette.serve("crm.lookup", {"email": "ada@x.io"}) == {"name": "Ada"}
    assert cassette.serve("crm.lookup", {"email": "bob@x.io"}) is None
    summary = {"text": "one two three four", "words": 3}
    assert cassette.serve("llm.summarize", summary) == "one two three"
    assert CALLS == []
    assert [(r.name, r.source, r.recorded) for r in cassette.runs] == [
        ("crm.lookup", "record", 1),
        ("crm.lookup", "record", 2),
        ("crm.lookup", "record", 3),
        ("llm.summarize", "record", 4),
    ]


def test_a_miss_is_loud(recorded: tuple[MemoryExecutionStore, str]) -> None:
    """Unknown arguments, a call past the recorded ones, or a new name: CassetteMiss."""
    store, execution_id = recorded
    cassette = Cassette.from_store(store, execution_id)
    with pytest.raises(CassetteMiss) as caught:
        cassette.serve("crm.lookup", {"email": "eve@x.io"})
    assert caught.value.exit_code == 7
    assert "crm.lookup (step 1, args differ at email)" in str(caught.value)
    assert execution_id in str(caught.value)
    with pytest.raises(CassetteMiss, match="another name"):
        cassette.serve("crm.lookups", {"email": "ada@x.io"})
    cassette.serve("crm.lookup", {"email": "bob@x.io"})
    with pytest.raises(CassetteMiss, match=r"call 2 with these arguments"):
        cassette.serve("crm.lookup", {"email": "bob@x.io"})
    assert len(cassette.misses) == 3


def test_recorded_failures_are_raised_again(
    recorded: tuple[MemoryExecutionStore, str],
) -> None:
    """A call that failed when recorded fails the same way, as its builtin type."""
    cassette = Cassette.from_store(*recorded)
    with pytest.raises(TimeoutError, match="slow upstream") as caught:
        cassette.serve("flaky", {"n": 1})
    assert isinstance(caught.value, ReplayedStepError)


def test_call_runs_live_only_when_allowed(
    recorded: tuple[MemoryExecutionStore, str],
) -> None:
    """call() serves what is recorded; a miss runs fn only with allow_live."""
    store, execution_id = recorded
    strict = Cassette.from_store(store, execution_id)
    with pytest.raises(CassetteMiss):
        strict.call("crm.lookup", {"email": "eve@x.io"}, lambda email: "live")
    live = Cassette.from_store(store, execution_id, allow_live=True)
    assert live.call("crm.lookup", {"email": "eve@x.io"}, lambda email: "live") == (
        "live"
    )
    assert live.call("crm.lookup", {"email": "ada@x.io"}, lambda email: "x") == {
        "name": "Ada"
    }
    assert [(r.source, r.miss) for r in live.runs] == [
        ("live", True),
        ("record", False),
    ]
    with pytest.raises(CassetteMiss):  # serve() has nothing to call
        live.serve("crm.lookup", {"email": "eve@x.io"})


def test_side_effects_with_other_arguments_stop(
    recorded: tuple[MemoryExecutionStore, str],
) -> None:
    """A side effect the record holds with other arguments is not made: it stops."""
    cassette = Cassette.from_store(*recorded, allow_live=True)
    with pytest.raises(SideEffectMismatch):
        cassette.call("mail.send", {"to": "eve@x.io"}, send, side_effect=True)
    assert cassette.serve("mail.send", {"to": "ada@x.io"}) == "m1"
    assert CALLS == []


def test_with_cassette_step_functions_are_served(
    recorded: tuple[MemoryExecutionStore, str],
) -> None:
    """Inside `with cassette:`, @step functions outside agents are answered by it."""
    cassette = Cassette.from_store(*recorded)
    with cassette:
        assert lookup("ada@x.io") == {"name": "Ada"}
        assert asyncio.run(summarize("one two three four")) == "one two three"
        assert send("ada@x.io") == "m1"
        with pytest.raises(CassetteMiss, match=r"crm\.lookup"):
            lookup("eve@x.io")
    assert CALLS == []
    assert lookup("eve@x.io") is None  # outside: a plain call again
    assert CALLS == ["lookup:eve@x.io"]


def test_an_agent_inside_a_cassette_block_records_as_usual() -> None:
    """A router's own execution wins over an active cassette."""
    store = MemoryExecutionStore()
    with IntentRouter(store=store) as router:
        router.agent("job", name="job")(lambda env, ctx: {"v": lookup("ada@x.io")})
        first = router.route_intent({"intent": {"name": "job"}})
        assert first.metadata.execution_id is not None
        with Cassette.from_store(store, first.metadata.execution_id):
            CALLS.clear()
            again = router.route_intent({"intent": {"name": "job"}})
    assert again.payload == {"v": {"name": "Ada"}}
    assert CALLS == ["lookup:ada@x.io"]
