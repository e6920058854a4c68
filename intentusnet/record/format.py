"""The record file format: sealed JSON lines in one hash chain (DESIGN §4).

Every line is a JSON object whose last two fields are ``prevHash`` and ``hash``.
``hash`` is ``"sha256:"`` + the hex SHA-256 of the line's bytes up to (not
including) the comma before ``"hash"``, so it covers ``prevHash`` too; line 1
(the header) links to :data:`GENESIS_HASH`. Checking a line slices fixed-width
fields off its raw bytes and hashes them: nothing is ever re-serialised.
"""

from __future__ import annotations

from hashlib import sha256
from typing import Final

from orjson import JSONDecodeError, dumps, loads

from .._util.jsonvalue import JSONObject
from .._util.time import parse_utc
from ..errors import RecordIntegrityError, UnsupportedSchemaVersion
from .model import SCHEMA_VERSION, EventType, ExecutionEvent, ExecutionRecord

GENESIS_HASH: Final = "sha256:" + "0" * 64
GENESIS_HEX: Final = b"0" * 64
_HASH_TAG: Final = b',"hash":"sha256:'
PREV_TAG: Final = b',"prevHash":"sha256:'
TAIL: Final = len(_HASH_TAG) + 64 + 2  # ,"hash":"sha256:<hex>"}
PREV_TAIL: Final = len(PREV_TAG) + 64 + 1  # ,"prevHash":"sha256:<hex>"
#: Events that may follow FINAL_RESPONSE: records are appended to, never rewritten.
AFTER_FINAL: Final = frozenset({EventType.INVALIDATED, EventType.CACHE_HIT})
_MIN_LINE: Final = TAIL + PREV_TAIL + 2
TYPES: Final = {t.value: t for t in EventType}
_HEADER_KEYS: Final = (
    "executionId",
    "createdUtc",
    "envelopeHash",
    "intent",
    "envelope",
)


def seal(fields: JSONObject) -> tuple[bytes, str]:
    """Serialise ``fields`` (whose last key is ``prevHash``) as one sealed line.

    Returns:
        The line, newline included, and its hash (``"sha256:<hex>"``).

    Raises:
        TypeError: a value is not JSON-serialisable (orjson's error).
    """
    body = dumps(fields)[:-1]
    digest = sha256(body).hexdigest()
    # One join copies the line once; chained + would copy it three times.
    line = b"".join((body, _HASH_TAG, digest.encode(), b'"}\n'))
    return line, "sha256:" + digest


def header_line(
    *,
    execution_id: str,
    created_utc: str,
    envelope_hash: str,
    envelope: JSONObject,
    parent_execution_id: str | None,
    owner: JSONObject,
    configuration: JSONObject | None = None,
) -> tuple[bytes, str]:
    """Seal line 1: the header as opened, and the envelope.

    ``configuration`` (the router's configuration for the intent, with its
    fingerprint) is written only when given (added in 0.1.0).

    Raises:
        TypeError: the envelope is not JSON-serialisable.
    """
    intent = envelope.get("intent")
    intent_d = intent if isinstance(intent, dict) else {}
    return seal(
        {
            "schemaVersion": SCHEMA_VERSION,
            "executionId": execution_id,
            "createdUtc": created_utc,
            "envelopeHash": envelope_hash,
            "intent": {
                "name": intent_d.get("name"),
                "version": intent_d.get("version", "1.0"),
            },
            "parentExecutionId": parent_execution_id,
            "owner": owner,
            **({} if configuration is None else {"configuration": configuration}),
            "envelope": envelope,
            "prevHash": GENESIS_HASH,
        }
    )


def invalidated_line(record: ExecutionRecord, reason: str, now_us: int) -> bytes:
    """Seal the ``INVALIDATED`` line that continues ``record``'s chain."""
    created_us = parse_utc(record.header.created_utc) or now_us
    line, _digest = seal(
        {
            "seq": len(record.events) + 1,
            "type": EventType.INVALIDATED.value,
            "atMs": round((now_us - created_us) / 1000, 3),
            "data": {"reason": reason},
            "prevHash": record.header.chain_head,
        }
    )
    return line


