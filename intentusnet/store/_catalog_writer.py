"""Writing catalog rows: opened records at once, completed ones in batches.

A record's row is written when it opens, so that it is listed from its first
line on, even if its process is then killed. The update of a completed record
is written behind, in batches of at most :data:`BATCH_ROWS` rows or
:data:`BATCH_SECONDS` old (checked on the next write), and always before this
process reads the catalog, closes the store or exits: about one SQLite commit
per execution instead of two.
"""

from __future__ import annotations

import atexit
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Final

from . import _log
from .catalog import Catalog, CatalogRow

#: Rows of completed records are written in batches of at most this many ...
BATCH_ROWS: Final = 128
#: ... or once the oldest queued row is this old.
BATCH_SECONDS: Final = 0.02
_WRITERS: weakref.WeakSet[CatalogWriter] = weakref.WeakSet()


class CatalogWriter:
    """Writes one store's catalog rows; a failure is logged, never raised.

    The catalog is derived data: failing to update it must not fail the
    recording. The record files are intact and ``reindex()`` repairs the rows.
    """

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._pending: dict[str, CatalogRow] = {}
        self._pending_since = 0.0
        self._lock = threading.Lock()
        _WRITERS.add(self)

    def opened(self, row: CatalogRow) -> None:
        """Make a just-opened record visible now (one small commit)."""
        if self._pending and time.monotonic() - self._pending_since > BATCH_SECONDS:
            self.flush()
        try:
            self.catalog.add_live(row)
        except (sqlite3.Error, OSError) as exc:
            _log.warning(
                "catalog could not list %s (%s); the record file is intact, "
                "run `intentusnet reindex` to repair the catalog",
                row.id,
                exc,
            )

    def write(self, row: CatalogRow) -> None:
        """Upsert a row now (with any rows written behind that are due)."""
        if self._pending:
            with self._lock:
                self._pending.pop(row.id, None)  # this row is newer
        if self._pending and time.monotonic() - self._pending_since > BATCH_SECONDS:
            self.write_later(row)
            self.flush()
            return
        self._upsert([row])

    def write_later(self, row: CatalogRow) -> None:
        """Queue a row; it is written with the next batch."""
        with self._lock:
            if not self._pending:
                self._pending_since = time.monotonic()
            self._pending[row.id] = row
            due = len(self._pending) >= BATCH_ROWS
        if due:
            self.flush()

    def flush(self) -> None:
        """Write every queued row now, in one transaction."""
        with self._lock:
            rows, self._pending = list(self._pending.values()), {}
        if rows:
            self._upsert(rows)

    def _upsert(self, rows: list[CatalogRow]) -> None:
        # The catalog is derived data: failing to update it must not fail the
        # recording. The record files are intact and reindex() repairs the rows.
        try:
            self.catalog.upsert_many(rows)
        except (sqlite3.Error, OSError) as exc:
            _log.warning(
                "catalog update for %s failed (%s); the record file is intact, "
                "run `intentusnet reindex` to repair the catalog",
                ", ".join(row.id for row in rows[:3])
                + (" ..." if len(rows) > 3 else ""),
                exc,
            )

    def forget(self, ids: Sequence[str]) -> None:
        """Drop rows of deleted records (logged on failure)."""
        with self._lock:
            for execution_id in ids:
                self._pending.pop(execution_id, None)
        try:
            self.catalog.remove(ids)
        except (sqlite3.Error, OSError) as exc:
            _log.warning("catalog could not forget %s (%s)", ", ".join(ids), exc)


@atexit.register
def _flush_all() -> None:
    for writer in list(_WRITERS):
        writer.flush()


def _after_fork() -> None:
    # A lock held by another thread at fork time would stay held in the child.
    for writer in list(_WRITERS):
        writer._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
