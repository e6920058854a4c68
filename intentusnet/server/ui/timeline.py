"""A record drawn to scale: one bar per attempt, step and child intent.

Everything here is read from the record's own events and from
``record_steps`` (the one reading of steps); nothing is computed that the
record does not hold. Positions are percentages of the execution's length, so
the template draws them with no arithmetic of its own.

The axis accounts for the whole execution. Its zero is the routing call's
start when the record says how long the call ran before the record was open
(``openedAfterMs`` in ``INTENT_RECEIVED``; records before 0.1.0 lack it, and
their axis starts when the record was opened); its end is the final response's
line. Two ``phase`` bars show what no agent did: the time before the record
was open (choosing the agents, hashing, creating the record) and the time from
the last agent event to the final response (building, redacting and sealing
it). Every bar is drawn from the times of its own lines and says that same
length; an agent's or a step's own measure of itself is in its detail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from ..._util.jsonvalue import as_float, as_str
from ...integrations.mcp.view import call_view, is_session
from ...record.model import EventType
from ...steps.view import record_steps

if TYPE_CHECKING:
    from ..._util.jsonvalue import JSONObject, JSONValue
    from ...record.model import ExecutionEvent, ExecutionRecord
    from ...steps.view import RecordedStep

__all__ = ["Bar", "Marker", "Timeline", "draw"]

#: Events that come after the execution (an invalidation may come days later).
_AFTER: Final = frozenset(
    {EventType.INVALIDATED, EventType.SIGNATURE, EventType.CACHE_HIT}
)


@dataclass(frozen=True, slots=True)
class Bar:
    """One span of time: an attempt, a step, a child intent or a phase."""

    span: str  # "attempt-N", "step-N", "phase-open", "phase-answer": its detail's id
    kind: str  # "attempt", "step", "child" or "phase"
    label: str
    start_ms: float  # on the axis
    end_ms: float | None  # None: never ended (the record is incomplete)
    duration_ms: float | None  # end - start: what the bar draws and says
    outcome: str
    left: float  # percent of the whole
    width: float  # percent of the whole
    depth: int = 0
    error: str | None = None
    traceback: str | None = None
    child_execution_id: str | None = None
    detail: str | None = None  # an MCP call's arguments, in short
    side_effect: bool = False
    number: int | None = None  # the attempt's place, or the step's number


@dataclass(frozen=True, slots=True)
class Marker:
    """A moment: a fallback, or the answer being ready."""

    label: str
    at_ms: float
    left: float


@dataclass(frozen=True, slots=True)
class Timeline:
    """The bars and markers of one record on one axis, in milliseconds.

    ``opened_ms`` is where the record was opened on the axis (``None``: the
    record does not say, and the axis starts there); ``total_ms`` the axis'
    length, to the final response's line (or the last line of an unfinished
    record). ``steps`` are the record's steps the bars were drawn from.
    """

    total_ms: float
    opened_ms: float | None
    bars: tuple[Bar, ...]
    markers: tuple[Marker, ...]
    steps: tuple[RecordedStep, ...] = ()  # the record's steps, read once


def _error_text(error: JSONValue | None) -> str | None:
    if not isinstance(error, dict):
        return None
    kind = error.get("code") or error.get("type")
    return f"{kind}: {error.get('message')}"


def attempts(
    record: ExecutionRecord,
) -> list[tuple[ExecutionEvent, ExecutionEvent | None]]:
    """Each attempt's start event and its end event (``None`` if it never ended)."""

    def key(event: ExecutionEvent) -> tuple[str, str]:
        return str(event.data.get("agent")), str(event.data.get("attempt"))

    events = record.events
    ends = {key(e): e for e in events if e.type is EventType.AGENT_ATTEMPT_END}
    return [
        (e, ends.get(key(e))) for e in events if e.type is EventType.AGENT_ATTEMPT_START
    ]


def opened_after(record: ExecutionRecord) -> float | None:
    """How long the routing call ran before its record was open, if recorded."""
    for event in record.events:
        if event.type is EventType.INTENT_RECEIVED:
            return as_float(event.data.get("openedAfterMs"))
    return None


