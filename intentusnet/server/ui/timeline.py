"""A record drawn to scale: one bar per attempt, step and child intent.

Everything here is read from the record's own events and from
``record_steps`` (the one reading of steps); nothing is computed that the
record does not hold. Positions are percentages of the execution's length, so
the template draws them with no arithmetic of its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ...integrations.mcp.view import call_view, is_session
from ...record.model import EventType
from ...steps.view import record_steps

if TYPE_CHECKING:
    from ..._util.jsonvalue import JSONObject, JSONValue
    from ...record.model import ExecutionRecord

__all__ = ["Bar", "Marker", "Timeline", "draw"]


@dataclass(frozen=True, slots=True)
class Bar:
    """One span of time: an attempt, a step or a child intent."""

    kind: str  # "attempt", "step" or "child"
    label: str
    start_ms: float
    end_ms: float | None  # None: never ended (the record is incomplete)
    duration_ms: float | None
    outcome: str
    depth: int
    left: float  # percent of the whole
    width: float  # percent of the whole
    error: str | None
    traceback: str | None
    child_execution_id: str | None
    detail: str | None = None  # an MCP call's arguments, in short
    side_effect: bool = False


@dataclass(frozen=True, slots=True)
class Marker:
    """A moment: a fallback, a cache hit, an invalidation."""

    label: str
    at_ms: float
    left: float


@dataclass(frozen=True, slots=True)
class Timeline:
    """The bars and markers of one record, and its length in milliseconds."""

    total_ms: float
    bars: tuple[Bar, ...]
    markers: tuple[Marker, ...]


def _number(value: JSONValue | None) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _text(value: JSONValue | None) -> str | None:
    return value if isinstance(value, str) else None


def _error_text(error: JSONValue | None) -> str | None:
    if not isinstance(error, dict):
        return None
    kind = error.get("code") or error.get("type")
    return f"{kind}: {error.get('message')}"


def _attempts(record: ExecutionRecord) -> list[tuple[JSONObject, float, JSONObject]]:
    """(start data, start ms, end data or {}) per attempt, in start order."""
    ends: dict[tuple[str, str], tuple[float, JSONObject]] = {}
    for event in record.events:
        if event.type is EventType.AGENT_ATTEMPT_END:
            key = (str(event.data.get("agent")), str(event.data.get("attempt")))
            ends[key] = (event.at_ms, event.data)
    found = []
    for event in record.events:
        if event.type is EventType.AGENT_ATTEMPT_START:
            key = (str(event.data.get("agent")), str(event.data.get("attempt")))
            end_ms, end = ends.get(key, (-1.0, {}))
            found.append((event.data, event.at_ms, {**end, "_endMs": end_ms}))
    return found


def draw(record: ExecutionRecord) -> Timeline:
    """Lay ``record`` out on one time axis (0 = the record was opened)."""
    at = {event.seq: event.at_ms for event in record.events}
    last = max((event.at_ms for event in record.events), default=0.0)
    total = max(last, record.header.duration_ms or 0.0, 0.001)
    spans: list[tuple[str, str, float, float | None, JSONObject, int, str | None]] = []
    for start, start_ms, end in _attempts(record):
        end_ms = _number(end.get("_endMs"))
        label = f"{start.get('agent')} · attempt {start.get('attempt')}"
        finished = None if end_ms is None or end_ms < 0 else end_ms
        spans.append(("attempt", label, start_ms, finished, end, 0, None))
    steps = record_steps(record)
    parents = {step.number: step.parent for step in steps}
    mcp = is_session(record)
    for step in steps:
        end_ms = None if step.end_seq is None else at.get(step.end_seq)
        data: JSONObject = {
            "outcome": step.outcome,
            "durationMs": step.duration_ms,
            "error": step.error,
            "traceback": step.traceback,
            "sideEffect": step.side_effect,
        }
        label = step.name
        if mcp and step.name.startswith("mcp:"):
            # a call of an MCP session: its tool, its arguments, a tool's error
            call = call_view(step, at.get(step.start_seq, 0.0))
            label = call.label
            data.update(outcome=call.outcome, detail=call.args or None)
            if step.error is None:  # a tool's isError: the call itself went well
                data["errorText"] = call.error
        kind = "child" if step.child_execution_id else "step"
        depth = 1 + _depth(step.parent, parents)
        spans.append(
            (
                kind,
                label,
                at.get(step.start_seq, 0.0),
                end_ms,
                data,
                depth,
                step.child_execution_id,
            )
        )
    spans.sort(key=lambda span: (span[2], span[5]))
    bars = tuple(_bar(span, total) for span in spans)
    markers = tuple(
        Marker(
            _marker_label(event.type, event.data),
            event.at_ms,
            _percent(event.at_ms, total),
        )
        for event in record.events
        if event.type
        in (EventType.FALLBACK_TRIGGERED, EventType.CACHE_HIT, EventType.INVALIDATED)
    )
    return Timeline(total, bars, markers)


def _depth(parent: int | None, parents: dict[int, int | None]) -> int:
    depth = 0
    while parent is not None and depth < 16:
        depth += 1
        parent = parents.get(parent)
    return depth


def _percent(ms: float, total: float) -> float:
    return round(min(max(ms / total * 100.0, 0.0), 100.0), 3)


def _bar(
    span: tuple[str, str, float, float | None, JSONObject, int, str | None],
    total: float,
) -> Bar:
    kind, label, start, end, data, depth, child = span
    outcome = str(data.get("outcome") or ("running" if end is None else "?"))
    left = _percent(start, total)
    right = _percent(total if end is None else end, total)
    traceback = data.get("traceback")
    return Bar(
        kind=kind,
        label=label,
        start_ms=start,
        end_ms=end,
        duration_ms=_number(data.get("durationMs")),
        outcome=outcome,
        depth=depth,
        left=left,
        # a zero-length bar would be invisible: draw at least a sliver
        width=max(right - left, 0.4),
        error=_error_text(data.get("error")) or _text(data.get("errorText")),
        traceback=traceback if isinstance(traceback, str) else None,
        child_execution_id=child,
        detail=detail if isinstance(detail := data.get("detail"), str) else None,
        side_effect=data.get("sideEffect") is True,
    )


def _marker_label(kind: EventType, data: JSONObject) -> str:
    if kind is EventType.FALLBACK_TRIGGERED:
        return f"fallback {data.get('from')} → {data.get('to')} ({data.get('reason')})"
    if kind is EventType.CACHE_HIT:
        return f"cache hit from {data.get('sourceExecutionId')}"
    return f"invalidated: {data.get('reason')}"
