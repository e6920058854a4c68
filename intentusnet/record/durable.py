"""What a record says about its durable execution: its key and its resume links.

A resumed execution's record names, in its ``INTENT_RECEIVED`` event, the
record it resumes (``resumeOf``), the first execution of the chain
(``resumeOrigin``) and how many resumes the chain holds (``resumeAttempt``),
as a re-run names ``replayOf``. An execution routed with an idempotency key
names it there too (``idempotencyKey``); a resume carries it on. The link the
other way (which execution resumed this one) is kept by the store beside the
record (``DurableStore.resumed_by``): records are never rewritten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from .model import EventType

if TYPE_CHECKING:
    from .._util.jsonvalue import JSONValue
    from .model import ExecutionRecord

__all__ = [
    "PARK_REASONS",
    "attempts_from",
    "idempotency_key_of",
    "parked_commands",
    "parked_levers",
    "resume_attempt",
    "resume_of",
    "resume_origin",
]


#: Why an execution is parked ``needs_attention``: its ``ATTENTION_NEEDED``
#: event's ``reason``. A resume found a side effect that started and never
#: ended, or today's code asking for another step than the record holds;
#: recovery resumed it ``max_attempts`` times without it finishing.
PARK_REASONS: Final = ("side_effect_in_doubt", "nondeterminism", "attempts_exhausted")


def _received(record: ExecutionRecord, field: str) -> JSONValue:
    for event in record.events:
        if event.type is EventType.INTENT_RECEIVED:
            return event.data.get(field)
    return None


def resume_of(record: ExecutionRecord) -> str | None:
    """The record this execution resumes, if it is a resume."""
    found = _received(record, "resumeOf")
    return found if isinstance(found, str) else None


def resume_origin(record: ExecutionRecord) -> str:
    """The first execution of the record's resume chain (itself if none)."""
    found = _received(record, "resumeOrigin")
    return found if isinstance(found, str) else record.execution_id


def resume_attempt(record: ExecutionRecord) -> int:
    """How many resumes led to this record (0 for a first run)."""
    found = _received(record, "resumeAttempt")
    return found if type(found) is int else 0


def idempotency_key_of(record: ExecutionRecord) -> str | None:
    """The idempotency key the execution was routed with, if any."""
    found = _received(record, "idempotencyKey")
    return found if isinstance(found, str) else None


def attempts_from(record: ExecutionRecord) -> int:
    """The ``resumeAttempt`` of the chain's last operator decision (0 if none).

    Recovery counts a chain's attempts from there: an operator who resolved a
    parked execution gave it its attempts again.
    """
    found = _received(record, "attemptsFrom")
    return found if type(found) is int else 0


def parked_levers(
    execution_id: str, attention: JSONValue, app_ref: str = "MODULE:ATTR"
) -> list[tuple[str, str]]:
    """The levers that move a parked execution on: ``(kind, command)`` pairs.

    One lever per reason it was parked for (``PARK_REASONS``): a side effect
    in doubt is resolved (``happened``, with the output it gave, or
    ``not_happened``); an execution whose attempts ran out is tried again
    (``retry``: resolved as not happened, no step); one whose code changed
    under it (``nondeterminism``) is forked from that step on today's code
    (``fork``; ``app_ref`` names the application). Any parked execution can
    be cancelled (``cancel``). ``[]`` when ``attention`` is not a park's.
    """
    if not isinstance(attention, dict):
        return []
    levers: list[tuple[str, str]] = []
    reason, step = attention.get("reason"), attention.get("step")
    resolve = f"intentusnet resolve {execution_id}"
    if reason == "side_effect_in_doubt" and type(step) is int:
        levers += [
            ("happened", f"{resolve} --step {step} --happened --output JSON"),
            ("not_happened", f"{resolve} --step {step} --not-happened"),
        ]
    elif reason == "attempts_exhausted":
        levers.append(("retry", f"{resolve} --not-happened"))
    elif reason == "nondeterminism" and type(step) is int:
        levers.append(
            ("fork", f"intentusnet fork {execution_id} --from {step} --app {app_ref}")
        )
    return [*levers, ("cancel", f"intentusnet cancel {execution_id}")]


def parked_commands(
    execution_id: str, attention: JSONValue, app_ref: str = "MODULE:ATTR"
) -> list[JSONValue]:
    """The commands of :func:`parked_levers`, for ``inspect`` and pages."""
    return [command for _, command in parked_levers(execution_id, attention, app_ref)]