def draw(record: ExecutionRecord) -> Timeline:
    """Lay ``record`` out on one time axis (see the module's docstring)."""
    opened = opened_after(record)
    shift = opened or 0.0
    during = [event for event in record.events if event.type not in _AFTER]
    at = {event.seq: shift + event.at_ms for event in during}
    total = max(shift + max((e.at_ms for e in during), default=0.0), 0.001)
    bars: list[Bar] = []
    for place, (start, end) in enumerate(attempts(record), start=1):
        data = start.data
        bars.append(
            _bar(
                total,
                span=f"attempt-{place}",
                kind="attempt",
                label=f"{data.get('agent')} · attempt {data.get('attempt')}",
                start=shift + start.at_ms,
                end=None if end is None else shift + end.at_ms,
                outcome=None if end is None else as_str(end.data.get("outcome")),
                error=None if end is None else _error_text(end.data.get("error")),
                traceback=None if end is None else as_str(end.data.get("traceback")),
                number=place,
            )
        )
    steps = tuple(record_steps(record))
    parents = {step.number: step.parent for step in steps}
    mcp = is_session(record)
    for step in steps:
        label, outcome, detail = step.name, step.outcome, None
        error = _error_text(step.error)
        if mcp and step.name.startswith("mcp:"):
            # a call of an MCP session: its tool, its arguments, a tool's error
            call = call_view(step, at.get(step.start_seq, 0.0) - shift)
            label, outcome, detail = call.label, call.outcome, call.args or None
            if step.error is None:  # a tool's isError: the call itself went well
                error = call.error
        bars.append(
            _bar(
                total,
                span=f"step-{step.number}",
                kind="child" if step.child_execution_id else "step",
                label=label,
                start=at.get(step.start_seq, shift),
                end=None if step.end_seq is None else at.get(step.end_seq),
                outcome=outcome,
                depth=1 + _depth(step.parent, parents),
                error=error,
                traceback=step.traceback,
                child_execution_id=step.child_execution_id,
                detail=detail,
                side_effect=step.side_effect,
                number=step.number,
            )
        )
    bars.sort(key=lambda bar: (bar.start_ms, bar.depth))
    before, answer = _phases(record, opened, at, total)
    bars = [*before, *bars, *answer]
    markers = _markers(record, opened, at, total)
    return Timeline(total, opened, tuple(bars), markers, steps)


def _phases(
    record: ExecutionRecord,
    opened: float | None,
    at: dict[int, float],
    total: float,
) -> tuple[list[Bar], list[Bar]]:
    """The bars of what no agent did: before the record, and the final answer."""
    before: list[Bar] = []
    answer: list[Bar] = []
    if opened is not None:
        before.append(
            _bar(
                total,
                span="phase-open",
                kind="phase",
                label="before the record: choose agents, hash, open the record",
                start=0.0,
                end=opened,
                outcome="router",
            )
        )
    final = next((e for e in record.events if e.type is EventType.FINAL_RESPONSE), None)
    if final is not None:
        earlier = [
            at[e.seq] for e in record.events if e.seq < final.seq and e.seq in at
        ]
        answer.append(
            _bar(
                total,
                span="phase-answer",
                kind="phase",
                label="final response: build, redact, seal it",
                start=max(earlier, default=opened or 0.0),
                end=at[final.seq],
                outcome="router",
            )
        )
    return before, answer


def _markers(
    record: ExecutionRecord,
    opened: float | None,
    at: dict[int, float],
    total: float,
) -> tuple[Marker, ...]:
    markers = [
        Marker(_fallback(e.data), at[e.seq], _percent(at[e.seq], total))
        for e in record.events
        if e.type is EventType.FALLBACK_TRIGGERED
    ]
    ready = record.header.duration_ms
    if opened is not None and ready is not None and record.final_response:
        # the response's durationMs counts from the routing call's start too
        markers.append(
            Marker(
                "answer ready (the response's durationMs)",
                ready,
                _percent(ready, total),
            )
        )
    return tuple(markers)


def _fallback(data: JSONObject) -> str:
    return f"fallback {data.get('from')} → {data.get('to')} ({data.get('reason')})"


def _depth(parent: int | None, parents: dict[int, int | None]) -> int:
    depth = 0
    while parent is not None and depth < 16:
        depth += 1
        parent = parents.get(parent)
    return depth


def _percent(ms: float, total: float) -> float:
    return round(min(max(ms / total * 100.0, 0.0), 100.0), 3)


def _bar(
    total: float,
    *,
    start: float,
    end: float | None,
    outcome: str | None,
    **fields: Any,  # the rest of Bar's fields, as they are
) -> Bar:
    left = _percent(start, total)
    right = _percent(total if end is None else end, total)
    return Bar(
        start_ms=round(start, 3),
        end_ms=None if end is None else round(end, 3),
        duration_ms=None if end is None else round(end - start, 3),
        outcome=outcome or ("running" if end is None else "?"),
        left=left,
        # a zero-length bar would be invisible: draw at least a sliver
        width=max(round(right - left, 3), 0.4),
        **fields,
    )
