"""The one reader: from a record file's bytes to a verified record.

``parse_record`` walks the lines once. Each complete line has its own hash and
its link to the line before checked on its raw bytes, is parsed with orjson
and checked field by field; the first problem raises ``RecordIntegrityError``
naming the line and what failed. A torn last line (a crash mid-write) is left
out and the record reads as unfinished. Status and replayability are derived
here, for every row of the table in DESIGN §4.
"""

from __future__ import annotations

from collections.abc import Callable

from orjson import loads

from .._util.jsonvalue import JSONObject
from .._util.time import parse_utc, utc_text
from ..errors import EnvelopeValidationError, RecordIntegrityError
from ..hashing import compute_hash
from .fingerprint import record_fingerprint
from .format import (
    EventOrder,
    bytes_after_close,
    check_header,
    check_line,
    event_of_line,
    key_id_of,
    newline_replaced,
    split_lines,
)
from .model import (
    SCHEMA_VERSION,
    EventType,
    ExecutionEvent,
    ExecutionHeader,
    ExecutionRecord,
    RecordStatus,
    ReplayableReason,
)

__all__ = [
    "OwnerAlive",
    "derive_reason",
    "parse_record",
    "parsed_again",
]

#: Decides whether the process that owns an unfinished record is still writing it.
OwnerAlive = Callable[[JSONObject | None], bool]

#: ``_envelope_hash_ok``'s verdicts, by line 1's own hash. The verdict depends on
#: line 1's bytes alone, and their hash is checked before it is looked up here,
#: so a record loaded again (line 1 never changes) skips hashing its envelope a
#: second time; a changed line 1 has another key. Bounded: emptied when full.
_ENVELOPE_VERDICTS: dict[bytes, bool] = {}
_ENVELOPE_VERDICTS_MAX = 4096


def parse_record(
    data: bytes, execution_id: str, owner_alive: OwnerAlive
) -> ExecutionRecord:
    """Verify a record file's bytes and assemble the record.

    Args:
        data: the whole file.
        execution_id: the id the file is stored under; the header must name it.
        owner_alive: tells, for an unfinished record, whether its writer is
            still running (``in_progress``) or gone (``incomplete``).

    Raises:
        UnsupportedSchemaVersion: line 1 names a newer format.
        RecordIntegrityError: any damage other than a torn last line; the
            message names the line and what failed.
    """
    lines, torn = split_lines(data)
    if not lines:
        raise RecordIntegrityError(
            "no complete header line: the writer stopped while opening the record",
            execution_id,
            1,
        )
    header = check_header(lines[0], execution_id)
    order = EventOrder(key_id_of(header))
    events, final_event, final = _read_events(lines, execution_id, order)
    chain_head = lines[-1][-66:-2]
    if torn and newline_replaced(torn, chain_head):
        # A crash leaves a line without its newline; a whole, valid line whose
        # newline became another byte is an edit.
        raise RecordIntegrityError(
            "the line's newline was replaced by another byte",
            execution_id,
            len(lines) + 1,
        )
    owner = _object_or_none(header, "owner")
    if torn and order.closed and not owner_alive(owner):
        # Its writer still holding it, the last write may be partly visible.
        raise RecordIntegrityError(
            bytes_after_close(torn, completed=order.final),
            execution_id,
            len(lines) + 1,
        )
    problem = order.end_problem()
    if problem is not None and not (torn and owner_alive(owner)):
        raise RecordIntegrityError(problem, execution_id, len(lines))
    return ExecutionRecord(
        _header(
            header,
            lines[0][-66:-2],
            events,
            final_event,
            final,
            "sha256:" + chain_head.decode(),
            owner_alive,
        ),
        _object(header["envelope"]),
        events,
        final,
        record_fingerprint(events, final),
        bool(torn),
    )


def parsed_again(record: ExecutionRecord, data: bytes) -> ExecutionRecord:
    """``record`` with dicts of its own, parsed again from the bytes it came from.

    For a finished, whole record loaded again from exactly the bytes
    ``parse_record`` verified (``store/file/loaded.py``): what the checks found
    holds, so only the JSON is parsed again, and a caller may change what it
    got without changing what the next load returns.
    """
    lines = data.split(b"\n")
    fields = loads(lines[0])
    events = tuple(
        ExecutionEvent(e.seq, e.type, e.at_ms, loads(line)["data"], e.prev_hash, e.hash)
        for e, line in zip(record.events, lines[1:], strict=False)
    )
    final = _object(
        next(
            e.data["response"]
            for e in reversed(events)
            if e.type is EventType.FINAL_RESPONSE
        )
    )
    header = record.header._replace(
        owner=_object_or_none(fields, "owner"),
        configuration=_object_or_none(fields, "configuration"),
    )
    return ExecutionRecord(
        header, _object(fields["envelope"]), events, final, record.fingerprint
    )


