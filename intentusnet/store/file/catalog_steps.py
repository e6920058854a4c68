"""The file store's step index: the ``steps`` table of its SQLite catalog.

One row per ended step of a catalogued record (``store.step_index``), written
in the same transaction as the record's row and dropped with it. Its primary
key is the lookup, newest record first, so a lookup reads its answer from the
key alone. Like every catalog row, each carries a checksum of its values,
checked when read (a damaged catalog is rebuilt, never answered from).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Final

from ..step_index import StepRef, StepRow
from .catalog_seal import DamagedRow, row_seal

if TYPE_CHECKING:
    import sqlite3

#: The table and its index of ids (for deleting a record's rows).
DDL: Final = (
    "CREATE TABLE IF NOT EXISTS steps (envelope_hash TEXT NOT NULL, "
    "name TEXT NOT NULL, args_hash TEXT NOT NULL, created_us INTEGER NOT NULL, "
    "id TEXT NOT NULL, step INTEGER NOT NULL, seal INTEGER NOT NULL, "
    "PRIMARY KEY (envelope_hash, name, args_hash, created_us DESC, id DESC, step)) "
    "WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS steps_by_id ON steps (id)",
)
_ADD: Final = "INSERT OR IGNORE INTO steps VALUES (?, ?, ?, ?, ?, ?, ?)"
_DROP: Final = "DELETE FROM steps WHERE id = ?"
_FIND: Final = (
    "SELECT envelope_hash, name, args_hash, created_us, id, step, seal FROM steps "
    "WHERE envelope_hash = ? AND name = ?"
)
_ORDER: Final = " ORDER BY created_us DESC, id DESC, step"


def add(db: sqlite3.Connection, rows: Sequence[StepRow]) -> None:
    """Add rows (a row there already is left as it is: records only grow)."""
    db.executemany(_ADD, [(*row, row_seal(row)) for row in rows])


def drop(db: sqlite3.Connection, ids: Sequence[str]) -> None:
    """Drop every row of these records."""
    db.executemany(_DROP, [(i,) for i in ids])


def find(
    db: sqlite3.Connection,
    envelope_hash: str,
    name: str,
    args_hash: str | None,
    limit: int | None,
) -> list[StepRef]:
    """The rows of a lookup (see ``StepIndex.find_steps``), each checked.

    Raises:
        DamagedRow: a row does not match its checksum.
    """
    sql, params = _FIND, [envelope_hash, name]
    more: list[object] = []
    if args_hash is not None:
        sql += " AND args_hash = ?"
        params.append(args_hash)
    sql += _ORDER
    if limit is not None:
        sql += " LIMIT ?"
        more.append(limit)
    found = []
    for *values, seal in db.execute(sql, [*params, *more]):
        row: StepRow = (*values,)
        if row_seal(row) != seal:
            raise DamagedRow(f"a step row does not match its checksum ({row[4]!r})")
        found.append(StepRef(row[4], row[5]))
    return found
