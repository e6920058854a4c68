"""Assembling a record from its file: verify, parse, derive its state.

``parse_record`` first tries a fast reader that checks everything but explains
nothing; at the first sign of trouble the thorough reader walks the lines again
and raises an error naming the line and what failed. Status and replayability
are derived here, for every row of the table in DESIGN §4.

The fast reader verifies the whole hash chain on the raw bytes, parses the
header line and the ``FINAL_RESPONSE`` line, and reads every other event's seq
and type from the start of its line (:data:`EVENT_HEAD`): that is all status,
replayability and a replay need. The rest of each event line is parsed when the
record's ``events`` are first read. What a sound file's bytes say is remembered
with those bytes (``_Verified``), so loading an unchanged record again, such as
a popular cached answer, compares its bytes and skips the checks they passed.
The envelope hash is checked by ``parsed_envelope_hash``, which relies on the
envelope having been parsed from JSON just now.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from orjson import JSONDecodeError
from orjson import loads as _loads

from .._util.jsonvalue import JSONObject
from .._util.time import parse_utc, utc_text
from ..errors import EnvelopeValidationError, RecordIntegrityError
from ..hashing import parsed_envelope_hash
from .format import (
    AFTER_FINAL,
    EVENT_HEAD,
    HEADER_SET,
    chain_holds,
    check_header,
    check_line,
    event_of_line,
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

#: Decides whether the process that owns an unfinished record is still writing it.
OwnerAlive = Callable[[JSONObject | None], bool]
_NUMBER: Final = frozenset({int, float})
_FINISHED, _INVALIDATED, _RECORDING_FAILED = 1, 2, 4
_FLAGGED: Final = {
    EventType.FINAL_RESPONSE: _FINISHED,
    EventType.INVALIDATED: _INVALIDATED,
    EventType.RECORDING_FAILURE: _RECORDING_FAILED,
}
#: Event types by the bytes of their name, as ``EVENT_HEAD`` finds them.
_TYPE_NAMES: Final = {kind.value.encode(): kind for kind in EventType}
_TYPE_SET: Final = frozenset(_TYPE_NAMES)
_AFTER_FINAL_NAMES: Final = frozenset(kind.value.encode() for kind in AFTER_FINAL)
_SCALAR: Final = frozenset({str, int, float, bool, type(None)})
_head = EVENT_HEAD.match


def parse_record(
    data: bytes, execution_id: str, owner_alive: OwnerAlive
) -> ExecutionRecord:
    """Verify a record file's bytes and assemble the record.

    Raises:
        UnsupportedSchemaVersion: line 1 names a newer format.
        RecordIntegrityError: any damage other than a torn last line; the message
            names the line and what failed. An event line whose seq and type
            are sound but whose other fields are not raises when the record's
            ``events`` are first read instead.
    """
    known = _VERIFIED.get(execution_id)
    if known is not None and known.data == data:
        # The same bytes as a record verified before: only the response, which
        # the caller gets as a dict of its own, is parsed again.
        final = None
        if known.final_seq:
            final = _loads(known.lines[known.final_seq])["data"]["response"]
        return _assemble(known, None, final, owner_alive)
    lines, torn = split_lines(data)
    found = _read_fast(data, lines, torn, execution_id)
    if found is None:
        # Something is off; the thorough reader finds the first problem and
        # raises an error naming its line.
        return _read_thorough(data, lines, torn, execution_id, owner_alive)
    known, envelope, final = found
    if len(data) <= _VERIFIED_MAX_SIZE and known.owner_is_flat():
        if len(_VERIFIED) >= _VERIFIED_MAX:
            _VERIFIED.clear()
        _VERIFIED[execution_id] = known
    return _assemble(known, envelope, final, owner_alive)


def _read_fast(
    data: bytes, lines: list[bytes], torn: bytes, execution_id: str
) -> tuple[_Verified, JSONObject, JSONObject | None] | None:
    """Check a sound record quickly; return None at the first sign of trouble.

    Returns what its bytes say, its envelope and its final response.
    """
    if not lines or not chain_holds(lines):
        return None
    try:
        header = _loads(lines[0])
    except JSONDecodeError:
        return None
    if (
        type(header) is not dict
        or type(header.get("schemaVersion")) is not int
        or header["schemaVersion"] != SCHEMA_VERSION
        or header.get("executionId") != execution_id
        or not HEADER_SET.issubset(header)
    ):
        return None
    # Names stay bytes: the checks below are set lookups on them.
    names: list[bytes] = []
    for seq in range(1, len(lines)):
        head = _head(lines[seq])
        if head is None:
            return None
        number, name = head.groups()
        if int(number) != seq:
            return None
        names.append(name)
    if not _TYPE_SET.issuperset(names):
        return None
    final_seq = 0
    final: JSONObject | None = None
    final_at: float | None = None
    if b"FINAL_RESPONSE" in names:
        final_seq = names.index(b"FINAL_RESPONSE") + 1
        if not _AFTER_FINAL_NAMES.issuperset(names[final_seq:]):
            return None
        event = _event_fast(lines[final_seq], final_seq, EventType.FINAL_RESPONSE)
        if event is None:
            return None
        response = event.data.get("response")
        if type(response) is not dict:
            return None
        final, final_at = response, event.at_ms
    if torn and newline_replaced(torn, lines[-1][-66:-2]):
        return None
    flags = _FINISHED if final_seq else 0
    if b"INVALIDATED" in names:
        flags |= _INVALIDATED
    if b"RECORDING_FAILURE" in names:
        flags |= _RECORDING_FAILED
    known = _Verified(
        data, lines, header, names, final_seq, final_at, flags, bool(torn)
    )
    return known, _envelope_of(header), final


def _event_fast(line: bytes, seq: int, kind: EventType) -> ExecutionEvent | None:
    """Parse an event line whose seq and type were read; None if anything is off."""
    try:
        fields = _loads(line)
        at_ms, body = fields["atMs"], fields["data"]
        if (
            fields["type"] != kind.value
            or fields["seq"] != seq
            or type(fields["seq"]) is not int
            or type(body) is not dict
            or type(at_ms) not in _NUMBER
        ):
            return None
        return ExecutionEvent(
            seq, kind, at_ms, body, fields["prevHash"], fields["hash"]
        )
    except (JSONDecodeError, KeyError, TypeError):
        return None


class _Verified:
    """What a record file's bytes say, as far as assembling the record needs.

    Built from bytes that have passed every check of the fast reader, and a
    pure function of them: it is remembered with them, by execution id. It also
    parses, when first asked, what the fast reader left unparsed: the
    envelope and the events of its record.
    """

    __slots__ = (
        "chain_head",
        "created",
        "data",
        "envelope_hash",
        "envelope_ok",
        "execution_id",
        "final_at",
        "final_seq",
        "flags",
        "intent_name",
        "intent_version",
        "lines",
        "names",
        "owner",
        "parent",
        "start_us",
        "torn",
    )

    def __init__(
        self,
        data: bytes,
        lines: list[bytes],
        header: JSONObject,
        names: list[bytes],
        final_seq: int,
        final_at: float | None,
        flags: int,
        torn: bool,
    ) -> None:
        envelope, intent = header["envelope"], header["intent"]
        created, owner = header["createdUtc"], header.get("owner")
        parent = header.get("parentExecutionId")
        self.execution_id = str(header["executionId"])
        self.created = str(created)
        self.start_us = parse_utc(created) if type(created) is str else None
        self.envelope_hash = str(header["envelopeHash"])
        self.parent = parent if type(parent) is str else None
        self.owner: JSONObject | None = owner if type(owner) is dict else None
        if type(intent) is dict:
            self.intent_name = _text(intent.get("name"))
            self.intent_version = _text(intent.get("version"))
        else:
            self.intent_name = self.intent_version = ""
        self.envelope_ok = (
            type(envelope) is dict
            and type(intent) is dict
            and _envelope_hash_ok(envelope, header["envelopeHash"])
        )
        self.data = data
        self.lines = lines
        self.chain_head = "sha256:" + lines[-1][-66:-2].decode()
        self.names = names  # each event's type, as read from the start of its line
        self.final_seq = final_seq
        self.final_at = final_at
        self.flags = flags
        self.torn = torn

    def owner_is_flat(self) -> bool:
        """Whether a shallow copy of the owner shares nothing with it."""
        owner = self.owner
        return owner is None or all(type(v) in _SCALAR for v in owner.values())

    def envelope(self) -> JSONObject:
        """Parse the envelope from line 1."""
        return _envelope_of(_loads(self.lines[0]))

    def events(self) -> tuple[ExecutionEvent, ...]:
        """Parse every event line, or raise ``RecordIntegrityError`` naming one."""
        lines, names = self.lines, self.names
        events: list[ExecutionEvent] = []
        for seq in range(1, len(lines)):
            event = _event_fast(lines[seq], seq, _TYPE_NAMES[names[seq - 1]])
            if event is None:
                # Raises naming what is wrong with the line: its seq and type
                # were read from its start, so only the rest can be at fault.
                event = event_of_line(lines[seq], seq + 1, self.execution_id)
            events.append(event)
        return tuple(events)


#: Records verified before, by execution id; an entry counts only for a file
#: of exactly its bytes (see ``_Verified``). Bounded in entries and in the size
#: of a file remembered.
_VERIFIED: dict[str, _Verified] = {}
_VERIFIED_MAX: Final = 256
_VERIFIED_MAX_SIZE: Final = 65536


def _envelope_of(header: JSONObject) -> JSONObject:
    envelope = header["envelope"]
    return envelope if type(envelope) is dict else {}


def _read_thorough(
    data: bytes,
    lines: list[bytes],
    torn: bytes,
    execution_id: str,
    owner_alive: OwnerAlive,
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
        event = event_of_line(line, number, execution_id)
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
    names = [event.type.value.encode() for event in events]
    known = _Verified(data, lines, header, names, 0, final_at, flags, bool(torn))
    envelope = _envelope_of(header)
    return _assemble(known, envelope, final, owner_alive, tuple(events))


def _assemble(
    known: _Verified,
    envelope: JSONObject | None,
    final: JSONObject | None,
    owner_alive: OwnerAlive,
    events: tuple[ExecutionEvent, ...] | None = None,
) -> ExecutionRecord:
    """Build the record ``known`` describes.

    Its events are parsed when first read, unless the thorough reader has
    them already (and then the envelope too).
    """
    owner = known.owner
    if owner is not None:
        owner = dict(owner)  # the record's own: ``known`` may be shared
    final_at = known.final_at
    agent: str | None = None
    duration: float | None = None
    completed: str | None = None
    if final is not None and final_at is not None:
        status = (
            RecordStatus.FAILED
            if final.get("status") == "error"
            else RecordStatus.COMPLETED
        )
        agent, duration = _answered_by(final, final_at)
        start = known.start_us
        completed = None if start is None else utc_text(start + round(final_at * 1000))
    elif owner_alive(owner):
        status = RecordStatus.IN_PROGRESS
    else:
        status = RecordStatus.INCOMPLETE
    reason = (
        None
        if known.envelope_ok and known.flags == _FINISHED and final is not None
        else derive_reason(
            envelope_ok=known.envelope_ok,
            invalidated=bool(known.flags & _INVALIDATED),
            recording_failed=bool(known.flags & _RECORDING_FAILED),
            finished=final is not None,
        )
    )
    header = ExecutionHeader(
        SCHEMA_VERSION,
        known.execution_id,
        known.created,
        completed,
        known.envelope_hash,
        known.intent_name,
        known.intent_version,
        status,
        reason is None,
        reason,
        known.parent,
        agent,
        duration,
        known.chain_head,
        owner,
    )
    if events is not None:
        assert envelope is not None  # the thorough reader parsed line 1
        return ExecutionRecord(header, envelope, events, final, known.torn)
    return ExecutionRecord._deferred(header, envelope, known, final, known.torn)


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


def _envelope_hash_ok(envelope: JSONObject, envelope_hash: object) -> bool:
    try:
        return parsed_envelope_hash(envelope) == envelope_hash
    except (EnvelopeValidationError, RecursionError):
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


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""
