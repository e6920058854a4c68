"""Signatures: what a record's signatures prove, checked by a key ring (DESIGN §10).

A store given a ``SigningKey`` (record/keys.py) names the key's id in line 1 of
every record it opens and, each time it closes one (completed, closed
unfinished, invalidated), appends a ``SIGNATURE`` line: an Ed25519 signature
over the chain head, the hash of the line just before it (record/format.py
says which bytes). The hash chain alone shows only that a record is consistent
with itself: anyone able to write it can recompute every hash. A signature
shows the record is the one the key's holder closed.

:class:`KeyRing` holds the public keys records are checked against (several:
after a rotation, old records still verify with the old public key) and judges
each record as a :class:`SignatureStatus`. Reading a signed record without
checking it needs no key and never imports ``cryptography``.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterable, Sequence
from enum import StrEnum
from pathlib import Path
from typing import Final, NamedTuple

from .._util.jsonvalue import JSONObject, JSONValue
from .._util.time import parse_utc
from ..errors import SignatureError, SigningKeyError
from .format import event_line, signed_message
from .keys import PublicKey, SigningKey
from .model import EventType, ExecutionEvent, ExecutionRecord, VerifyReport

__all__ = [
    "KeyRing",
    "SignatureCheck",
    "SignatureStatus",
    "invalidated",
    "invalidated_lines",
    "signature_data",
]


class SignatureStatus(StrEnum):
    """What a record's signatures show, checked against a ``KeyRing``.

    Added in 0.1.0.
    """

    #: every signature was made by a key of the ring over the record as it is
    SIGNED_VALID = "signed-valid"
    #: the record was changed after it was signed, its signature lines were
    #: removed or moved, or its lines fail verification
    SIGNED_INVALID = "signed-invalid"
    #: line 1 names no signing key, or the record was never closed (its writer
    #: is still writing it, or was killed) and so never signed
    UNSIGNED = "unsigned"
    #: signed by a key the ring does not hold: nothing can be said
    UNKNOWN_KEY = "unknown-key"


class SignatureCheck(NamedTuple):
    """What a ``KeyRing`` found of one record's signatures. Added in 0.1.0.

    Attributes:
        execution_id: the record checked.
        status: what the signatures show.
        key_ids: the keys that signed the record, in order, each once.
        detail: what was found, one sentence.
        accepted: the record passes the ring: ``signed-valid``, or
            ``unsigned`` when the ring does not require a signature.
    """

    execution_id: str
    status: SignatureStatus
    key_ids: tuple[str, ...]
    detail: str
    accepted: bool

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        key_ids: list[JSONValue] = list(self.key_ids)
        return {
            "status": self.status.value,
            "keyIds": key_ids,
            "detail": self.detail,
            "accepted": self.accepted,
        }


class KeyRing:
    """The public keys records are checked against, and whether one is required.

    Hold every key whose records you still keep: after a rotation the old
    public keys go on checking old records. Added in 0.1.0.

    Args:
        keys: the public keys.
        require_signature: an unsigned record fails too (else it is reported
            ``unsigned`` and accepted). Without it, a record whose key id and
            signature lines someone removed, re-hashing the rest, is accepted
            as unsigned: require a signature once every record is signed.

    Raises:
        SigningKeyError: no keys.
    """

    def __init__(
        self, keys: Iterable[PublicKey], *, require_signature: bool = False
    ) -> None:
        self._keys = {key.key_id: key for key in keys}
        if not self._keys:
            raise SigningKeyError("a KeyRing needs at least one public key")
        self.require_signature: Final = require_signature

    @classmethod
    def load(
        cls, *paths: str | os.PathLike[str], require_signature: bool = False
    ) -> KeyRing:
        """Read public key files, and every ``*.pub`` file of directories.

        Raises:
            SigningKeyError: a file cannot be read as an Ed25519 public key
                (see :meth:`PublicKey.load`), or a directory holds no ``.pub``.
        """
        keys: list[PublicKey] = []
        for path in paths:
            if os.path.isdir(path):
                found = sorted(Path(path).glob("*.pub"))
                if not found:
                    raise SigningKeyError(
                        f"no public keys (*.pub files) in {os.fspath(path)}"
                    )
                keys += [PublicKey.load(file) for file in found]
            else:
                keys.append(PublicKey.load(path))
        return cls(keys, require_signature=require_signature)

    @property
    def key_ids(self) -> tuple[str, ...]:
        """The ids of the keys held, sorted."""
        return tuple(sorted(self._keys))

    def __repr__(self) -> str:
        return (
            f"KeyRing({list(self.key_ids)!r}, "
            f"require_signature={self.require_signature!r})"
        )

    def check(self, record: ExecutionRecord) -> SignatureCheck:
        """Judge a loaded record's signatures (its lines were verified on load)."""
        signatures = [e for e in record.events if e.type is EventType.SIGNATURE]
        return self._judge(
            record.execution_id, record.header.key_id, signatures, intact=True
        )

    def check_report(self, report: VerifyReport) -> SignatureCheck:
        """Judge the signatures of a record from its ``verify`` report.

        A record whose report has failures is ``signed-invalid`` if it names a
        key: no signature vouches for lines that fail.
        """
        return self._judge(
            report.execution_id,
            report.key_id,
            report.signatures,
            intact=report.valid,
        )

    def enforce(self, record: ExecutionRecord) -> SignatureCheck:
        """Check ``record``, raising unless the ring accepts it.

        Raises:
            SignatureError: ``signed-invalid``, ``unknown-key``, or
                ``unsigned`` while a signature is required.
        """
        check = self.check(record)
        if not check.accepted:
            raise SignatureError(check.status.value, check.detail, check.execution_id)
        return check

    def _judge(
        self,
        execution_id: str,
        key_id: str | None,
        signatures: Sequence[ExecutionEvent],
        *,
        intact: bool,
    ) -> SignatureCheck:
        signers = tuple(dict.fromkeys(str(e.data.get("keyId")) for e in signatures))
        if key_id is None:
            status, detail = SignatureStatus.UNSIGNED, "line 1 names no signing key"
        elif not intact:
            status = SignatureStatus.SIGNED_INVALID
            detail = (
                f"line 1 names signing key {key_id}, but the record fails "
                "verification: no signature vouches for it"
            )
        elif not signatures:
            status = SignatureStatus.UNSIGNED
            detail = (
                f"line 1 names signing key {key_id}, but the record was never "
                "closed (still being written, or its writer was killed), so "
                "never signed"
            )
        else:
            status, detail = self._signed(execution_id, signatures, signers)
        accepted = status is SignatureStatus.SIGNED_VALID or (
            status is SignatureStatus.UNSIGNED and not self.require_signature
        )
        if status is SignatureStatus.UNSIGNED and self.require_signature:
            detail += "; a signature is required"
        return SignatureCheck(execution_id, status, signers, detail, accepted)

    def _signed(
        self,
        execution_id: str,
        signatures: Sequence[ExecutionEvent],
        signers: tuple[str, ...],
    ) -> tuple[SignatureStatus, str]:
        unknown = [k for k in signers if k not in self._keys]
        for event in signatures:
            data = event.data
            key = self._keys.get(str(data.get("keyId")))
            if key is None:
                continue
            # The reader checked each field's form (format.EventOrder).
            seq, head, signature = data["seq"], data["chainHead"], data["signature"]
            assert isinstance(seq, int)
            assert isinstance(head, str)
            assert isinstance(signature, str)
            message = signed_message(execution_id, seq, head)
            if not key.verify(base64.b64decode(signature), message):
                return SignatureStatus.SIGNED_INVALID, (
                    f"the signature at line {event.seq + 1} (key {key.key_id}) does "
                    "not match the record: it was changed after it was signed"
                )
        if unknown:
            return SignatureStatus.UNKNOWN_KEY, (
                f"signed with {', '.join(unknown)}, which the ring does not hold "
                f"({', '.join(self.key_ids)})"
            )
        return SignatureStatus.SIGNED_VALID, (
            f"signed by {', '.join(signers)} up to its last line "
            f"(line {signatures[-1].seq + 1})"
        )


