"""Line-by-line verification of a record file, and salvage of a damaged one.

``parse_record`` stops at the first damage; ``verify_bytes`` checks every line
and reports each problem (for ``intentusnet verify``), and ``salvage_header``
reads what it can of a damaged record so the catalog can still list it.
"""

from __future__ import annotations

from orjson import JSONDecodeError, loads

from .._util.jsonvalue import JSONObject
from ..errors import RecordIntegrityError
from .format import (
    GENESIS_HEX,
    EventOrder,
    bytes_after_close,
    check_header,
    check_line,
    check_schema,
    event_of_line,
    key_id_of,
    load_json,
    split_lines,
)
from .model import (
    SCHEMA_VERSION,
    EventType,
    ExecutionEvent,
    ExecutionHeader,
    RecordStatus,
    ReplayableReason,
    VerifyReport,
)


def verify_bytes(data: bytes, execution_id: str) -> VerifyReport:
    """Check every line of a record file and report what holds and what fails.

    The report also carries what the record says of its signatures (the key
    line 1 names, the ``SIGNATURE`` lines); checking them takes a key.

    Raises:
        UnsupportedSchemaVersion: the record is of a newer format (this release
            cannot judge it).
    """
    lines, torn = split_lines(data)
    failures: list[str] = []
    verified = 0
    prev: bytes | None = GENESIS_HEX
    key_id = _key_id(lines[0], execution_id) if lines else None
    order = EventOrder(key_id)
    signatures: list[ExecutionEvent] = []
    for number, line in enumerate(lines, 1):
        problem = check_line(line, prev)
        try:
            if number == 1:
                # Also raises UnsupportedSchemaVersion, which is not a failure.
                check_header(line, execution_id)
            else:
                event = event_of_line(line, number, "")
                out_of_order = order.problem(event)
                if out_of_order is not None:
                    raise RecordIntegrityError(out_of_order)
                if event.type is EventType.SIGNATURE:
                    signatures.append(event)
        except RecordIntegrityError as exc:
            if exc.execution_id:
                exc = RecordIntegrityError(str(exc).split(": ", 1)[-1])
            problem = problem or str(exc)
        if problem is None:
            verified += 1
        else:
            failures.append(f"line {number}: {problem}")
        # Link the next line to this line's stated hash, so that one edited line
        # is one failure, not two.
        prev = line[-66:-2] if len(line) >= 66 else None
    if not lines:
        failures.append("line 1: no complete header line")
    notes: list[str] = []
    if torn and prev is not None and check_line(torn[:-1], prev) is None:
        failures.append(
            f"line {len(lines) + 1}: the line's newline was replaced by another byte"
        )
    elif torn and order.closed:
        failures.append(
            f"line {len(lines) + 1}: " + bytes_after_close(torn, completed=order.final)
        )
    elif torn:
        notes.append(
            f"line {len(lines) + 1}: torn last line ({len(torn)} bytes, a write cut "
            "short by a crash) left out; the record is incomplete"
        )
    unclosed = order.end_problem() if lines else None
    if unclosed is not None:
        failures.append(f"line {len(lines)}: {unclosed}")
    return VerifyReport(
        execution_id=execution_id,
        events_total=len(lines),
        events_verified=verified,
        failures=tuple(failures),
        valid=not failures,
        notes=tuple(notes),
        key_id=key_id,
        signatures=tuple(signatures),
    )


def _key_id(line: bytes, execution_id: str) -> str | None:
    """The signing key line 1 names, if it can be read at all."""
    try:
        return key_id_of(load_json(line, execution_id, 1))
    except RecordIntegrityError:
        return None


def salvage_header(data: bytes, execution_id: str) -> ExecutionHeader | None:
    """Read what can be read of a damaged record, marked ``integrity_failure``.

    Returns ``None`` when not even line 1 can be read.
    """
    lines, _torn = split_lines(data)
    try:
        header = load_json(lines[0], execution_id, 1) if lines else None
        check_schema(header, execution_id)
    except RecordIntegrityError:
        return None
    assert isinstance(header, dict)  # check_schema passed
    final = _salvage_final(lines[1:])
    if final is None:
        status = RecordStatus.INCOMPLETE
    elif final.get("status") == "error":
        status = RecordStatus.FAILED
    else:
        status = RecordStatus.COMPLETED
    intent = header.get("intent")
    intent_d = intent if isinstance(intent, dict) else {}
    parent = header.get("parentExecutionId")
    return ExecutionHeader(
        schema_version=SCHEMA_VERSION,
        execution_id=execution_id,
        created_utc=str(header.get("createdUtc", "")),
        completed_utc=None,
        envelope_hash=str(header.get("envelopeHash", "")),
        intent_name=str(intent_d.get("name", "")),
        intent_version=str(intent_d.get("version", "")),
        status=status,
        replayable=False,
        replayable_reason=ReplayableReason.INTEGRITY_FAILURE,
        parent_execution_id=parent if isinstance(parent, str) else None,
        agent=None,
        duration_ms=None,
        chain_head="",
    )


def _salvage_final(lines: list[bytes]) -> JSONObject | None:
    for line in reversed(lines):
        try:
            fields = loads(line)
        except JSONDecodeError:
            continue
        if isinstance(fields, dict) and fields.get("type") == "FINAL_RESPONSE":
            data = fields.get("data")
            response = data.get("response") if isinstance(data, dict) else None
            return response if isinstance(response, dict) else None
    return None
