"""The record file format: sealed JSON lines in one hash chain (DESIGN §4).

Every line is a JSON object whose last two fields are ``prevHash`` and ``hash``.
``hash`` is ``"sha256:"`` + the hex SHA-256 of the line's bytes up to (not
including) the comma before ``"hash"``, so it covers ``prevHash`` too; line 1
(the header) links to :data:`GENESIS_HASH`. Checking a line slices fixed-width
fields off its raw bytes and hashes them: nothing is ever re-serialised.
"""

from __future__ import annotations

import re
from hashlib import sha256
from typing import Final

from orjson import JSONDecodeError, dumps, loads

from .._util.jsonvalue import JSONObject
from ..errors import RecordIntegrityError, UnsupportedSchemaVersion
from .model import SCHEMA_VERSION, EventType, ExecutionEvent

__all__ = [
    "AFTER_FINAL",
    "AFTER_SIGNATURE",
    "GENESIS_HASH",
    "GENESIS_HEX",
    "KEY_ID",
    "PREV_TAG",
    "PREV_TAIL",
    "SIGNED_PREFIX",
    "TAIL",
    "TYPES",
    "EventOrder",
    "bytes_after_close",
    "check_header",
    "check_line",
    "check_schema",
    "event_line",
    "event_of_line",
    "header_line",
    "key_id_of",
    "load_json",
    "newline_replaced",
    "seal",
    "signed_message",
    "split_lines",
]

GENESIS_HASH: Final = "sha256:" + "0" * 64
GENESIS_HEX: Final = b"0" * 64
_HASH_TAG: Final = b',"hash":"sha256:'
PREV_TAG: Final = b',"prevHash":"sha256:'
TAIL: Final = len(_HASH_TAG) + 64 + 2  # ,"hash":"sha256:<hex>"}
PREV_TAIL: Final = len(PREV_TAG) + 64 + 1  # ,"prevHash":"sha256:<hex>"
#: Events that may follow FINAL_RESPONSE: records are appended to, never rewritten.
AFTER_FINAL: Final = frozenset(
    {EventType.INVALIDATED, EventType.CACHE_HIT, EventType.SIGNATURE}
)
#: Events that may follow a SIGNATURE: its writer closed the record.
AFTER_SIGNATURE: Final = frozenset({EventType.INVALIDATED, EventType.SIGNATURE})
#: A signing key's id: ``ed25519:`` and the first 16 hex digits of the SHA-256
#: of its 32-byte public key (a pattern: compiled on first use).
KEY_ID: Final = r"ed25519:[0-9a-f]{16}"
#: An Ed25519 signature (64 bytes) in standard base64.
_SIGNATURE: Final = r"[A-Za-z0-9+/]{86}=="
#: What a signature's message starts with (see :func:`signed_message`).
SIGNED_PREFIX: Final = b"intentusnet record signature v1\n"
_MIN_LINE: Final = TAIL + PREV_TAIL + 2
#: Where a line's body (the bytes its hash covers) holds ``,"prevHash":"sha256:``,
#: its hex and the closing quote, counted from the line's end.
_PREV_START: Final = -TAIL - PREV_TAIL
_PREV_HEX: Final = -TAIL - 65
_BODY_END: Final = -TAIL - 1
_QUOTE: Final = ord('"')
_NUMBER: Final = (int, float)
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
    key_id: str | None = None,
    configuration: JSONObject | None = None,
) -> tuple[bytes, str]:
    """Seal line 1: the header as opened, and the envelope.

    ``key_id`` names the key that will sign the record when it is closed; an
    unsigned record's header has no ``keyId`` field at all.

    ``configuration`` (the router's configuration for the intent, with its
    fingerprint) is written only when given (added in 0.1.0).

    Raises:
        TypeError: the envelope is not JSON-serialisable.
    """
    intent = envelope.get("intent")
    intent_d = intent if isinstance(intent, dict) else {}
    fields: JSONObject = {
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
    }
    if key_id is not None:
        fields["keyId"] = key_id
    if configuration is not None:
        fields["configuration"] = configuration
    fields["envelope"] = envelope
    fields["prevHash"] = GENESIS_HASH
    return seal(fields)


def event_line(
    seq: int, kind: EventType, at_ms: float, data: JSONObject, prev_hash: str
) -> tuple[bytes, str]:
    """Seal event line ``seq`` of ``kind`` holding ``data``, after ``prev_hash``."""
    return seal(
        {"seq": seq, "type": kind, "atMs": at_ms, "data": data, "prevHash": prev_hash}
    )


def signed_message(execution_id: str, seq: int, chain_head: str) -> bytes:
    """The bytes a ``SIGNATURE`` line's Ed25519 signature is made over.

    ``seq`` and ``chain_head`` are the signed line's (``0`` for the header):
    the chain head covers every line up to it, the header and so the
    execution id included; naming them makes the statement stand alone.
    """
    return SIGNED_PREFIX + f"{execution_id}\n{seq}\n{chain_head}".encode()


def key_id_of(header: JSONObject) -> str | None:
    """The signing key line 1 names, or None (no ``keyId``, or not one)."""
    key_id = header.get("keyId")
    return key_id if isinstance(key_id, str) else None