def signature_data(
    key: SigningKey, execution_id: str, seq: int, chain_head: str
) -> JSONObject:
    """The data of the ``SIGNATURE`` line signing line ``seq`` (hash ``chain_head``)."""
    signature = key.sign(signed_message(execution_id, seq, chain_head))
    return {
        "keyId": key.key_id,
        "seq": seq,
        "chainHead": chain_head,
        "signature": base64.b64encode(signature).decode(),
    }


def invalidated_lines(
    record: ExecutionRecord, reason: str, now_us: int, key: SigningKey | None
) -> bytes:
    """The lines a store appends to invalidate ``record``.

    The ``INVALIDATED`` line, and, for a signed record (line 1 names a key), a
    ``SIGNATURE`` over it by ``key`` (after a rotation, another key than the
    one that signed the rest). An unsigned record stays unsigned.

    Raises:
        SigningKeyError: the record is signed and ``key`` is None: its
            closing line must be signed too, or it would read as tampered.
    """
    seq = len(record.events) + 1
    created_us = parse_utc(record.header.created_utc) or now_us
    at_ms = round((now_us - created_us) / 1000, 3)
    line, head = event_line(
        seq, EventType.INVALIDATED, at_ms, {"reason": reason}, record.header.chain_head
    )
    if record.header.key_id is None:
        return line
    if key is None:
        raise SigningKeyError(
            f"record {record.execution_id} is signed (key {record.header.key_id}): "
            "the INVALIDATED line must be signed too; give the store a signing key "
            "(signing_key=, or intentusnet --signing-key FILE)"
        )
    data = signature_data(key, record.execution_id, seq, head)
    return line + event_line(seq + 1, EventType.SIGNATURE, at_ms, data, head)[0]


def invalidated(record: ExecutionRecord) -> bool:
    """Whether a record holds an ``INVALIDATED`` event (a second adds nothing)."""
    return any(event.type is EventType.INVALIDATED for event in record.events)
