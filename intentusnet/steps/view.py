"""The steps of a record, read back: each ``STEP_START``/``STEP_END`` pair as one.

A step is a tool, model or HTTP call made inside an agent (``ctx.step``,
``@step``, ``ctx.route``). Its two lines are paired by their ``step`` number;
a step whose ``STEP_END`` line is missing (the process died during the call)
is unfinished. Like the rest of the read path this needs no pydantic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from .._util.jsonvalue import JSONObject, JSONValue, as_int, as_str, wire_form
from ..record.model import EventType, ExecutionRecord

__all__ = ["RecordedStep", "StepRun", "chain_record_steps", "record_steps"]

#: ``outcome`` of a step that started and never ended.
UNFINISHED: Final = "unfinished"


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One step of a record. Added in 0.1.0.

    Attributes:
        number: the step's number in its record, from 1, in the order started.
        name: what was called, e.g. ``crm.lookup`` (``route:INTENT`` for a
            child intent routed with ``ctx.route``).
        agent: the agent that made the call.
        attempt: that agent's attempt number.
        parent: the number of the step this one was called from, if nested.
        args: the arguments (a JSON object), or their ``repr`` when not JSON.
        args_hash: canonical hash of the arguments (of the repr when not JSON).
        side_effect: declared ``side_effect=True``: never run again on a re-run.
        output: the value returned (its ``repr`` when not JSON), or ``None``.
        output_hash: canonical hash of ``output``, ``None`` if the step failed.
        outcome: ``success``, ``error``, ``cancelled`` or ``unfinished``.
        error: ``{"type", "message"}`` when the step failed.
        traceback: the recorded traceback of a failure.
        duration_ms: how long the call took (serving it, if ``source`` is
            ``record``).
        replayable: args and output are JSON, so a re-run can serve it.
        reason: why it is not replayable.
        source: ``live`` (called) or ``record`` (served from ``served_from``).
        served_from: the execution a served step came from.
        live_miss: ran live in a re-run because no recording matched.
        child_execution_id: the child execution of a ``route:`` step.
        start_seq: the ``seq`` of its ``STEP_START`` line.
        end_seq: the ``seq`` of its ``STEP_END`` line, ``None`` if unfinished.
    """

    number: int
    name: str
    agent: str | None
    attempt: int | None
    parent: int | None
    args: JSONValue
    args_hash: str
    side_effect: bool
    output: JSONValue
    output_hash: str | None
    outcome: str
    error: JSONObject | None
    traceback: str | None
    duration_ms: float | None
    replayable: bool
    reason: str | None
    source: str
    served_from: str | None
    live_miss: bool
    child_execution_id: str | None
    start_seq: int
    end_seq: int | None

    @property
    def ok(self) -> bool:
        """The step returned normally."""
        return self.outcome == "success"

    @property
    def error_text(self) -> str:
        """``Type: message`` of the failure, or ``""``."""
        error = self.error
        if error is None:
            return UNFINISHED if self.outcome == UNFINISHED else ""
        kind, message = str(error.get("type") or "Error"), error.get("message")
        return f"{kind}: {message}" if message else kind

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        return wire_form(self)


@dataclass(frozen=True, slots=True)
class StepRun:
    """How a re-run answered one step call. Added in 0.1.0.

    Attributes:
        number: the step's number in the re-run's record.
        name: the step's name.
        args_hash: canonical hash of the arguments it was called with.
        source: ``record`` (served from the original record), ``live``
            (called) or ``miss`` (``CassetteMiss`` raised; nothing ran).
        recorded: the number of the original step that matched, if one did.
        miss: no recording could answer it, so it ran live (``allow_live``,
            or a new step after the failure point of ``from_failure``), or it
            raised ``CassetteMiss``.
        outcome: ``success``, ``error`` or ``cancelled``.
        overridden: served with an output the re-run was given (``override``)
            instead of the recorded one (added in 0.1.0).
    """

    number: int
    name: str
    args_hash: str
    source: str
    recorded: int | None
    miss: bool
    outcome: str
    overridden: bool = False

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        return wire_form(self)


