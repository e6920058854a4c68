"""Witness cosignatures of checkpoints, Ed25519 (c2sp.org/tlog-cosignature).

A cosignature is a signed-note signature line by the witness's key name. Its
key id is ``SHA-256(name || 0x0A || 0x04 || public key)[:4]`` (0x04: an
Ed25519 cosignature), and its signature is an 8-byte big-endian POSIX
timestamp followed by the Ed25519 signature of::

    cosignature/v1
    time <timestamp>
    <the checkpoint's note text, extension lines included>

It states: at that time, the largest consistent tree this witness had seen of
the log named by the origin line had this size and root.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterable
from hashlib import sha256
from typing import Final, NamedTuple

from ..errors import LogIntegrityError
from ..record.keys import PublicKey, SigningKey
from .note import check_key_name

__all__ = [
    "Cosigner",
    "cosign",
    "cosignature_key_id",
    "count_cosigners",
    "parse_cosigner",
]

_COSIGNATURE: Final = b"\x04"
_DASH: Final = "\u2014 "
_HEADER: Final = "cosignature/v1\n"
_BLOB: Final = 4 + 8 + 64


class Cosigner(NamedTuple):
    """A witness a reader trusts: its key name and public key. Added in 0.1.0."""

    name: str
    key: PublicKey

    def vkey(self) -> str:
        """The witness as a C2SP verifier key: ``NAME+ID+base64(0x04 || key)``."""
        material = base64.b64encode(_COSIGNATURE + self.key.raw).decode()
        return f"{self.name}+{cosignature_key_id(self.name, self.key).hex()}+{material}"


def parse_cosigner(vkey: str) -> Cosigner:
    """The witness of a verifier key as :meth:`Cosigner.vkey` writes it.

    Raises:
        LogIntegrityError: not of that form, not an Ed25519 cosignature key
            (0x04), or its id is not its name's and key's.
    """
    name, plus, rest = vkey.partition("+")
    key_id, plus2, material = rest.partition("+")
    try:
        raw = base64.b64decode(material, validate=True)
    except (binascii.Error, ValueError):
        raw = b""
    if not plus or not plus2 or len(raw) != 33 or raw[:1] != _COSIGNATURE:
        raise LogIntegrityError(
            f"not an Ed25519 witness key (NAME+ID+BASE64, type 0x04): {vkey[:60]!r}"
        )
    cosigner = Cosigner(check_key_name(name), PublicKey(raw[1:]))
    if cosignature_key_id(name, cosigner.key).hex() != key_id:
        raise LogIntegrityError(f"the witness key's id does not match: {vkey[:60]!r}")
    return cosigner


def cosignature_key_id(name: str, key: PublicKey) -> bytes:
    """The 4-byte id of witness key ``key`` named ``name``."""
    return sha256(name.encode() + b"\n" + _COSIGNATURE + key.raw).digest()[:4]


def _message(text: str, timestamp: int) -> bytes:
    return f"{_HEADER}time {timestamp}\n{text}".encode()


def cosign(text: str, name: str, key: SigningKey, timestamp: int) -> str:
    """The cosignature line (newline ended) of checkpoint note text ``text``.

    Raises:
        LogIntegrityError: ``name`` is not a key name, or ``timestamp`` is
            not in ``1 .. 2**63 - 1`` (a witness never omits it).
    """
    check_key_name(name)
    if not 0 < timestamp < 2**63:
        raise LogIntegrityError(
            f"a cosignature's timestamp is out of range: {timestamp}"
        )
    blob = (
        cosignature_key_id(name, key.public_key)
        + timestamp.to_bytes(8, "big")
        + key.sign(_message(text, timestamp))
    )
    return f"{_DASH}{name} {base64.b64encode(blob).decode()}\n"


def count_cosigners(
    note: bytes, cosigners: Iterable[Cosigner]
) -> tuple[int, list[str]]:
    """How many of ``cosigners`` validly cosigned the note, and what failed.

    Lines by other keys are ignored. A line by a known cosigner whose
    signature fails is reported (and not counted).
    """
    try:
        data = note.decode("utf-8")
    except UnicodeDecodeError:
        return 0, ["the note is not UTF-8"]
    split = data.rfind("\n\n")
    if split < 0:
        return 0, ["the note has no signature block"]
    text, lines = data[: split + 1], data[split + 2 :].split("\n")
    wanted = {(c.name, cosignature_key_id(c.name, c.key)): c for c in cosigners}
    counted: set[str] = set()
    problems: list[str] = []
    for line in lines:
        if not line.startswith(_DASH):
            continue
        name, _, encoded = line[len(_DASH) :].partition(" ")
        try:
            blob = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            continue
        cosigner = wanted.get((name, blob[:4]))
        if cosigner is None:
            continue
        timestamp = int.from_bytes(blob[4:12], "big")
        if len(blob) != _BLOB or not cosigner.key.verify(
            blob[12:], _message(text, timestamp)
        ):
            problems.append(f"the cosignature by {name} does not match the checkpoint")
            continue
        counted.add(name)
    return len(counted), problems
