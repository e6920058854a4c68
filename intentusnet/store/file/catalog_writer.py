"""Writing catalog rows behind, in batches, without hiding any record.

This is the store's one mechanism for keeping the catalog cheap to write. A
record's row is committed with its batch: at most :data:`BATCH_ROWS` rows or
:data:`BATCH_SECONDS` old (checked on the next write), and always before this
process reads the catalog, closes the store or exits. A record is listed from
its first byte on all the same, even if its process is then killed: *before*
its file is created, its row is a line of this process's log of opened records
(see ``opened``), which every query copies into the catalog (or, where this
process may not write the catalog, keeps in memory: see :attr:`unsaved`). Readers skip a
row whose file does not exist (yet), and drop it once its process is gone. So
recording costs one ``write()`` and a share of one SQLite commit per execution,
where committing each opened record's row would cost a commit each (about 30
us on the development VM, a third more for a routed and recorded execution).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Final

from .. import logger
from ..rows import CatalogRow
from ..step_index import StepKey, step_rows
from .catalog import Catalog
from .opened import OpenedLog, OtherLogs

#: Rows are written in batches of at most this many ...
BATCH_ROWS: Final = 128
#: ... or once the oldest queued row is this old.
BATCH_SECONDS: Final = 0.02
_WRITERS: weakref.WeakSet[CatalogWriter] = weakref.WeakSet()


class CatalogWriter:
    """Writes one store's catalog rows; a failure is logged, never raised.

    The catalog is derived data: failing to update it must not fail the
    recording. The record files are intact and ``reindex()`` repairs the rows.
    ``logs`` is the directory of the logs of opened records: the store's root,
    or its ``catalog_dir``.
    """

    def __init__(self, catalog: Catalog, logs: str) -> None:
        self.catalog = catalog
        #: rows of completed (or re-read) records, newest per id
        self._pending: dict[str, CatalogRow] = {}
        #: the ended steps of those records, for the step index
        self._steps: dict[str, list[StepKey]] = {}
        #: rows of opened records that are in the log but not in the catalog yet
        self._opened: dict[str, CatalogRow] = {}
        self._since = 0.0  # when the oldest of them was queued
        self._log = OpenedLog(logs)
        self._others = OtherLogs(logs)
        self._lock = threading.Lock()
        #: rows of other processes' logs, by id, where this process may not
        #: write the catalog (a read-only store): answered from, never written
        self.unsaved: dict[str, CatalogRow] = {}
        _WRITERS.add(self)

    def opened(self, row: CatalogRow) -> None:
        """List a record about to be created (one line of this process's log)."""
        # A batch that is due goes before this row joins it: the row of a record
        # still being written would go to the table of live records, to be
        # deleted from it again by the next batch. (Read without the lock: a
        # stale answer only moves a batch by one row.)
        if self._due():
            self.flush()
        with self._lock:
            try:
                self._log.append(row)
            except OSError:
                logged = False
            else:
                logged = True
                self._queued()
                self._opened[row.id] = row
        if not logged:
            self._add_live(row)  # no log here: one small commit instead

    def not_opened(self, row: CatalogRow) -> None:
        """Take back :meth:`opened`: the record's file could not be made.

        A copy of the row that other readers took from the log is never listed
        (it has no file), and is dropped once this process is gone.
        """
        with self._lock:
            self._opened.pop(row.id, None)

    def write(self, row: CatalogRow, steps: list[StepKey] | None = None) -> None:
        """Upsert a row now (with the rows queued so far), and its ended steps."""
        self._queue(row, steps)
        self.flush()

    def write_later(self, row: CatalogRow, steps: list[StepKey] | None = None) -> None:
        """Queue a row and its ended steps; they are written with the next batch."""
        if self._queue(row, steps):
            self.flush()

    def flush(self) -> None:
        """Write every queued row now, in one transaction."""
        self._commit(keep_log=True)

    def close(self) -> None:
        """Write every queued row and delete this process's log."""
        self._commit(keep_log=False)

    def settle(self) -> None:
        """Before a query: flush, and copy other processes' logged rows in.

        Raises:
            sqlite3.Error, OSError: the catalog could not be written.
        """
        self.flush()
        # Rows of records whose file is not there (yet) are copied too: the
        # file may come a moment later, and readers skip them until it does.
        rows, dead = self._others.collect(self._log.name)
        if self.catalog.read_only:
            self.unsaved.update((row.id, row) for row in rows)
            return
        if rows:
            self.catalog.upsert_many((), opened=rows)
        for path in dead:  # their rows are committed now
            with contextlib.suppress(OSError):
                os.unlink(path)

    def forget(self, ids: Sequence[str]) -> None:
        """Drop rows of deleted records (logged on failure)."""
        with self._lock:
            for execution_id in ids:
                self._pending.pop(execution_id, None)
                self._steps.pop(execution_id, None)
                self._opened.pop(execution_id, None)
                self.unsaved.pop(execution_id, None)
        if self.catalog.read_only:
            return  # readers skip such rows all the same
        try:
            self.catalog.remove(ids)
        except (sqlite3.Error, OSError) as exc:
            logger.warning("catalog could not forget %s (%s)", ", ".join(ids), exc)

    # -- internals -----------------------------------------------------------------

    def _queue(self, row: CatalogRow, steps: list[StepKey] | None) -> bool:
        """Queue a row and its ended steps; whether a batch is due now."""
        with self._lock:
            self._queued()
            self._pending[row.id] = row
            if steps:
                self._steps[row.id] = steps
            return self._due()

    def _queued(self) -> None:
        if not self._pending and not self._opened:
            self._since = time.monotonic()

    def _due(self) -> bool:
        return (
            len(self._pending) >= BATCH_ROWS
            or len(self._opened) >= BATCH_ROWS
            or time.monotonic() - self._since > BATCH_SECONDS
        ) and bool(self._pending or self._opened)

    def _commit(self, *, keep_log: bool) -> None:
        # Under the lock throughout: a row logged while the batch commits must
        # not go with the log that is deleted after it.
        with self._lock:
            done, opened, ended = self._pending, self._opened, self._steps
            self._steps = {}
            if done and not opened and self.catalog.read_only:
                # Rows a reader corrected: answered from, not written.
                self._pending = {}
                return
            if done or opened:
                still_open = [row for i, row in opened.items() if i not in done]
                steps = [
                    step
                    for i, keys in ended.items()
                    for step in step_rows(
                        done[i].envelope_hash, done[i].created_us, i, keys
                    )
                ]
                try:
                    self.catalog.upsert_many(
                        list(done.values()), opened=still_open, steps=steps
                    )
                except (sqlite3.Error, OSError) as exc:
                    self._pending = {}  # the files are intact; the log stays
                    _warn_failed(list(done.values()) or still_open, exc)
                    if not keep_log:
                        self._log.release()  # readers will copy its rows
                    return
                self._pending, self._opened = {}, {}
            if keep_log:
                self._log.renew()
            else:
                self._log.remove()

    def _add_live(self, row: CatalogRow) -> None:
        try:
            self.catalog.add_live(row)
        except (sqlite3.Error, OSError) as exc:
            logger.warning(
                "catalog could not list %s (%s); the record file is intact, "
                "run `intentusnet reindex` to repair the catalog",
                row.id,
                exc,
            )

    def _after_fork(self) -> None:
        # A lock held by another thread at fork time would stay held in the
        # child; the parent's log and its rows are the parent's to commit.
        self._lock = threading.Lock()
        self._log.release()
        self._opened = {}


def _warn_failed(rows: list[CatalogRow], exc: BaseException) -> None:
    logger.warning(
        "catalog update for %s failed (%s); the record file is intact, "
        "run `intentusnet reindex` to repair the catalog",
        ", ".join(row.id for row in rows[:3]) + (" ..." if len(rows) > 3 else ""),
        exc,
    )


@atexit.register
def _flush_all() -> None:
    for writer in list(_WRITERS):
        writer.close()


def _after_fork() -> None:
    for writer in list(_WRITERS):
        writer._after_fork()


os.register_at_fork(after_in_child=_after_fork)