def record_steps(record: ExecutionRecord) -> tuple[RecordedStep, ...]:
    """Return the steps of a record in the order they started. Added in 0.1.0."""
    starts: dict[int, tuple[int, JSONObject]] = {}
    ends: dict[int, tuple[int, JSONObject]] = {}
    start_type, end_type = EventType.STEP_START, EventType.STEP_END
    for event in record.events:
        kind = event.type
        if kind is start_type or kind is end_type:
            number = event.data.get("step")
            if type(number) is int:
                (starts if kind is start_type else ends)[number] = (
                    event.seq,
                    event.data,
                )
    found: list[RecordedStep] = []
    for number, (start_seq, start) in starts.items():
        end_seq, end = ends.get(number, (None, None))
        found.append(_step(number, start_seq, start, end_seq, end))
    found.sort(key=lambda s: s.start_seq)
    return tuple(found)


def chain_record_steps(
    chain: Sequence[ExecutionRecord],
) -> tuple[tuple[RecordedStep, ...], dict[int, str]]:
    """The steps of a resume chain (oldest record first), merged by number.

    A resume keeps its steps' numbers, so a step is the same step in every
    record of the chain: it is taken from the first record whose end of it
    can serve it (it succeeded, or failed, and is replayable), else from the
    first record holding it; an end a resume wrote when it was parked (nothing
    ran: ``source: miss``) is no end. In the order the steps first started;
    ``start_seq`` is that order (the records' own ``seq`` do not compare), so
    the re-run's ``live_from`` compares across the chain. Also returns, by
    number, the record each step was taken from. Added in 0.1.0.
    """
    merged: dict[int, RecordedStep] = {}
    held: dict[int, str] = {}
    for record in chain:
        for step in record_steps(record):
            if step.source == "miss":
                continue
            known = merged.get(step.number)
            if known is None:
                merged[step.number] = replace(step, start_seq=len(merged))
            elif _servable(step) and not _servable(known):
                merged[step.number] = replace(step, start_seq=known.start_seq)
            else:
                continue
            held[step.number] = record.execution_id
    ordered = tuple(sorted(merged.values(), key=lambda s: s.start_seq))
    return ordered, held


def _servable(step: RecordedStep) -> bool:
    return step.replayable and step.outcome in ("success", "error")


def _step(
    number: int,
    start_seq: int,
    start: JSONObject,
    end_seq: int | None,
    end: JSONObject | None,
) -> RecordedStep:
    done = end if end is not None else {}
    error = done.get("error")
    duration = done.get("durationMs")
    replayable = start.get("replayable") is not False and (
        end is not None and done.get("replayable") is not False
    )
    reason = as_str(done.get("reason")) or as_str(start.get("reason"))
    if end is None:
        reason = reason or "the step never finished"
    served = done.get("servedFrom")
    return RecordedStep(
        number=number,
        name=str(start.get("name") or ""),
        agent=as_str(start.get("agent")),
        attempt=as_int(start.get("attempt")),
        parent=as_int(start.get("parent")),
        args=start.get("args"),
        args_hash=str(start.get("argsHash") or ""),
        side_effect=start.get("sideEffect") is True,
        output=done.get("output"),
        output_hash=as_str(done.get("outputHash")),
        outcome=as_str(done.get("outcome")) or UNFINISHED,
        error=error if isinstance(error, dict) else None,
        traceback=as_str(done.get("traceback")),
        duration_ms=float(duration) if isinstance(duration, int | float) else None,
        replayable=replayable,
        reason=None if replayable else reason,
        source=as_str(done.get("source")) or "live",
        served_from=as_str(served.get("executionId"))
        if isinstance(served, dict)
        else None,
        live_miss=done.get("liveMiss") is True,
        child_execution_id=as_str(start.get("childExecutionId"))
        or as_str(done.get("childExecutionId")),
        start_seq=start_seq,
        end_seq=end_seq,
    )