def check_line(line: bytes, prev_hex: bytes | None) -> str | None:
    """Return what is wrong with one line (no newline), or ``None`` if it holds.

    ``prev_hex`` is the hex hash of the line before, or ``None`` to skip the link.
    """
    if len(line) < TAIL + PREV_TAIL + 2 or line[-TAIL:-66] != _HASH_TAG:
        return "not a sealed record line: it does not end with its hash field"
    if line[-2:] != b'"}':
        return "not a sealed record line: bytes after its hash field"
    body = line[:-TAIL]
    computed = sha256(body).hexdigest().encode()
    if computed != line[-66:-2]:
        return (
            "hash mismatch, the line was changed: it says sha256:"
            f"{line[-66:-2].decode(errors='replace')[:16]}..., its bytes hash to "
            f"sha256:{computed.decode()[:16]}..."
        )
    if body[-PREV_TAIL:-65] != PREV_TAG or body[-1:] != b'"':
        return "not a sealed record line: no prevHash field before its hash"
    if prev_hex is not None and body[-65:-1] != prev_hex:
        return (
            "chain broken: prevHash does not match the hash of the line before "
            "(lines removed, reordered or inserted)"
        )
    return None


def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Split a file into complete lines and the torn rest (``b""`` if none)."""
    lines = data.split(b"\n")
    return lines, lines.pop()


def check_schema(header: object, execution_id: str) -> None:
    """Refuse a header of a format version this release cannot read."""
    version = header.get("schemaVersion") if isinstance(header, dict) else None
    if version == SCHEMA_VERSION and type(version) is int:
        return
    if type(version) is int and version > SCHEMA_VERSION:
        raise UnsupportedSchemaVersion(
            f"written with record schema version {version}; this release of "
            f"intentusnet reads version {SCHEMA_VERSION} only. Upgrade intentusnet "
            "to read it.",
            execution_id,
            1,
        )
    raise RecordIntegrityError(
        f"header has no valid schemaVersion (found {version!r})", execution_id, 1
    )


def check_header(line: bytes, execution_id: str) -> JSONObject:
    """Parse and check line 1, raising ``RecordIntegrityError`` naming the fault."""
    header = load_json(line, execution_id, 1)
    check_schema(header, execution_id)
    problem = check_line(line, GENESIS_HEX)
    if problem is not None:
        raise RecordIntegrityError(problem, execution_id, 1)
    for key in _HEADER_KEYS:
        if key not in header:
            raise RecordIntegrityError(f"header lacks {key!r}", execution_id, 1)
    if header["executionId"] != execution_id:
        raise RecordIntegrityError(
            f"header names execution {header['executionId']!r}, not this file's id",
            execution_id,
            1,
        )
    return header


def load_json(line: bytes, execution_id: str, number: int) -> JSONObject:
    """Parse one line as a JSON object or raise ``RecordIntegrityError``."""
    try:
        value = loads(line)
    except JSONDecodeError as exc:
        raise RecordIntegrityError(
            f"not valid JSON ({exc})", execution_id, number
        ) from None
    if not isinstance(value, dict):
        raise RecordIntegrityError("line is not a JSON object", execution_id, number)
    return value


def event_of_line(line: bytes, number: int, execution_id: str) -> ExecutionEvent:
    """Parse event line ``number`` and check its fields.

    Raises:
        RecordIntegrityError: the line is not a JSON object, or its seq, type,
            atMs or data is not what line ``number`` must hold.
    """
    fields = load_json(line, execution_id, number)
    seq, kind, at_ms, data = (
        fields.get("seq"),
        fields.get("type"),
        fields.get("atMs"),
        fields.get("data"),
    )
    if seq != number - 1 or type(seq) is not int:
        raise RecordIntegrityError(
            f"seq is {seq!r}, expected {number - 1}", execution_id, number
        )
    event_type = TYPES.get(kind) if isinstance(kind, str) else None
    if event_type is None:
        raise RecordIntegrityError(f"unknown event type {kind!r}", execution_id, number)
    if not isinstance(at_ms, int | float) or not isinstance(data, dict):
        raise RecordIntegrityError(
            "event lacks a numeric atMs or a data object", execution_id, number
        )
    return ExecutionEvent(
        number - 1,
        event_type,
        at_ms,
        data,
        str(fields.get("prevHash", "")),
        str(fields.get("hash", "")),
    )


def newline_replaced(torn: bytes, prev: bytes) -> bool:
    """Whether a "torn" last line is a whole line whose newline was edited."""
    return len(torn) > _MIN_LINE and check_line(torn[:-1], prev) is None
