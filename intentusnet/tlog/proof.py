"""Proof files: one leaf's inclusion under a signed checkpoint (c2sp.org/tlog-proof).

::

    c2sp.org/tlog-proof@v1
    extra <base64 of the leaf's bytes>
    index <leaf index>
    <base64 hash>                one line per hash of the inclusion proof
    ...
                                 (an empty line)
    <the signed checkpoint, verbatim>

The ``extra`` line carries the leaf itself (the spec leaves it to the
application): it is not trusted as such, but the proof binds its hash to the
signed root, so a file whose leaf was changed fails. Checking one needs only
the log's public key: no store, no network.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import Final, NamedTuple

from ..errors import LogIntegrityError
from ..record.keys import PublicKey
from .checkpoint import LogCheckpoint, parse_checkpoint
from .merkle import HASH_SIZE

__all__ = ["PROOF_HEADER", "LogProof"]

PROOF_HEADER: Final = "c2sp.org/tlog-proof@v1"
_INDEX: Final = re.compile(r"index (0|[1-9][0-9]*)")
#: A proof of a tree of 2**64 leaves has 64 hashes.
_MAX_PATH: Final = 64


class LogProof(NamedTuple):
    """A tlog-proof: a leaf, its index and inclusion proof, the checkpoint note.

    Added in 0.1.0.

    Attributes:
        leaf: the leaf's bytes (the file's ``extra`` line).
        leaf_index: the leaf's index.
        path: the inclusion proof, leaf's sibling first.
        checkpoint: the signed checkpoint note, as the log wrote it.
    """

    leaf: bytes
    leaf_index: int
    path: tuple[bytes, ...]
    checkpoint: bytes

    def to_bytes(self) -> bytes:
        """The proof file's bytes."""
        lines = [
            PROOF_HEADER,
            "extra " + base64.b64encode(self.leaf).decode(),
            f"index {self.leaf_index}",
            *(base64.b64encode(h).decode() for h in self.path),
        ]
        return ("\n".join(lines) + "\n\n").encode() + self.checkpoint

    @classmethod
    def from_bytes(cls, data: bytes) -> LogProof:
        """Read a proof file (not yet checked: see :meth:`verify`).

        Raises:
            LogIntegrityError: not a tlog-proof of this form, or without the leaf.
        """
        head, blank, checkpoint = data.partition(b"\n\n")
        if not blank:
            raise LogIntegrityError(
                "a proof file has an empty line before its checkpoint"
            )
        try:
            lines = head.decode("ascii").split("\n")
        except UnicodeDecodeError:
            raise LogIntegrityError("a proof file's head is not ASCII") from None
        if lines[0] != PROOF_HEADER:
            raise LogIntegrityError(
                f"not a proof file: it does not begin {PROOF_HEADER}"
            )
        if len(lines) < 3 or not lines[1].startswith("extra "):
            raise LogIntegrityError("the proof file carries no leaf (its extra line)")
        index = _INDEX.fullmatch(lines[2])
        if index is None:
            raise LogIntegrityError(
                "the proof file's third line is not 'index <decimal>'"
            )
        hashes = lines[3:]
        if len(hashes) > _MAX_PATH:
            raise LogIntegrityError(f"a proof file with more than {_MAX_PATH} hashes")
        path = tuple(_base64(line, "a hash of the proof") for line in hashes)
        if any(len(h) != HASH_SIZE for h in path):
            raise LogIntegrityError("a hash of the proof is not 32 bytes")
        leaf = _base64(lines[1][len("extra ") :], "the leaf")
        return cls(leaf, int(index.group(1)), path, checkpoint)

    def verify(self, key: PublicKey, origin: str | None = None) -> LogCheckpoint:
        """The checkpoint, once ``key`` signed it and the proof holds under it.

        Args:
            key: the log's public key, obtained out of band.
            origin: the log expected; default the checkpoint's own origin
                line (the key still has to have signed under that name).

        Raises:
            LogIntegrityError: the checkpoint is not signed by ``key`` (as
                ``origin``), or the leaf is not at ``index`` under its root.
        """
        if origin is None:
            origin = _origin_line(self.checkpoint)
        checkpoint = LogCheckpoint.open(self.checkpoint, origin, key)
        if not checkpoint.proves_inclusion(self.leaf, self.leaf_index, self.path):
            raise LogIntegrityError(
                f"the inclusion proof does not hold: the leaf is not leaf "
                f"{self.leaf_index} of {checkpoint.origin} at size {checkpoint.size}"
            )
        return checkpoint


def _base64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise LogIntegrityError(f"{what} in the proof file is not base64") from None


def _origin_line(note: bytes) -> str:
    text, blank, _ = note.rpartition(b"\n\n")
    if not blank:
        raise LogIntegrityError("the proof file's checkpoint is not a signed note")
    try:
        return parse_checkpoint(text.decode("utf-8") + "\n").origin
    except UnicodeDecodeError:
        raise LogIntegrityError("the proof file's checkpoint is not UTF-8") from None
