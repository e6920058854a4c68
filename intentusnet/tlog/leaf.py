"""The log's leaf: one closed record, named by its id, chain head and key.

A leaf is UTF-8 text, four lines, each ending in a newline::

    intentusnet log leaf v1
    <execution id>
    sha256:<64 hex>          the record's final chain hash (its last line's hash)
    ed25519:<16 hex>         the key that signed it, or "unsigned"

The first line names the format and its version, so a leaf is never read as
another kind of statement and a later format can be told apart. Everything
else the record holds is reached through its chain head: the leaf commits to
the whole record without carrying it.

A *deletion leaf* says the key's holder deleted the record (``prune``,
``delete``), at that chain head; its first line is ``intentusnet log
deletion v1`` and the rest is as above, the key line naming the deleting key.
"""

from __future__ import annotations

import re
from typing import Final, NamedTuple

from .._util.ids import ID_PART_PATTERN
from ..errors import LogIntegrityError

__all__ = ["DELETION_PREFIX", "LEAF_PREFIX", "UNSIGNED", "LogLeaf"]

LEAF_PREFIX: Final = b"intentusnet log leaf v1\n"
DELETION_PREFIX: Final = b"intentusnet log deletion v1\n"
#: The key line of a record closed without a signing key.
UNSIGNED: Final = "unsigned"

_ID: Final = re.compile(ID_PART_PATTERN)
_HEAD: Final = re.compile(r"sha256:[0-9a-f]{64}")
_KEY: Final = re.compile(r"ed25519:[0-9a-f]{16}")


class LogLeaf(NamedTuple):
    """What one leaf says. Added in 0.1.0.

    Attributes:
        execution_id: the closed record.
        chain_head: its last line's hash, ``sha256:`` and 64 hex digits.
        key_id: the key that signed it, or None for an unsigned record.
        deleted: a deletion leaf: the record was deleted by the key's holder,
            at ``chain_head``; ``key_id`` is the deleting key.
    """

    execution_id: str
    chain_head: str
    key_id: str | None
    deleted: bool = False

    @property
    def indexed_head(self) -> str:
        """The chain head as leaf indexes key it (a deletion's kept apart)."""
        return f"deleted:{self.chain_head}" if self.deleted else self.chain_head

    def to_bytes(self) -> bytes:
        """The leaf's canonical bytes (checked: a bad field raises).

        Raises:
            LogIntegrityError: a field is not of its form.
        """
        _check(self)
        key = UNSIGNED if self.key_id is None else self.key_id
        prefix = DELETION_PREFIX if self.deleted else LEAF_PREFIX
        return prefix + f"{self.execution_id}\n{self.chain_head}\n{key}\n".encode()

    @classmethod
    def from_bytes(cls, data: bytes) -> LogLeaf:
        """Read a leaf's bytes; exactly the bytes :meth:`to_bytes` makes.

        Raises:
            LogIntegrityError: not a version 1 leaf, or a field not of its form.
        """
        deleted = data.startswith(DELETION_PREFIX)
        if not deleted and not data.startswith(LEAF_PREFIX):
            raise LogIntegrityError("not an intentusnet log leaf (version 1)")
        prefix = DELETION_PREFIX if deleted else LEAF_PREFIX
        try:
            text = data[len(prefix) :].decode("ascii")
        except UnicodeDecodeError:
            raise LogIntegrityError("a log leaf holds non-ASCII bytes") from None
        lines = text.split("\n")
        if len(lines) != 4 or lines[3] != "":
            raise LogIntegrityError(
                "a log leaf has four lines, each ending in a newline"
            )
        execution_id, head, key = lines[:3]
        leaf = cls(execution_id, head, None if key == UNSIGNED else key, deleted)
        _check(leaf)
        return leaf


def _check(leaf: LogLeaf) -> None:
    if _ID.fullmatch(leaf.execution_id) is None or leaf.execution_id[0] == ".":
        raise LogIntegrityError(
            f"invalid execution id in a log leaf: {leaf.execution_id[:40]!r}"
        )
    if _HEAD.fullmatch(leaf.chain_head) is None:
        raise LogIntegrityError(
            f"invalid chain head in a log leaf: {leaf.chain_head[:80]!r}"
        )
    if leaf.key_id is not None and _KEY.fullmatch(leaf.key_id) is None:
        raise LogIntegrityError(f"invalid key id in a log leaf: {leaf.key_id[:40]!r}")