def _read_events(
    lines: list[bytes], execution_id: str, order: EventOrder
) -> tuple[tuple[ExecutionEvent, ...], ExecutionEvent | None, JSONObject | None]:
    """Check and parse the event lines (every line after the header), in order.

    Returns:
        The events, the ``FINAL_RESPONSE`` event and the response it holds
        (both ``None`` when the execution did not finish).
    """
    events: list[ExecutionEvent] = []
    final_event: ExecutionEvent | None = None
    final: JSONObject | None = None
    prev = lines[0][-66:-2]
    for number in range(2, len(lines) + 1):
        line = lines[number - 1]
        problem = check_line(line, prev)
        if problem is not None:
            raise RecordIntegrityError(problem, execution_id, number)
        prev = line[-66:-2]
        event = event_of_line(line, number, execution_id)
        problem = order.problem(event)
        if problem is not None:
            raise RecordIntegrityError(problem, execution_id, number)
        if event.type is EventType.FINAL_RESPONSE:
            response = event.data.get("response")
            if not isinstance(response, dict):
                raise RecordIntegrityError(
                    "FINAL_RESPONSE holds no response object", execution_id, number
                )
            final_event, final = event, response
        events.append(event)
    return tuple(events), final_event, final


def _header(
    fields: JSONObject,
    line_hash: bytes,
    events: tuple[ExecutionEvent, ...],
    final_event: ExecutionEvent | None,
    final: JSONObject | None,
    chain_head: str,
    owner_alive: OwnerAlive,
) -> ExecutionHeader:
    """Build the header: line 1's fields and the state the events show.

    ``line_hash`` is line 1's own hash, already checked against its bytes.
    """
    created, owner_d = fields["createdUtc"], _object_or_none(fields, "owner")
    agent: str | None = None
    duration: float | None = None
    completed: str | None = None
    kinds = {event.type for event in events}
    if final_event is not None and final is not None:
        status = (
            RecordStatus.FAILED
            if final.get("status") == "error"
            else RecordStatus.COMPLETED
        )
        if EventType.ATTENTION_NEEDED in kinds:
            status = RecordStatus.NEEDS_ATTENTION
        if EventType.OPERATOR_DECISION in kinds and any(
            e.type is EventType.OPERATOR_DECISION and e.data.get("action") == "cancel"
            for e in events
        ):
            status = RecordStatus.CANCELLED
        agent, duration = _answered_by(final, final_event.at_ms)
        start = parse_utc(created) if isinstance(created, str) else None
        if start is not None:
            completed = utc_text(start + round(final_event.at_ms * 1000))
    elif owner_alive(owner_d):
        status = RecordStatus.IN_PROGRESS
    elif EventType.EXECUTION_WAITING in kinds:
        status = RecordStatus.WAITING
    elif EventType.EXECUTION_QUEUED in kinds:
        status = RecordStatus.QUEUED
    else:
        status = RecordStatus.INCOMPLETE
    reason = derive_reason(
        envelope_ok=_envelope_hash_ok(fields, line_hash),
        invalidated=EventType.INVALIDATED in kinds,
        recording_failed=EventType.RECORDING_FAILURE in kinds,
        finished=final is not None,
    )
    intent_d, parent = _object(fields["intent"]), fields.get("parentExecutionId")
    return ExecutionHeader(
        SCHEMA_VERSION,
        str(fields["executionId"]),
        str(created),
        completed,
        str(fields["envelopeHash"]),
        _text(intent_d.get("name")),
        _text(intent_d.get("version")),
        status,
        reason is None,
        reason,
        parent if isinstance(parent, str) else None,
        agent,
        duration,
        chain_head,
        owner_d,
        key_id_of(fields),
        _object_or_none(fields, "configuration"),
    )


def derive_reason(
    *, envelope_ok: bool, invalidated: bool, recording_failed: bool, finished: bool
) -> ReplayableReason | None:
    """Return why a record is not replayable, most fundamental reason first."""
    if not envelope_ok:
        return ReplayableReason.ENVELOPE_INVALID
    if invalidated:
        return ReplayableReason.MANUALLY_INVALIDATED
    if recording_failed:
        return ReplayableReason.RECORDING_FAILURE
    if not finished:
        return ReplayableReason.EXECUTION_INCOMPLETE
    return None


def _envelope_hash_ok(header: JSONObject, line_hash: bytes) -> bool:
    """Whether line 1's envelope hashes to the hash recorded beside it.

    Found once per line 1 (named by its checked ``line_hash``) while it is
    kept in ``_ENVELOPE_VERDICTS``.
    """
    verdict = _ENVELOPE_VERDICTS.get(line_hash)
    if verdict is None:
        verdict = _envelope_hashes_to(header)
        if len(_ENVELOPE_VERDICTS) >= _ENVELOPE_VERDICTS_MAX:
            _ENVELOPE_VERDICTS.clear()
        _ENVELOPE_VERDICTS[line_hash] = verdict
    return verdict


def _envelope_hashes_to(header: JSONObject) -> bool:
    envelope, intent = header["envelope"], header["intent"]
    if not isinstance(envelope, dict) or not isinstance(intent, dict):
        return False
    try:
        return compute_hash(envelope) == header["envelopeHash"]
    except EnvelopeValidationError:
        return False


def _answered_by(final: JSONObject, at_ms: float) -> tuple[str | None, float]:
    meta = final.get("metadata")
    if not isinstance(meta, dict):
        return None, at_ms
    agent, duration = meta.get("agent"), meta.get("durationMs")
    return (
        agent if isinstance(agent, str) else None,
        float(duration) if isinstance(duration, int | float) else at_ms,
    )


def _object_or_none(fields: JSONObject, name: str) -> JSONObject | None:
    value = fields.get(name)
    return value if isinstance(value, dict) else None


def _object(value: object) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
