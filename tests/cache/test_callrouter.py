"""CallRouter: one call routed as a one-agent intent, by ``run`` and by ``arun``."""

from __future__ import annotations

import asyncio

import pytest

from intentusnet import MemoryExecutionStore
from intentusnet.cache.callrouter import CallRouter, running_execution
from intentusnet.envelope import AgentResponse
from intentusnet.errors import EnvelopeValidationError

COLOURS = ["sync", "async"]


def routed(calls: CallRouter, colour: str, job, payload=None) -> AgentResponse:
    """Route a call of ``job`` with ``run`` (``colour`` "sync") or ``arun``."""
    payload = {"x": 1} if payload is None else payload
    if colour == "sync":
        return calls.run(payload, job)

    async def ajob():
        return job()

    return asyncio.run(calls.arun(payload, ajob))


def call_router(colour: str) -> CallRouter:
    return CallRouter(
        MemoryExecutionStore(),
        intent="tool",
        version="1",
        agent="tool",
        is_async=colour == "async",
    )


@pytest.mark.parametrize("colour", COLOURS)
def test_a_job_runs_inside_its_execution(colour):
    """While the job runs, running_execution names its execution; not after."""
    calls = call_router(colour)
    seen: list[str | None] = []

    def job():
        seen.append(running_execution.get())
        return {"ok": True}

    try:
        answer = routed(calls, colour, job)
    finally:
        calls.close()
    assert answer.payload == {"ok": True}
    assert seen == [answer.metadata.execution_id]
    assert running_execution.get() is None


@pytest.mark.parametrize("colour", COLOURS)
def test_the_very_exception_a_job_raised_is_kept_for_its_caller(colour):
    """A job's exception is recorded as an error and kept: failure() returns it."""
    calls = call_router(colour)
    raised = TimeoutError("slow upstream")

    def job():
        raise raised

    try:
        answer = routed(calls, colour, job)
        again = routed(calls, colour, lambda: {"ok": True})  # the job is not kept
    finally:
        calls.close()
    assert answer.status == "error"
    assert "TimeoutError" in answer.error.message
    assert calls.failure(answer, ran=True, from_records=False) is raised
    assert running_execution.get() is None
    assert again.payload == {"ok": True}


@pytest.mark.parametrize("colour", COLOURS)
def test_a_payload_json_cannot_carry_is_refused_before_the_job_runs(colour):
    """A payload that is not JSON raises EnvelopeValidationError; nothing runs."""
    calls = call_router(colour)
    ran: list[str] = []

    try:
        with pytest.raises(EnvelopeValidationError):
            routed(calls, colour, lambda: ran.append("ran") or {}, {"x": {1, 2}})
        answer = routed(calls, colour, lambda: {"ok": True})
    finally:
        calls.close()
    assert ran == []
    assert answer.payload == {"ok": True}
