"""The store's use of its catalog: queries, corrections and rebuilds.

The catalog may lag behind the files (another process invalidated a record, a
catalog update failed) or be missing altogether. Every answer that matters is
checked against the file before it is returned, a stale row is corrected when
seen, and a catalog not known to be complete is rebuilt before it is queried.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Final, TypeVar

import orjson

from .._util.time import micros_of, parse_utc
from ..errors import RecordIntegrityError, RecordNotFound, StoreError
from ..errors import UnsupportedSchemaVersion as UnsupportedSchemaVersion
from ..record.model import (
    ExecutionHeader,
    ExecutionRecord,
    RecordStatus,
    RecordSummary,
    ReplayableReason,
    StoreStats,
)
from ..record.reader import parse_record
from ..record.verify import salvage_header
from . import _log
from ._catalog_writer import CatalogWriter
from ._layout import has_records, relative_path, walk_ids
from ._owner import owner_alive
from .catalog import Catalog, CatalogRow

_T = TypeVar("_T")
_FIND_LIMIT: Final = 64
_STATUSES: Final = {s.value: s for s in RecordStatus}
_REASONS: Final = {r.value: r for r in ReplayableReason}
_STORED: Final = {
    RecordStatus.COMPLETED: ("completed",),
    RecordStatus.FAILED: ("failed",),
    RecordStatus.IN_PROGRESS: ("in_progress",),
    RecordStatus.INCOMPLETE: ("in_progress", "incomplete"),
}


def row_for(header: ExecutionHeader, lines: int, size: int) -> CatalogRow:
    """Return the catalog row describing a record as read from its file."""
    reason = header.replayable_reason
    return CatalogRow(
        header.execution_id,
        parse_utc(header.created_utc) or 0,
        header.created_utc,
        header.intent_name,
        header.intent_version,
        header.envelope_hash,
        header.status.value,
        int(header.replayable),
        None if reason is None else reason.value,
        header.agent,
        header.duration_ms,
        header.parent_execution_id,
        None if header.owner is None else orjson.dumps(header.owner).decode(),
        lines,
        size,
        header.chain_head,
    )


class StoreIndex:
    """Answers store queries from the catalog, checked against the files.

    Rows are written through :attr:`writes` (see ``CatalogWriter``): a record
    whose completion is not in the catalog yet lists as unfinished until a
    reader notices its writer is gone and reads the file, correcting the row.
    """

    def __init__(
        self,
        catalog: Catalog,
        root: str,
        read: Callable[[str], bytes],
        load: Callable[[str], ExecutionRecord],
    ) -> None:
        self.catalog = catalog
        self._root = root
        self._read = read
        self._load = load
        self.writes = CatalogWriter(catalog, root)

    def refresh(self, execution_id: str) -> CatalogRow | None:
        """Re-read one record's file into its catalog row; return the row."""
        row = self._row_from_file(execution_id)
        if row is not None:
            self.writes.write(row)
        return row

    # -- queries ------------------------------------------------------------------

    def summaries(
        self,
        *,
        intent: str | None,
        status: RecordStatus | None,
        since: datetime | None,
        limit: int | None,
    ) -> list[RecordSummary]:
        """Rows matching the filters as summaries, newest first."""
        probe = status in (RecordStatus.IN_PROGRESS, RecordStatus.INCOMPLETE)
        since_us = None if since is None else micros_of(since)
        rows = self._ask(
            lambda cat: cat.query(
                intent=intent,
                statuses=_STORED[status] if status is not None else (),
                since_us=since_us,
                limit=None if probe else limit,
            )
        )
        if status is None or probe:
            opened = self._ask(
                lambda cat: cat.query(intent=intent, since_us=since_us, live=True)
            )
            if opened:
                rows = sorted(
                    [*rows, *opened], key=lambda r: (r.created_us, r.id), reverse=True
                )
        found: list[RecordSummary] = []
        for row in rows:
            summary = self._summary(row)
            if status is None or summary.status is status:
                found.append(summary)
                if limit is not None and len(found) >= limit:
                    break
        return found

    def find(self, envelope_hash: str, replayable_only: bool) -> ExecutionRecord | None:
        """The newest record with this hash, checked against its file.

        Opened records come last: one whose completion another process has not
        written to the catalog yet is found among them.
        """
        found = self._ask(
            lambda cat: cat.ids_by_hash(
                envelope_hash, replayable_only=replayable_only, limit=_FIND_LIMIT
            )
        )
        for execution_id, live in found:
            try:
                record = self._load(execution_id)
            except RecordNotFound:
                self.writes.forget([execution_id])
                continue
            except RecordIntegrityError:
                self.refresh(execution_id)
                continue
            header = record.header
            if live and header.status is RecordStatus.IN_PROGRESS:
                if replayable_only:
                    continue  # still being written: nothing to correct
                return record
            unwanted = replayable_only and not header.replayable
            if live or unwanted:
                self.refresh(execution_id)  # the row was stale: correct it
            if not unwanted:
                return record
        return None

    def stats(self, extra_bytes: int) -> StoreStats:
        """Counts over the store; unfinished records are probed for their owner."""
        # Settle first: rows of writers that are gone are re-read from their
        # files (and so leave "in_progress"); what remains is being written.
        unsettled = self._ask(lambda cat: cat.query(live=True))
        unsettled += self._ask(lambda cat: cat.query(statuses=("in_progress",)))
        for row in unsettled:
            self._summary(row)
        statuses, intents, size = self._ask(lambda cat: cat.counts())
        for row in self._ask(lambda cat: cat.query(live=True)):
            statuses["in_progress"] = statuses.get("in_progress", 0) + 1
            intents[row.intent] = intents.get(row.intent, 0) + 1
            size += row.size
        return StoreStats(
            records=sum(statuses.values()),
            by_status=statuses,
            by_intent=intents,
            bytes_on_disk=size + extra_bytes,
        )

    def older_than(self, cutoff: datetime) -> list[str]:
        """Ids created before ``cutoff``, except records still being written."""
        before = micros_of(cutoff)
        rows = self._ask(lambda cat: cat.query(before_us=before))
        rows += self._ask(lambda cat: cat.query(before_us=before, live=True))
        return [
            row.id
            for row in rows
            if not (row.status == "in_progress" and self._alive(row))
        ]

    def row(self, execution_id: str) -> CatalogRow | None:
        """The catalog's row for one record, or None (also if no catalog)."""
        try:
            self.writes.flush()
            return self.catalog.get(execution_id) if self._exists() else None
        except sqlite3.Error:
            return None

    # -- rebuilding ---------------------------------------------------------------

    def rebuild(self, ids: Iterable[str]) -> int:
        """Rebuild the catalog from the record files; return rows indexed."""
        self.writes.flush()
        rows = [row for row in map(self._row_from_file, ids) if row is not None]
        try:
            self.catalog.rebuild(
                rows, lambda i: os.path.exists(f"{self._root}/{relative_path(i)}")
            )
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"could not rebuild the catalog: {exc}") from exc
        return len(rows)

    def _row_from_file(self, execution_id: str) -> CatalogRow | None:
        try:
            data = self._read(execution_id)
        except RecordNotFound:
            return None
        lines = data.count(b"\n")
        try:
            return row_for(self._load_bytes(execution_id, data), lines, len(data))
        except UnsupportedSchemaVersion as exc:
            _log.warning("not indexed: %s", exc)
            return None
        except RecordIntegrityError as exc:
            header = salvage_header(data, execution_id)
            if header is None:
                _log.warning("not indexed, unreadable: %s", exc)
                return None
            return row_for(header, lines, len(data))

    def _load_bytes(self, execution_id: str, data: bytes) -> ExecutionHeader:
        path = f"{self._root}/{relative_path(execution_id)}"
        record = parse_record(
            data, execution_id, lambda owner: owner_alive(path, owner)
        )
        # A record's events are parsed when first read; a row is only written
        # for a record whose every line is sound (else integrity_failure).
        _ = record.events
        return record.header

    # -- helpers ------------------------------------------------------------------

    def _exists(self) -> bool:
        return self.catalog.path.exists()

    def _ask(self, question: Callable[[Catalog], _T]) -> _T:
        """Run a query on a complete catalog, rebuilding it first if needed."""
        try:
            self.writes.settle()
            if not self.catalog.is_complete():
                if has_records(self._root):
                    _log.warning(
                        "catalog %s is new or was lost; rebuilding it from the "
                        "record files",
                        self.catalog.path,
                    )
                    self.rebuild(walk_ids(self._root))
                else:
                    self.catalog.mark_complete()
            return question(self.catalog)
        except (sqlite3.Error, OSError) as exc:
            if isinstance(exc, StoreError):
                raise
            raise StoreError(
                f"catalog {self.catalog.path} failed: {exc}. The record files are "
                "intact; `intentusnet reindex` rebuilds the catalog."
            ) from exc

    def _alive(self, row: CatalogRow) -> bool:
        owner = orjson.loads(row.owner) if row.owner else None
        return owner_alive(f"{self._root}/{relative_path(row.id)}", owner)

    def _summary(self, row: CatalogRow) -> RecordSummary:
        status = row.status
        if status == "in_progress" and not self._alive(row):
            # Its writer is gone: the record is incomplete, or it completed and
            # the row was not updated yet (written behind by another process, or
            # lost when that process was killed). The file knows.
            row = self.refresh(row.id) or row
            status = "incomplete" if row.status == "in_progress" else row.status
        return RecordSummary(
            row.id,
            row.created_utc,
            row.intent,
            row.intent_version,
            row.envelope_hash,
            _STATUSES[status],
            bool(row.replayable),
            _REASONS[row.reason] if row.reason else None,
            row.agent,
            row.duration_ms,
        )
