"""Writing catalog rows: at once when a record opens, in batches when it completes.

A record's row is committed to the catalog's small ``live`` table when the
record opens, *before* its file is created: a record is listed from the moment
its header exists, even if its process is killed right after. A row without a
file (the process was killed in between) is never listed, and is dropped by the
next reader that sees its owner gone.

Completing a record moves its row to the indexed table. Those rows are written
in batches: at most :data:`BATCH_ROWS` rows or :data:`BATCH_SECONDS` old
(checked on the next write), and always before this process reads the catalog,
closes the store or exits. Until then the record lists as unfinished, and a
reader that finds its writer's lock free reads the file, which says the truth.
So recording costs one small commit and a share of one batched commit per
execution.
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
        #: rows of completed (or re-read) records, newest per id
        self._pending: dict[str, CatalogRow] = {}
        self._since = 0.0  # when the oldest of them was queued
        self._lock = threading.Lock()
        _WRITERS.add(self)

    def opened(self, row: CatalogRow) -> None:
        """List a record that is about to be created (one small commit)."""
        try:
            self.catalog.add_live(row)
        except (sqlite3.Error, OSError) as exc:
            _log.warning(
                "catalog could not list %s (%s); the record file is intact, "
                "run `intentusnet reindex` to repair the catalog",
                row.id,
                exc,
            )

    def not_opened(self, row: CatalogRow) -> None:
        """Take back :meth:`opened`: the record's file could not be made."""
        try:
            self.catalog.drop_live(row)
        except (sqlite3.Error, OSError) as exc:
            _log.warning("catalog could not forget %s (%s)", row.id, exc)

    def write(self, row: CatalogRow) -> None:
        """Upsert a row now (with the rows queued so far)."""
        with self._lock:
            self._queued()
            self._pending[row.id] = row
        self.flush()

    def write_later(self, row: CatalogRow) -> None:
        """Queue a row; it is written with the next batch."""
        with self._lock:
            self._queued()
            self._pending[row.id] = row
            due = (
                len(self._pending) >= BATCH_ROWS
                or time.monotonic() - self._since > BATCH_SECONDS
            )
        if due:
            self.flush()

    def flush(self) -> None:
        """Write every queued row now, in one transaction."""
        with self._lock:
            done, self._pending = self._pending, {}
            if not done:
                return
            try:
                self.catalog.upsert_many(list(done.values()))
            except (sqlite3.Error, OSError) as exc:
                # The files are intact: readers re-read a record whose row says
                # it is unfinished once its writer's lock is free.
                _log.warning(
                    "catalog update for %s failed (%s); the record files are "
                    "intact, run `intentusnet reindex` to repair the catalog",
                    ", ".join(list(done)[:3]) + (" ..." if len(done) > 3 else ""),
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

    def _queued(self) -> None:
        if not self._pending:
            self._since = time.monotonic()

    def _after_fork(self) -> None:
        # A lock held by another thread at fork time would stay held in the
        # child; the parent's queued rows are the parent's to write.
        self._lock = threading.Lock()
        self._pending = {}


@atexit.register
def _flush_all() -> None:
    for writer in list(_WRITERS):
        writer.flush()


def _after_fork() -> None:
    for writer in list(_WRITERS):
        writer._after_fork()


os.register_at_fork(after_in_child=_after_fork)
