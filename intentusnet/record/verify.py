"""Line-by-line verification of a record file, and salvage of a damaged one.

``parse_record`` stops at the first damage; :class:`RecordLines` walks every
line and checks each as it is reached, which ``verify_bytes`` (for
``intentusnet verify``) and ``ReplayEngine.events()`` (for ``replay --step``)
both do; ``salvage_header`` reads what it can of a damaged record so the catalog
can still list it.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

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

__all__ = [
    "LineCheck",
    "RecordLines",
    "salvage_header",
    "verify_bytes",
]


class LineCheck(NamedTuple):
    """One complete line of a record file, checked where it stands.

    Attributes:
        number: the line's number, from 1 (line 1 is the header).
        event: the event the line holds; ``None`` for the header, or for a
            line too damaged to read.
        stated: the hex hash the line states (``b""`` if it states none).
        problem: what is wrong with the line, or ``None``.
    """

    number: int
    event: ExecutionEvent | None
    stated: bytes
    problem: str | None


class RecordLines:
    """A record file's complete lines, each checked as the walk reaches it.

    Iterating yields a :class:`LineCheck` per line: its own hash and its link
    to the line before, then the header's fields (line 1) or the event's
    fields and its place after the events before it (``EventOrder``). Each
    line is linked to the hash the line before states, so one edited line is
    one problem, not two. A problem never stops the walk.

    Attributes:
        lines: the complete lines, without their newlines.
        torn: the bytes after the last newline (``b""`` if none).
        order: the events' order, as far as the walk got.
        key_id: the signing key line 1 names, if it can be read at all.
        signatures: the ``SIGNATURE`` events the order took: sound in form,
            each placed over the line before it.
        link: the hash the next line must name as ``prevHash``; ``None`` when
            the last line walked states none.
    """

    def __init__(self, data: bytes, execution_id: str) -> None:
        self.lines, self.torn = split_lines(data)
        self._execution_id = execution_id
        self.key_id = _key_id(self.lines[0], execution_id) if self.lines else None
        self.order = EventOrder(self.key_id)
        self.signatures: list[ExecutionEvent] = []
        self.link: bytes | None = GENESIS_HEX

    def __iter__(self) -> Iterator[LineCheck]:
        for number, line in enumerate(self.lines, 1):
            problem = check_line(line, self.link)
            event: ExecutionEvent | None = None
            try:
                if number == 1:
                    check_header(line, self._execution_id)
                else:
                    event = event_of_line(line, number, "")
                    out_of_order = self.order.problem(event)  # takes the event
                    if out_of_order is None and event.type is EventType.SIGNATURE:
                        self.signatures.append(event)
                    problem = problem or out_of_order
            except RecordIntegrityError as exc:
                # The line's number goes with the check, not in its message.
                message = str(exc)
                if exc.execution_id:
                    message = message.split(": ", 1)[-1]
                problem = problem or message
            stated = line[-66:-2] if len(line) >= 66 else b""
            yield LineCheck(number, event, stated, problem)
            self.link = stated or None

    def end_problem(self) -> str | None:
        """What is wrong with the record ending where it does, or ``None``."""
        return self.order.end_problem() if self.lines else None


def verify_bytes(data: bytes, execution_id: str) -> VerifyReport:
    """Check every line of a record file and report what holds and what fails.

    The report also carries what the record says of its signatures (the key
    line 1 names, the ``SIGNATURE`` lines); checking them takes a key. A record
    of a newer format fails at line 1, saying so (``UnsupportedSchemaVersion``'s
    message).
    """
    walk = RecordLines(data, execution_id)
    failures: list[str] = []
    verified = 0
    for line in walk:
        if line.problem is None:
            verified += 1
        else:
            failures.append(f"line {line.number}: {line.problem}")
    total, torn = len(walk.lines), walk.torn
    if not total:
        failures.append("line 1: no complete header line")
    notes: list[str] = []
    if torn and walk.link is not None and check_line(torn[:-1], walk.link) is None:
        failures.append(
            f"line {total + 1}: the line's newline was replaced by another byte"
        )
    elif torn and walk.order.closed:
        failures.append(
            f"line {total + 1}: " + bytes_after_close(torn, completed=walk.order.final)
        )
    elif torn:
        notes.append(
            f"line {total + 1}: torn last line ({len(torn)} bytes, a write cut "
            "short by a crash) left out; the record is incomplete"
        )
    unclosed = walk.end_problem()
    if unclosed is not None:
        failures.append(f"line {total}: {unclosed}")
    return VerifyReport(
        execution_id=execution_id,
        events_total=total,
        events_verified=verified,
        failures=tuple(failures),
        valid=not failures,
        notes=tuple(notes),
        key_id=walk.key_id,
        signatures=tuple(walk.signatures),
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
