"""LeafIndex: which leaves a log holds for each execution id (a derived cache).

A SQLite file beside the tiles (``<log>/.index.sqlite3``): one row per leaf,
its index, execution id and chain head. It is read from the entry bundles and
may be deleted at any time; it is rebuilt from them. It answers the two
questions the tiles answer only by reading every bundle: "is this record, at
this chain head, a leaf already?" (so that a record is never a leaf twice,
whoever appends it) and "which leaf is this record's newest?" (``log prove``).
It is never evidence: ``log verify`` reads the bundles themselves.

It also keeps the time the last *pending scan* started (see
``sequencer.LogSequencer``): every record closed before it is in the log.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Final, Protocol

from ..errors import LogError
from .leaf import LogLeaf
from .log import TileLog

__all__ = ["INDEX_NAME", "LeafIndex", "LeafLookup"]

INDEX_NAME: Final = ".index.sqlite3"
_SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS leaves (
    leaf INTEGER PRIMARY KEY,
    execution_id TEXT NOT NULL,
    chain_head TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS leaves_by_id ON leaves (execution_id, chain_head);
CREATE TABLE IF NOT EXISTS state (
    one INTEGER PRIMARY KEY CHECK (one = 1),
    size INTEGER NOT NULL,
    scanned REAL NOT NULL
);
INSERT OR IGNORE INTO state VALUES (1, 0, 0);
"""


class LeafLookup(Protocol):
    """Which leaves a log holds per execution id: what a sequencer asks.

    :class:`LeafIndex` (a SQLite file beside the tiles) is the file store's;
    the PostgreSQL store keeps the same in a table.
    """

    def catch_up(self, size: int | None = None) -> int:
        """Index the leaves up to ``size`` (default: the log's); the size indexed."""
        ...

    def add(self, start: int, leaves: Sequence[LogLeaf]) -> None:
        """Index ``leaves``, just appended at ``start``."""
        ...

    def holds(self, execution_id: str, chain_head: str) -> bool:
        """Whether some leaf is this record at this chain head."""
        ...

    def newest(self, execution_id: str) -> int | None:
        """The index of the record's newest leaf, or None."""
        ...

    def scanned(self) -> float:
        """When the last pending scan that finished started (0: never)."""
        ...

    def mark_scanned(self, started: float) -> None:
        """Note that a pending scan started at ``started`` finished."""
        ...

    def close(self) -> None:
        """Let go of what it holds open."""
        ...


class LeafIndex:
    """Execution id -> leaves of one ``TileLog``, kept in step with its bundles.

    Used by one thread at a time (the sequencer sees to it).
    """

    def __init__(self, log: TileLog) -> None:
        self.log: Final = log
        self.path: Final = Path(log.path) / INDEX_NAME
        self._db: sqlite3.Connection | None = None

    def close(self) -> None:
        """Close the connection (it reopens when needed)."""
        db, self._db = self._db, None
        if db is not None:
            db.close()

    def catch_up(self, size: int | None = None) -> int:
        """Index the leaves up to ``size`` (default: the log's); the size indexed.

        An index holding more leaves than the log (the log was replaced by an
        earlier copy) is rebuilt from the first leaf.
        """
        size = self.log.size if size is None else size
        with self._transaction() as db:
            (done,) = db.execute("SELECT size FROM state").fetchone()
            if done > size:
                db.execute("DELETE FROM leaves")
                done = 0
            if done == size:
                return size
            leaves = [LogLeaf.from_bytes(d) for d in self.log.leaves(done, size)]
            _put(db, done, leaves)
        return size

    def add(self, start: int, leaves: Sequence[LogLeaf]) -> None:
        """Index ``leaves``, just appended at ``start``, without reading them back.

        An index not at ``start`` (another process appended meanwhile, or it
        was behind) catches up from the bundles instead.
        """
        with self._transaction() as db:
            (done,) = db.execute("SELECT size FROM state").fetchone()
            if done == start:
                _put(db, start, leaves)
                return
        self.catch_up(start + len(leaves))

    def holds(self, execution_id: str, chain_head: str) -> bool:
        """Whether some leaf is this record at this chain head."""
        row = self._connect().execute(
            "SELECT 1 FROM leaves WHERE execution_id = ? AND chain_head = ?",
            (execution_id, chain_head),
        )
        return row.fetchone() is not None

    def newest(self, execution_id: str) -> int | None:
        """The index of the record's newest leaf, or None."""
        rows = self._connect().execute(
            "SELECT max(leaf) FROM leaves WHERE execution_id = ?", (execution_id,)
        )
        (found,) = rows.fetchone()
        return None if found is None else int(found)

    def scanned(self) -> float:
        """When the last pending scan that finished started (0: never)."""
        (when,) = self._connect().execute("SELECT scanned FROM state").fetchone()
        return float(when)

    def mark_scanned(self, started: float) -> None:
        """Note that a pending scan started at ``started`` finished."""
        with self._transaction() as db:
            db.execute("UPDATE state SET scanned = max(scanned, ?)", (started,))

    def _connect(self) -> sqlite3.Connection:
        if self._db is None:
            try:
                os.makedirs(self.path.parent, mode=0o700, exist_ok=True)
                db = sqlite3.connect(
                    self.path, timeout=30, isolation_level=None, check_same_thread=False
                )
                # A cache rebuilt from the bundles: no flush to disk per commit.
                db.execute("PRAGMA journal_mode=WAL")
                db.execute("PRAGMA synchronous=NORMAL")
                db.executescript(_SCHEMA)
            except (sqlite3.Error, OSError) as exc:
                raise LogError(
                    f"cannot open the log's index {self.path}: {exc}"
                ) from exc
            self._db = db
        return self._db

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            try:
                yield db
            except BaseException:
                db.execute("ROLLBACK")
                raise
            db.execute("COMMIT")
        except sqlite3.Error as exc:
            raise LogError(f"the log's index {self.path}: {exc}") from exc


def _put(db: sqlite3.Connection, start: int, leaves: Sequence[LogLeaf]) -> None:
    """Index ``leaves``, the log's from ``start`` on, and the size they end at."""
    db.executemany(
        "INSERT OR REPLACE INTO leaves VALUES (?, ?, ?)",
        [
            (at, leaf.execution_id, leaf.indexed_head)
            for at, leaf in enumerate(leaves, start)
        ],
    )
    db.execute("UPDATE state SET size = ?", (start + len(leaves),))