class EventOrder:
    """The order every reader holds a record's events to, one event at a time.

    After ``FINAL_RESPONSE`` only :data:`AFTER_FINAL` may follow; after a
    ``SIGNATURE`` (its writer closed the record) only ``INVALIDATED`` and
    more signatures. A ``SIGNATURE`` line stands only in a record whose header
    names a signing key, names a key id and holds a signature of the right
    form, and signs the line just before it. A record whose header names a
    key ends, once completed or invalidated, with a signature over its last
    line (:meth:`end_problem`). Whether a signature was made by its key is
    not a question of order: a ``KeyRing`` answers it.
    """

    __slots__ = ("_invalidated", "_key_id", "_last", "_signed", "final")

    def __init__(self, key_id: str | None) -> None:
        self._key_id = key_id
        #: a FINAL_RESPONSE was seen
        self.final = False
        self._signed = False
        self._invalidated = False
        self._last: EventType | None = None

    @property
    def closed(self) -> bool:
        """The record was completed, or its last line is a signature."""
        return self.final or self._last is EventType.SIGNATURE

    def problem(self, event: ExecutionEvent) -> str | None:
        """What is wrong with ``event`` coming next, or None; then take it."""
        kind = event.type
        if self.final and kind not in AFTER_FINAL:
            return f"{kind.value} after FINAL_RESPONSE"
        if self._signed and kind not in AFTER_SIGNATURE:
            return f"{kind.value} after the record was signed and closed"
        if kind is EventType.SIGNATURE:
            problem = self._signature_problem(event)
            if problem is not None:
                return problem
            self._signed = True
        elif kind is EventType.FINAL_RESPONSE:
            self.final = True
        elif kind is EventType.INVALIDATED:
            self._invalidated = True
        self._last = kind
        return None

    def end_problem(self) -> str | None:
        """What is wrong with the record ending after the events taken, or None."""
        if (
            self._key_id is not None
            and (self.final or self._invalidated)
            and self._last is not EventType.SIGNATURE
        ):
            return (
                f"the header names signing key {self._key_id}, but the record was "
                "closed without a signature over its last line (signature lines "
                "removed, or lines added after it was signed)"
            )
        return None

    def _signature_problem(self, event: ExecutionEvent) -> str | None:
        data = event.data
        key_id = data.get("keyId")
        seq = data.get("seq")
        signature = data.get("signature")
        if self._key_id is None:
            return "a SIGNATURE line in a record whose header names no signing key"
        if not isinstance(key_id, str) or re.fullmatch(KEY_ID, key_id) is None:
            return f"SIGNATURE names no valid keyId (found {key_id!r})"
        if not isinstance(signature, str) or not re.fullmatch(_SIGNATURE, signature):
            return "SIGNATURE holds no Ed25519 signature (88 characters of base64)"
        if (
            type(seq) is not int
            or seq != event.seq - 1
            or data.get("chainHead") != event.prev_hash
        ):
            return (
                "SIGNATURE does not sign the line just before it (its seq or "
                "chainHead names another line)"
            )
        return None


def check_line(line: bytes, prev_hex: bytes | None) -> str | None:
    """Return what is wrong with one line (no newline), or ``None`` if it holds.

    ``prev_hex`` is the hex hash of the line before, or ``None`` to skip the link.
    """
    if len(line) < _MIN_LINE or line[-TAIL:-66] != _HASH_TAG:
        return "not a sealed record line: it does not end with its hash field"
    if line[-2:] != b'"}':
        return "not a sealed record line: bytes after its hash field"
    stated = line[-66:-2]
    computed = sha256(line[:-TAIL]).hexdigest().encode()
    if computed != stated:
        return (
            "hash mismatch, the line was changed: it says sha256:"
            f"{stated.decode(errors='replace')[:16]}..., its bytes hash to "
            f"sha256:{computed.decode()[:16]}..."
        )
    if line[_PREV_START:_PREV_HEX] != PREV_TAG or line[_BODY_END] != _QUOTE:
        return "not a sealed record line: no prevHash field before its hash"
    if prev_hex is not None and line[_PREV_HEX:_BODY_END] != prev_hex:
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
    if "keyId" in header:  # an unsigned record's header has no keyId at all
        key_id = header["keyId"]
        if not isinstance(key_id, str) or re.fullmatch(KEY_ID, key_id) is None:
            raise RecordIntegrityError(
                f"header names no valid keyId (found {key_id!r})", execution_id, 1
            )
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
    seq = fields.get("seq")
    kind = fields.get("type")
    at_ms = fields.get("atMs")
    data = fields.get("data")
    if seq != number - 1 or type(seq) is not int:
        raise RecordIntegrityError(
            f"seq is {seq!r}, expected {number - 1}", execution_id, number
        )
    event_type = TYPES.get(kind) if isinstance(kind, str) else None
    if event_type is None:
        raise RecordIntegrityError(f"unknown event type {kind!r}", execution_id, number)
    if not isinstance(at_ms, _NUMBER) or not isinstance(data, dict):
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


def bytes_after_close(torn: bytes, *, completed: bool) -> str:
    """What is wrong with a closed record that ends in a partial line.

    A crash tears only the write in progress; the writer of a completed or
    signed record is done, and later appends (``INVALIDATED``) are whole
    lines. So bytes after its last line are an edit, not crash damage.
    """
    what = "completed" if completed else "signed"
    return (
        f"{len(torn)} bytes after the last line of a {what} record (a {what} "
        "record is appended to by whole lines only)"
    )


def newline_replaced(torn: bytes, prev: bytes) -> bool:
    """Whether a "torn" last line is a whole line whose newline was edited."""
    return len(torn) > _MIN_LINE and check_line(torn[:-1], prev) is None
