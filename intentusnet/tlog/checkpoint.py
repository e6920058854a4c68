"""Checkpoints: a log's size and root, as a C2SP signed note (c2sp.org/tlog-checkpoint).

The body is three lines: the log's origin, its size in decimal (no leading
zeros), and its root hash in base64. The log signs it as a signed note under
its origin as key name. Extension lines of others' checkpoints are accepted
and left unread; this log writes none.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Sequence
from typing import Final, NamedTuple

from ..errors import LogIntegrityError
from ..record.keys import PublicKey, SigningKey
from .merkle import HASH_SIZE, leaf_hash, verify_consistency, verify_inclusion
from .note import check_key_name, open_note, sign_note

__all__ = ["LogCheckpoint", "parse_checkpoint"]

_SIZE: Final = re.compile(r"0|[1-9][0-9]*")


class LogCheckpoint(NamedTuple):
    """A log's tree head: its origin, size and root. Added in 0.1.0."""

    origin: str
    size: int
    root: bytes

    def body(self) -> str:
        """The checkpoint's note text."""
        root = base64.b64encode(self.root).decode()
        return f"{check_key_name(self.origin)}\n{self.size}\n{root}\n"

    def sign(self, key: SigningKey) -> bytes:
        """The checkpoint as a note signed by ``key`` under the origin's name."""
        return sign_note(self.body(), self.origin, key)

    @classmethod
    def open(cls, note: bytes, origin: str, key: PublicKey) -> LogCheckpoint:
        """The checkpoint in a signed note, checked against the log's key and origin.

        Raises:
            LogIntegrityError: the note fails (see ``note.open_note``), or its
                body is not a checkpoint of ``origin``.
        """
        checkpoint = parse_checkpoint(open_note(note, origin, key))
        if checkpoint.origin != origin:
            raise LogIntegrityError(
                f"the checkpoint is of log {checkpoint.origin[:60]!r}, not {origin!r}"
            )
        return checkpoint

    def proves_inclusion(self, leaf: bytes, index: int, proof: Sequence[bytes]) -> bool:
        """Whether ``proof`` shows the bytes ``leaf`` are leaf ``index`` here."""
        return verify_inclusion(leaf_hash(leaf), index, self.size, proof, self.root)

    def proves_consistency(self, older: LogCheckpoint, proof: Sequence[bytes]) -> bool:
        """Whether ``proof`` shows the tree of ``older`` is a prefix of this one."""
        return older.origin == self.origin and verify_consistency(
            older.size, self.size, older.root, self.root, proof
        )


def parse_checkpoint(text: str) -> LogCheckpoint:
    """Read a checkpoint's note text (already checked as signed).

    Raises:
        LogIntegrityError: fewer than three lines, an empty line, a size or
            root not of its form.
    """
    lines = text.split("\n")
    if len(lines) < 4 or lines[-1] != "" or "" in lines[:-1]:
        raise LogIntegrityError(
            "a checkpoint is at least three non-empty lines, each ending in a newline"
        )
    origin, size, root = lines[:3]
    if _SIZE.fullmatch(size) is None:
        raise LogIntegrityError(f"a checkpoint's size is not a decimal: {size[:30]!r}")
    try:
        digest = base64.b64decode(root, validate=True)
    except (binascii.Error, ValueError):
        raise LogIntegrityError("a checkpoint's root is not base64") from None
    if len(digest) != HASH_SIZE:
        raise LogIntegrityError(f"a checkpoint's root is {len(digest)} bytes, not 32")
    return LogCheckpoint(check_key_name(origin), int(size), digest)
