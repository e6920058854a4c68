"""Why an execution failed: the failing agent and step, and the probable root cause.

``explain(record)`` walks a record's failure path. The failure is the first
failed (or unfinished) step of the first failed agent attempt, or the attempt
itself when no step of it failed. A record whose process was killed (status
``incomplete``) failed where it stopped: in the attempt that never ended, if
one did not; attempts that failed before it were handled (the router went on)
and are only evidence. The probable root cause is the nearest
earlier step whose output fed the failing one and looked wrong: it was null or
empty, or it reached the failing step's arguments and the failure is a type
error. For a failed child intent (a ``route:`` step) the child's record is
explained too, when a store is given to load it from.

This reads only the record; it is a heuristic, and says what it rests on.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import orjson

from .._util.jsonvalue import JSONObject, JSONValue, as_int, as_str, wire_form
from ..errors import IntentusNetError
from ..record.model import EventType, ExecutionEvent, ExecutionRecord, RecordStatus
from .view import UNFINISHED, RecordedStep, record_steps

if TYPE_CHECKING:
    from ..store import ExecutionStore

__all__ = ["Explanation", "explain"]

#: Failures that point at a value of the wrong type reaching the failing code.
_TYPE_ERRORS: Final = frozenset(
    {"TypeError", "AttributeError", "KeyError", "IndexError", "ValueError"}
)
_MAX_DEPTH: Final = 8


@dataclass(frozen=True, slots=True)
class Explanation:
    """The failure path of one record. Added in 0.1.0.

    Attributes:
        execution_id: the record explained.
        status: its status.
        failed: it failed or never finished.
        agent: the agent whose attempt failed.
        attempt: that attempt's number.
        step: the failing step, if the failure happened in one.
        error: ``{"type", "message"}`` of the failure.
        traceback: its recorded traceback.
        root_cause: the earlier step whose output probably caused it.
        summary: one sentence, e.g. ``crm.lookup returned None; crm.score
            failed with AssertionError: contact required``.
        evidence: why ``root_cause`` was chosen, and the failed attempts the
            router handled before a process was stopped, one sentence each.
        failure_seq: the ``seq`` of the event where the failure is recorded.
        child: the explanation of a failed child intent's own record.
    """

    execution_id: str
    status: str
    failed: bool
    agent: str | None
    attempt: int | None
    step: RecordedStep | None
    error: JSONObject | None
    traceback: str | None
    root_cause: RecordedStep | None
    summary: str
    evidence: tuple[str, ...]
    failure_seq: int | None
    child: Explanation | None = None

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        return wire_form(self)


def explain(
    record: ExecutionRecord, store: ExecutionStore | None = None
) -> Explanation:
    """Explain why ``record`` failed (or say that it did not). Added in 0.1.0.

    Args:
        record: the record to explain.
        store: where to load the record of a failed child intent from.
    """
    return _explain(record, store, 0)


def _explain(
    record: ExecutionRecord, store: ExecutionStore | None, depth: int
) -> Explanation:
    status = record.header.status
    failed = status in (RecordStatus.FAILED, RecordStatus.INCOMPLETE)
    # Killed or crashed: it failed where it stopped, not where it recovered.
    stopped = status is RecordStatus.INCOMPLETE
    steps = record_steps(record)
    # the first failed attempt: where things first went wrong
    attempt_end = None if stopped else next(_failed_attempts(record.events), None)
    attempt_start = _open_attempt(record.events) if stopped else None
    agent: str | None = None
    attempt: int | None = None
    for event in (attempt_end, attempt_start):
        if event is not None:
            agent = as_str(event.data.get("agent"))
            attempt = as_int(event.data.get("attempt"))
    failing = _failing_step(steps, agent, attempt, only_theirs=stopped)
    if not failed:
        summary = "the execution completed: nothing failed"
        if failing is not None:
            summary += (
                f" (step {failing.name} failed with {failing.error_text}; "
                "the agent recovered)"
            )
        return Explanation(
            execution_id=record.execution_id,
            status=status.value,
            failed=False,
            agent=None,
            attempt=None,
            step=None,
            error=None,
            traceback=None,
            root_cause=None,
            summary=summary,
            evidence=(),
            failure_seq=None,
        )
    seq: int | None
    if failing is not None:
        error = failing.error or {"type": UNFINISHED, "message": "never finished"}
        tb, seq = failing.traceback, failing.end_seq or failing.start_seq
    elif attempt_end is not None:
        error = _attempt_error(attempt_end.data)
        tb, seq = as_str(attempt_end.data.get("traceback")), attempt_end.seq
    elif attempt_start is not None:
        error = {
            "type": UNFINISHED,
            "message": f"the process stopped during attempt {attempt} (agent "
            f"{agent}): nothing after its start (seq {attempt_start.seq}) was "
            "recorded",
        }
        tb, seq = None, attempt_start.seq
    else:
        error, tb, seq = _unfinished(record)
    if stopped:
        seq = record.events[-1].seq if record.events else None  # all it recorded
    cause, evidence = _root_cause(steps, failing, agent, attempt)
    if stopped:
        evidence += _handled_failures(record.events)
    child = None
    if failing is not None and failing.child_execution_id and store is not None:
        child = _child(failing.child_execution_id, store, depth)
    if failing is not None:
        who = failing.name
    else:
        who = f"agent {agent}" if agent else "the execution"
    happened = f"{who} failed with {_error_text(error)}"
    if failing is not None and failing.outcome == UNFINISHED:
        happened = f"{who} never finished (the process stopped during the call)"
    elif failing is None and attempt_start is not None:
        happened = (
            f"agent {agent} (attempt {attempt}) never finished: the process "
            "stopped during the attempt (killed or crashed)"
        )
    summary = happened
    if cause is not None:
        summary = f"{cause.name} returned {_describe(cause.output)}; {happened}"
    if child is not None:
        summary += f" [in {child.execution_id}: {child.summary}]"
    return Explanation(
        execution_id=record.execution_id,
        status=status.value,
        failed=True,
        agent=agent,
        attempt=attempt,
        step=failing,
        error=error,
        traceback=tb,
        root_cause=cause,
        summary=summary,
        evidence=tuple(evidence),
        failure_seq=seq,
        child=child,
    )


def _failed_attempts(events: tuple[ExecutionEvent, ...]) -> Iterator[ExecutionEvent]:
    """The ends of the attempts that failed, in order."""
    return (
        event
        for event in events
        if event.type is EventType.AGENT_ATTEMPT_END
        and event.data.get("outcome") != "success"
    )


def _open_attempt(events: tuple[ExecutionEvent, ...]) -> ExecutionEvent | None:
    """The last attempt that started and never ended: where a process stopped."""
    ended = {
        (event.data.get("agent"), event.data.get("attempt"))
        for event in events
        if event.type is EventType.AGENT_ATTEMPT_END
    }
    for event in reversed(events):
        if event.type is EventType.AGENT_ATTEMPT_START and (
            (event.data.get("agent"), event.data.get("attempt")) not in ended
        ):
            return event
    return None


def _handled_failures(events: tuple[ExecutionEvent, ...]) -> list[str]:
    """Failed attempts before a stop: the router handled them and went on."""
    return [
        f"before that, attempt {event.data.get('attempt')} (agent "
        f"{event.data.get('agent')}) failed with "
        f"{_error_text(_attempt_error(event.data))}; the router handled it and went on"
        for event in _failed_attempts(events)
    ]


def _failing_step(
    steps: tuple[RecordedStep, ...],
    agent: str | None,
    attempt: int | None,
    *,
    only_theirs: bool = False,
) -> RecordedStep | None:
    failed = [s for s in steps if not s.ok]
    mine = [s for s in failed if s.agent == agent and s.attempt == attempt]
    found = mine if only_theirs else mine or failed
    return found[0] if found else None


def _attempt_error(data: JSONObject) -> JSONObject:
    error = data.get("error")
    if not isinstance(error, dict):
        return {"type": str(data.get("outcome") or "error"), "message": ""}
    details = error.get("details")
    kind = details.get("exception") if isinstance(details, dict) else None
    message = str(error.get("message") or "")
    if isinstance(kind, str):
        # "agent 'x' raised AssertionError: contact required"
        _, _, raised = message.partition(f"raised {kind}")
        return {"type": kind, "message": raised.removeprefix(": ")}
    return {"type": str(error.get("code") or "error"), "message": message}


def _unfinished(record: ExecutionRecord) -> tuple[JSONObject, str | None, int | None]:
    """The failure of a record with no failed attempt: an error answer or a crash."""
    # A signature closing the record is not a step of the execution.
    done = [e for e in record.events if e.type is not EventType.SIGNATURE]
    last = done[-1] if done else None
    seq = None if last is None else last.seq
    final = record.final_response
    error = None if final is None else final.get("error")
    if isinstance(error, dict):  # e.g. NO_AGENT: no attempt was made
        code, message = str(error.get("code")), str(error.get("message"))
        return {"type": code, "message": message}, None, seq
    where = "no event after the header"
    if last is not None:
        where = f"the last event is {last.type.value} (seq {last.seq})"
    message = f"the execution never finished: {where}"
    return {"type": UNFINISHED, "message": message}, None, seq


def _error_text(error: JSONObject) -> str:
    kind, message = error.get("type"), error.get("message")
    return f"{kind}: {message}" if message else str(kind)


def _contains(haystack: JSONValue, needle: JSONValue) -> bool:
    """Whether ``needle`` is ``haystack`` or a value inside it."""
    pending = [haystack]
    while pending:
        item = pending.pop()
        if item == needle and type(item) is type(needle):
            return True
        if isinstance(item, dict):
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return False


def _root_cause(
    steps: tuple[RecordedStep, ...],
    failing: RecordedStep | None,
    agent: str | None,
    attempt: int | None,
) -> tuple[RecordedStep | None, list[str]]:
    if failing is not None:
        before = [
            s
            for s in steps
            if s.ok and s.end_seq is not None and s.end_seq < failing.start_seq
        ]
        kind = str((failing.error or {}).get("type"))
    else:
        before = [
            s for s in steps if s.ok and s.agent == agent and s.attempt == attempt
        ]
        kind = ""
    # nearest first: max keeps the first of equals, so it wins a tie
    scored = [(*_suspicion(step, failing, kind), step) for step in reversed(before)]
    score, why, best = max(scored, key=lambda s: s[0], default=(0, [], None))
    return (best, why) if score else (None, [])


def _suspicion(
    step: RecordedStep, failing: RecordedStep | None, kind: str
) -> tuple[int, list[str]]:
    output = step.output
    empty = output is None or output in ({}, [], "")
    linked = failing is not None and _contains(failing.args, output)
    why: list[str] = []
    if empty:
        why.append(f"{step.name} (step {step.number}) returned {_describe(output)}")
    if linked and failing is not None:
        why.append(f"that value is in the arguments of {failing.name}")
    if empty and linked:
        return 4, why
    if linked and kind in _TYPE_ERRORS and not isinstance(output, dict):
        why.append(f"{failing.name if failing else 'it'} failed with a {kind}")
        return 3, why
    if empty:
        return 2, why
    return 0, []


def _describe(value: JSONValue) -> str:
    if value is None:
        return "None"
    if value == {}:
        return "an empty object"
    if value == []:
        return "an empty list"
    if value == "":
        return "an empty string"
    text = orjson.dumps(value).decode()
    shown = text if len(text) <= 40 else text[:37] + "..."
    return f"a {type(value).__name__} ({shown})"


def _child(child_id: str, store: ExecutionStore, depth: int) -> Explanation | None:
    if depth >= _MAX_DEPTH:
        return None
    try:
        record = store.load(child_id)
    except IntentusNetError:
        return None
    found = _explain(record, store, depth + 1)
    return found if found.failed else None
