"""Assembling a record from its file: verify, parse, derive its state.

``parse_record`` first tries a fast reader that checks everything but explains
nothing; at the first sign of trouble the thorough reader walks the lines again
and raises an error naming the line and what failed. Status and replayability
are derived here, for every row of the table in DESIGN §4.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import orjson

from ._json import JSONObject
from ._recordbuild import new_event, new_header, new_record
from ._recordfile import (
    AFTER_FINAL,
    HEADER_SET,
    TYPES,
    chain_holds,
    check_header,
    check_line,
    event_from_fields,
    load_json,
    newline_replaced,
    split_lines,
)
from ._utc import parse_utc, utc_text
from .errors import EnvelopeValidationError, RecordIntegrityError
from .hashing import compute_hash
from .record import (
    SCHEMA_VERSION,
    EventType,
    ExecutionEvent,
    ExecutionRecord,
    RecordStatus,
    ReplayableReason,
)

#: Decides whether the process that owns an unfinished record is still writing it.
OwnerAlive = Callable[[JSONObject | None], bool]
_NUMBER: Final = frozenset({int, float})
_FINISHED, _INVALIDATED, _RECORDING_FAILED = 1, 2, 4
_FLAGGED: Final = {
    EventType.FINAL_RESPONSE: _FINISHED,
    EventType.INVALIDATED: _INVALIDATED,
    EventType.RECORDING_FAILURE: _RECORDING_FAILED,
}
_FLAG_NAMES: Final = {kind.value: flag for kind, flag in _FLAGGED.items()}
#: Verdicts of the envelope-hash check, keyed by the header line's own hash.
#: The check is a pure function of that line's verified bytes, so a record
#: loaded again (a popular cached answer) need not re-canonicalise its envelope.
_ENVELOPE_OK: dict[str, bool] = {}
_ENVELOPE_OK_MAX: Final = 4096
_loads = orjson.loads


def parse_record(
    data: bytes, execution_id: str, owner_alive: OwnerAlive
) -> ExecutionRecord:
    """Verify a record file's bytes and assemble the record.

    Raises:
        UnsupportedSchemaVersion: line 1 names a newer format.
        RecordIntegrityError: any damage other than a torn last line; the message
            names the line and what failed.
    """
    lines, torn = split_lines(data)
    record = _read_fast(lines, torn, execution_id, owner_alive)
    if record is None:
        # Something is off; the thorough reader finds the first problem and
        # raises an error naming its line.
        record = _read_thorough(lines, torn, execution_id, owner_alive)
    return record


def _read_fast(
    lines: list[bytes], torn: bytes, execution_id: str, owner_alive: OwnerAlive
) -> ExecutionRecord | None:
    """Read a sound record quickly; return None at the first sign of trouble.

    One orjson call parses every line; the chain is checked on the raw bytes of
    each line by slicing its fixed-width tail and hashing the rest.
    """
    try:
        parsed = _loads(b"[" + b",".join(lines) + b"]")
    except orjson.JSONDecodeError:
        return None
    if len(parsed) != len(lines) or not lines:
        return None
    header = parsed[0]
    if (
        type(header) is not dict
        or type(header.get("schemaVersion")) is not int
        or header["schemaVersion"] != SCHEMA_VERSION
        or header.get("executionId") != execution_id
        or not HEADER_SET.issubset(header)
    ):
        return None
    if not chain_holds(lines):
        return None
    events: list[ExecutionEvent] = []
    append = events.append
    final: JSONObject | None = None
    final_at: float | None = None
    flags = 0
    # Event types are compared as strings: hashing an Enum member calls Python.
    for seq in range(1, len(parsed)):
        fields = parsed[seq]
        try:
            name = fields["type"]
            kind, at_ms, body = TYPES[name], fields["atMs"], fields["data"]
            prev_hash, own_hash = fields["prevHash"], fields["hash"]
            if (
                type(fields["seq"]) is not int
                or fields["seq"] != seq
                or type(body) is not dict
                or type(at_ms) not in _NUMBER
            ):
                return None
        except (KeyError, TypeError):
            return None
        if name in _FLAG_NAMES:
            if final is not None and name != "INVALIDATED":
                return None
            flags |= _FLAG_NAMES[name]
            if name == "FINAL_RESPONSE":
                final = body.get("response")
                if type(final) is not dict:
                    return None
                final_at = at_ms
        elif final is not None and name != "CACHE_HIT":
            return None
        append(new_event(seq, kind, at_ms, body, prev_hash, own_hash))
    if torn and newline_replaced(torn, lines[-1][-66:-2]):
        return None
    return _assemble(
        header, tuple(events), final, final_at, flags, bool(torn), owner_alive
    )


def _read_thorough(
    lines: list[bytes], torn: bytes, execution_id: str, owner_alive: OwnerAlive
) -> ExecutionRecord:
    """Read line by line, raising at the first problem with a precise message."""
    if not lines:
        raise RecordIntegrityError(
            "no complete header line: the writer stopped while opening the record",
            execution_id,
            1,
        )
    header = check_header(lines[0], execution_id)
    prev = lines[0][-66:-2]
    events: list[ExecutionEvent] = []
    final: JSONObject | None = None
    final_at: float | None = None
    flags = 0
    for number in range(2, len(lines) + 1):
        line = lines[number - 1]
        problem = check_line(line, prev)
        if problem is not None:
            raise RecordIntegrityError(problem, execution_id, number)
        prev = line[-66:-2]
        event = event_from_fields(
            load_json(line, execution_id, number), number, execution_id
        )
        if final is not None and event.type not in AFTER_FINAL:
            raise RecordIntegrityError(
                f"{event.type.value} after FINAL_RESPONSE", execution_id, number
            )
        flags |= _FLAGGED.get(event.type, 0)
        if event.type is EventType.FINAL_RESPONSE:
            response = event.data.get("response")
            if not isinstance(response, dict):
                raise RecordIntegrityError(
                    "FINAL_RESPONSE holds no response object", execution_id, number
                )
            final, final_at = response, event.at_ms
        events.append(event)
    if torn and newline_replaced(torn, prev):
        # A crash leaves a line without its newline; a whole, valid line whose
        # newline became another byte is an edit.
        raise RecordIntegrityError(
            "the line's newline was replaced by another byte",
            execution_id,
            len(lines) + 1,
        )
    return _assemble(
        header, tuple(events), final, final_at, flags, bool(torn), owner_alive
    )


def _assemble(
    header: JSONObject,
    events: tuple[ExecutionEvent, ...],
    final: JSONObject | None,
    final_at: float | None,
    flags: int,
    torn: bool,
    owner_alive: OwnerAlive,
) -> ExecutionRecord:
    envelope, intent, owner = header["envelope"], header["intent"], header.get("owner")
    owner_d = owner if type(owner) is dict else None
    if type(envelope) is dict and type(intent) is dict:
        envelope_ok = _envelope_hash_ok(header, envelope)
    else:
        envelope_ok = False
        envelope = envelope if type(envelope) is dict else {}
        intent = intent if type(intent) is dict else {}
    agent: str | None = None
    duration: float | None = None
    completed: str | None = None
    created = header["createdUtc"]
    if final is not None and final_at is not None:
        status = (
            RecordStatus.FAILED
            if final.get("status") == "error"
            else RecordStatus.COMPLETED
        )
        agent, duration = _answered_by(final, final_at)
        start = parse_utc(created) if type(created) is str else None
        completed = None if start is None else utc_text(start + round(final_at * 1000))
    elif owner_alive(owner_d):
        status = RecordStatus.IN_PROGRESS
    else:
        status = RecordStatus.INCOMPLETE
    reason = derive_reason(
        envelope_ok=envelope_ok,
        invalidated=bool(flags & _INVALIDATED),
        recording_failed=bool(flags & _RECORDING_FAILED),
        finished=final is not None,
    )
    parent = header.get("parentExecutionId")
    return new_record(
        new_header(
            SCHEMA_VERSION,
            str(header["executionId"]),
            str(created),
            completed,
            str(header["envelopeHash"]),
            _text(intent.get("name")),
            _text(intent.get("version")),
            status,
            reason is None,
            reason,
            parent if type(parent) is str else None,
            agent,
            duration,
            events[-1].hash if events else str(header.get("hash")),
            owner_d,
        ),
        envelope,
        events,
        final,
        torn,
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


def _envelope_hash_ok(header: JSONObject, envelope: JSONObject) -> bool:
    key = header.get("hash")
    if type(key) is str:
        known = _ENVELOPE_OK.get(key)
        if known is not None:
            return known
    try:
        ok = compute_hash(envelope) == header["envelopeHash"]
    except (EnvelopeValidationError, RecursionError):
        ok = False
    if type(key) is str:
        if len(_ENVELOPE_OK) >= _ENVELOPE_OK_MAX:
            _ENVELOPE_OK.clear()
        _ENVELOPE_OK[key] = ok
    return ok


def _answered_by(final: JSONObject, at_ms: float) -> tuple[str | None, float]:
    meta = final.get("metadata")
    if not isinstance(meta, dict):
        return None, at_ms
    agent, duration = meta.get("agent"), meta.get("durationMs")
    return (
        agent if isinstance(agent, str) else None,
        float(duration) if isinstance(duration, int | float) else at_ms,
    )


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
