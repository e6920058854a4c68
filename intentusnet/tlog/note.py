"""C2SP signed notes, signed and checked with Ed25519 (c2sp.org/signed-note).

A note is a text ending in a newline, a blank line, and signature lines
``— <key name> <base64(4-byte key id || signature)>``. The key id is the first
four bytes of ``SHA-256(name || 0x0A || 0x01 || public key)`` (0x01: an
Ed25519 note signature). A reader ignores signatures by keys it does not
know, and rejects a note when a known key's signature fails, a known key
signed twice, or no known key signed it.
"""

from __future__ import annotations

import base64
import binascii
from hashlib import sha256
from typing import Final

from ..errors import LogIntegrityError
from ..record.keys import PublicKey, SigningKey

__all__ = ["check_key_name", "note_key_id", "open_note", "sign_note", "verifier_key"]

_ED25519: Final = b"\x01"
_DASH: Final = "\u2014 "
#: Notes with more signature lines are refused (the spec asks for at least 16).
_MAX_SIGNATURES: Final = 256


def check_key_name(name: str) -> str:
    """``name`` if it may name a key (or a log's origin), else raise.

    Raises:
        LogIntegrityError: empty, or holds a space, a ``+`` or a control character.
    """
    if not name or any(c.isspace() or c == "+" or ord(c) < 0x20 for c in name):
        raise LogIntegrityError(
            f"invalid key name {name[:60]!r}: non-empty, without spaces or '+'"
        )
    return name


def note_key_id(name: str, public_key: PublicKey) -> bytes:
    """The 4-byte id of an Ed25519 note key named ``name``."""
    return sha256(name.encode() + b"\n" + _ED25519 + public_key.raw).digest()[:4]


def verifier_key(name: str, public_key: PublicKey) -> str:
    """The key as a C2SP verifier key: ``<name>+<hex id>+<base64(0x01 || key)>``."""
    check_key_name(name)
    material = base64.b64encode(_ED25519 + public_key.raw).decode()
    return f"{name}+{note_key_id(name, public_key).hex()}+{material}"


def sign_note(text: str, name: str, key: SigningKey) -> bytes:
    """The note of ``text`` signed by ``key`` as ``name``.

    Raises:
        LogIntegrityError: ``text`` does not end in a newline or holds a
            control character, or ``name`` is not a key name.
    """
    check_key_name(name)
    _check_text(text)
    if not text.endswith("\n"):
        raise LogIntegrityError("a note's text must end in a newline")
    blob = note_key_id(name, key.public_key) + key.sign(text.encode())
    return f"{text}\n{_DASH}{name} {base64.b64encode(blob).decode()}\n".encode()


def open_note(data: bytes, name: str, key: PublicKey) -> str:
    """The text of a note that ``key`` (named ``name``) signed.

    Raises:
        LogIntegrityError: the note is malformed, ``key`` did not sign it,
            its signature fails, or it holds ``key``'s signature twice.
    """
    try:
        note = data.decode("utf-8")
    except UnicodeDecodeError:
        raise LogIntegrityError("a signed note is not UTF-8") from None
    _check_text(note)
    split = note.rfind("\n\n")
    if split < 0:
        raise LogIntegrityError("a signed note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block.endswith("\n"):
        raise LogIntegrityError("a signed note's last signature line has no newline")
    lines = block[:-1].split("\n")
    if len(lines) > _MAX_SIGNATURES:
        raise LogIntegrityError(
            f"a signed note has more than {_MAX_SIGNATURES} signatures"
        )
    wanted = note_key_id(name, key)
    found: list[bytes] = []
    for line in lines:
        signer, signature = _signature_line(line)
        if signer == name and signature[:4] == wanted:
            found.append(signature[4:])
    if not found:
        raise LogIntegrityError(
            f"the note is not signed by {name} (key {wanted.hex()})"
        )
    if len(found) > 1:
        raise LogIntegrityError(f"the note holds {len(found)} signatures by {name}")
    if not key.verify(found[0], text.encode()):
        raise LogIntegrityError(f"the signature by {name} does not match the note")
    return text


def _signature_line(line: str) -> tuple[str, bytes]:
    if not line.startswith(_DASH):
        raise LogIntegrityError(f"not a signature line: {line[:60]!r}")
    signer, space, encoded = line[len(_DASH) :].partition(" ")
    if not space or not signer or " " in encoded:
        raise LogIntegrityError(f"not a signature line: {line[:60]!r}")
    check_key_name(signer)
    try:
        signature = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise LogIntegrityError(f"a signature of {signer} is not base64") from None
    if len(signature) < 5:
        raise LogIntegrityError(f"a signature of {signer} is too short")
    return signer, signature


def _check_text(text: str) -> None:
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise LogIntegrityError("a signed note holds a control character")
