"""The store's use of its catalog: queries, corrections and rebuilds.

The catalog may lag behind the files (another process invalidated a record, a
catalog update failed) or be missing altogether. Every answer that matters is
checked against the file before it is returned, a stale row is corrected when
seen, and a catalog not known to be complete is rebuilt before it is queried.
A catalog found damaged (see ``catalog``: checksums, order, counts) is moved
aside, rebuilt and asked again.

A process that may not write the store (a read-only mount, or permissions)
never writes the catalog: it answers from the catalog as it is, correcting in
memory what the files say, and where the catalog cannot be used (missing,
damaged, of an older layout, incomplete) from a private catalog built from the
record files for this process alone, saying so once.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import tempfile
import weakref
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Final, TypeVar

from ..._util.time import micros_of
from ...errors import RecordIntegrityError, RecordNotFound, StoreError
from ...errors import UnsupportedSchemaVersion as UnsupportedSchemaVersion
from ...record.model import (
    ExecutionRecord,
    RecordStatus,
    RecordSummary,
    ReplayableReason,
    StoreStats,
)
from .. import logger
from ..filters import ListFilters
from ..owner import opener_alive, owner_alive
from ..rows import CatalogRow, catalog_mismatch, report_changed
from ..step_index import StepRef
from ..usage import UsageTotal
from ..verification import Progress
from . import files
from .catalog import Catalog
from .catalog_writer import CatalogWriter
from .layout import CATALOG_NAME, has_records, relative_path
from .scan import file_row, index_chunk, over_shards
from .sqlite import DatabaseCorrupt, DatabaseReadOnly

_T = TypeVar("_T")
_FIND_LIMIT: Final = 64
_STATUSES: Final = {s.value: s for s in RecordStatus}
_REASONS: Final = {r.value: r for r in ReplayableReason}
_IN_PROGRESS: Final = RecordStatus.IN_PROGRESS.value
_FAILED: Final = RecordStatus.RECORDING_FAILURE.value
_INTEGRITY_FAILURE: Final = ReplayableReason.INTEGRITY_FAILURE.value


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
        load: Callable[[str], ExecutionRecord],
        derived: str,
    ) -> None:
        self.catalog = catalog
        self._root = root
        #: the directory of the logs of opened records (the store's catalog_dir)
        self._derived = derived
        self._load = load
        self.writes = CatalogWriter(catalog, self._derived)
        #: the store's own catalog is not used (see :meth:`_answer_from_files`)
        self.private = False

    def refresh(
        self, execution_id: str, known: CatalogRow | None = None
    ) -> CatalogRow | None:
        """Re-read one record's file into its catalog row; return the row.

        ``known`` is the row the catalog has, if the caller has read it.
        """
        found = file_row(
            self._root,
            execution_id,
            (lambda _id: known) if known is not None else self.catalog.get,
        )
        row = None if found is None else found[0]
        if found is not None and row is not known:
            self.writes.write(*found)
        return row

    # -- queries ------------------------------------------------------------------

    def summaries(self, filters: ListFilters) -> list[RecordSummary]:
        """Rows matching the filters as summaries, newest first.

        Each question is its own snapshot, so they are asked in the order rows
        move in, which keeps every record listed while writers move it: the
        opened rows first (a row leaves them only for the catalog's rows),
        then unfinished rows (a row leaves them only for a final status), then
        the rows asked for. A row seen twice is kept as last read.

        Status and replayability are asked of the catalog, then checked again
        on each row as its file says (an unfinished row may turn out to be in
        any state once probed: such rows are few, and asked for apart).
        """
        f = filters
        earlier = self._opened(f)
        by_state = f.replayable is not None or (
            f.status is not None and f.status != RecordStatus.IN_PROGRESS
        )
        if by_state:
            earlier = self._rows(f, statuses=(_IN_PROGRESS,)) + earlier
        rows = self._rows(
            f,
            statuses=() if f.status is None else (str(f.status),),
            replayable=f.replayable,
            settled=by_state,
            # unfinished rows whose writer is gone are not in_progress
            limit=None if f.status == RecordStatus.IN_PROGRESS else f.limit,
        )
        if earlier:
            latest = {row.id: row for row in reversed([*rows, *earlier])}
            rows = sorted(
                latest.values(), key=lambda r: (r.created_us, r.id), reverse=True
            )
        found: list[RecordSummary] = []
        for row in rows:
            summary = self._summary(row)
            if summary is not None and f.state_match(
                summary.status, summary.replayable
            ):
                found.append(summary)
                if f.limit is not None and len(found) >= f.limit:
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
        unsaved = sorted(
            (
                r
                for r in self.writes.unsaved.values()
                if r.envelope_hash == envelope_hash
            ),
            key=lambda r: (r.created_us, r.id),
            reverse=True,
        )
        found += [(row.id, True) for row in unsaved]
        for execution_id, live in found:
            try:
                record = self._load(execution_id)
            except RecordNotFound:
                path = f"{self._root}/{relative_path(execution_id)}"
                if not live and not os.path.exists(path):
                    self.writes.forget([execution_id])
                continue  # deleted, or a file with no header
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

    def find_steps(
        self, envelope_hash: str, name: str, args_hash: str | None, limit: int | None
    ) -> list[StepRef]:
        """A lookup of the step index (see ``StepIndex.find_steps``).

        Unfinished rows are probed first: a record whose writer was killed is
        re-read from its file, which indexes the steps it ended.
        """
        self.settle()
        return self._ask(
            lambda cat: cat.find_steps(envelope_hash, name, args_hash, limit)
        )

    def settle(self) -> list[CatalogRow]:
        """Probe every unfinished row; return the opened rows still being written.

        Rows of writers that are gone are re-read from their files (and so
        leave "in_progress"); rows of records whose process died before
        creating the file are dropped.
        """
        indexed = self._ask(lambda cat: cat.query(statuses=(_IN_PROGRESS,)))
        for row in indexed:
            self._settled(row)
        ids = {row.id for row in indexed}
        writing: list[CatalogRow] = []
        for row in self._opened():
            settled = None if row.id in ids else self._settled(row)
            if settled is not None and settled.status == _IN_PROGRESS:
                writing.append(settled)
        return writing

    def stats(self, extra_bytes: int) -> StoreStats:
        """Counts over the store: a few rows of the catalog's counts table."""
        writing = self.settle()  # opened rows, which are not counted yet
        statuses: Counter[str] = Counter()
        intents: Counter[str] = Counter()
        size = extra_bytes
        for status, intent, records, total in self._ask(lambda cat: cat.counts()):
            statuses[status] += records
            intents[intent] += records
            size += total
        for row in writing:
            statuses[_IN_PROGRESS] += 1
            intents[row.intent] += 1
            size += row.size
        return StoreStats(statuses.total(), dict(statuses), dict(intents), size)

    def usage_totals(self) -> list[UsageTotal]:
        """The LLM usage of the completed records per provider and model."""
        return self._ask(lambda cat: cat.usage_totals())

    def usage_of(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """(id, usage text) of those of ``ids`` completed with usage."""
        return self._ask(lambda cat: cat.usage_of(ids))

    def prunable(self, cutoff: datetime) -> list[str]:
        """Ids to prune: created before ``cutoff``, and every recording failure.

        Records still being written are kept; a file with no complete first
        line holds nothing, so it goes whatever its age once its process is gone.
        """
        self.settle()
        before = micros_of(cutoff)
        rows = self._ask(lambda cat: cat.query(before_us=before))
        rows += self._ask(lambda cat: cat.query(statuses=(_FAILED,)))
        ids: dict[str, None] = {}
        for row in rows:
            if not (row.status == _IN_PROGRESS and self._alive(row)):
                ids[row.id] = None
        return list(ids)

    def row(self, execution_id: str) -> CatalogRow | None:
        """The catalog's row for one record, or None (also if no catalog)."""
        try:
            self.writes.flush()
            return (
                self.catalog.get(execution_id) if self.catalog.path.exists() else None
            )
        except sqlite3.Error:
            return None

    # -- rebuilding ---------------------------------------------------------------

    def rebuild(
        self,
        on_progress: Progress | None = None,
        processes: int = 1,
        on_changed: Callable[[str, str], None] | None = None,
    ) -> int:
        """Rebuild the catalog from the record files; return rows indexed.

        One shard directory at a time (in ``processes`` worker processes for a
        large store), then rows whose file is gone are dropped and the counts
        derived again. A record whose file no longer holds the last line the
        catalog saw is logged and passed to ``on_changed`` (its id, how it
        differs); its row stays ``integrity_failure`` (see ``index_chunk``).
        """
        if not self.private and self.catalog.read_only:
            raise StoreError(
                f"cannot rebuild the catalog {self.catalog.path}: this process may "
                "not write the store (a read-only mount, or its permissions). "
                "Reading commands work without it; rebuilding needs write access."
            )
        self.writes.flush()
        done = indexed = 0
        root = self._root
        try:
            self.catalog.start_rebuild()
            shards = over_shards(
                self.catalog, self._root, index_chunk, processes=processes
            )
            for seen, rows, changed, steps in shards:
                self.catalog.stage(rows, steps)
                for execution_id, problem in changed:
                    report_changed(execution_id, problem, on_changed)
                done += seen
                indexed += len(rows)
                if on_progress is not None:
                    on_progress(done)
            self.catalog.finish_rebuild(
                lambda i: os.path.exists(f"{root}/{relative_path(i)}")
            )
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"could not rebuild the catalog: {exc}") from exc
        self.settle()
        return indexed

    # -- helpers ------------------------------------------------------------------

    def _ask(self, question: Callable[[Catalog], _T]) -> _T:
        """Run a query on a complete, sound catalog, rebuilding it first if needed.

        A catalog found damaged is rebuilt (it was moved aside) and asked
        again; where it may not be written, the answer comes from a private
        catalog (see :meth:`_answer_from_files`). A third failure is a
        ``StoreError`` saying how to mend it.
        """
        for attempt in range(3):
            try:
                self.writes.settle()
                if not self.catalog.is_complete():
                    if self.catalog.read_only:
                        raise DatabaseReadOnly("it is incomplete or new")
                    if has_records(self._root):
                        # A private catalog was announced; one in a
                        # catalog_dir is expected to be new (docs/store.md).
                        if not self.private and self._derived == self._root:
                            logger.warning(
                                "catalog %s is new or was lost; rebuilding it from "
                                "the record files",
                                self.catalog.path,
                            )
                        self.rebuild()
                    else:
                        self.catalog.mark_complete()
                return question(self.catalog)
            except (DatabaseCorrupt, DatabaseReadOnly) as exc:
                if attempt == 2 or (self.private and isinstance(exc, DatabaseReadOnly)):
                    raise self._failed(exc) from exc
                if self.catalog.read_only:
                    self._answer_from_files(exc)
                # else: moved aside; the next attempt rebuilds it
            except (sqlite3.Error, OSError) as exc:
                if isinstance(exc, StoreError):
                    raise
                raise self._failed(exc) from exc
        raise AssertionError("unreachable")  # pragma: no cover

    def _failed(self, exc: BaseException) -> StoreError:
        if self.catalog.read_only:
            mend = (
                "The record files are intact; this process may not write the "
                "store, so `intentusnet reindex` must be run by one that may."
            )
        else:
            mend = (
                "The record files are intact; `intentusnet reindex` rebuilds "
                "the catalog."
            )
        return StoreError(f"catalog {self.catalog.path} failed: {exc}. {mend}")

    def _answer_from_files(self, why: BaseException) -> None:
        """Use a private catalog, built from the record files, for this process.

        For a store this process may not write whose catalog cannot be used:
        slower (every file is read once), but the answers are right.
        """
        if self.private:
            raise self._failed(why)
        logger.warning(
            "catalog %s cannot be used (%s) and this process may not write the "
            "store: answering from the record files (slower). `intentusnet "
            "reindex`, run with write access, repairs it.",
            self.catalog.path,
            why,
        )
        directory = tempfile.mkdtemp(prefix="intentusnet-catalog-")
        weakref.finalize(self, shutil.rmtree, directory, True)
        root = self._root
        catalog = Catalog(
            Path(directory, CATALOG_NAME), is_empty=lambda: not has_records(root)
        )
        self.catalog = catalog
        self.writes = CatalogWriter(catalog, self._derived)
        self.private = True

    def _rows(
        self,
        f: ListFilters,
        *,
        statuses: tuple[str, ...] = (),
        replayable: bool | None = None,
        settled: bool = False,
        limit: int | None = None,
        live: bool = False,
    ) -> list[CatalogRow]:
        """The catalog's rows passing ``f`` on what never changes, and the rest."""
        return self._ask(
            lambda cat: cat.query(
                intent=f.intent,
                since_us=f.since_us,
                before_us=f.until_us,
                id_prefix=f.id_prefix,
                envelope_hash=f.envelope_hash,
                statuses=statuses,
                replayable=replayable,
                settled=settled,
                limit=limit,
                live=live,
            )
        )

    def _opened(self, filters: ListFilters | None = None) -> list[CatalogRow]:
        """Rows of opened, unfinished records: the catalog's, and any kept unsaved.

        Only those passing ``filters`` on what never changes in a record.
        """
        f = filters or ListFilters()
        rows = self._rows(f, live=True)
        if self.writes.unsaved:
            known = {row.id for row in rows}
            rows += [
                row
                for row in self.writes.unsaved.values()
                if row.id not in known
                and f.fixed_match(row.id, row.intent, row.created_us, row.envelope_hash)
            ]
        return rows

    def _alive(self, row: CatalogRow) -> bool:
        return owner_alive(f"{self._root}/{relative_path(row.id)}", row.owner_object())

    def _settled(self, row: CatalogRow) -> CatalogRow | None:
        """The row, re-read from its file if its writer is gone; None if no file.

        A settled row is checked against its file's size, one ``stat``: a file
        that is gone is not listed (``verify --all`` reports the row and
        ``reindex`` drops it), and one shorter than the catalog saw lost lines,
        so it lists as ``integrity_failure``, whatever the row says. A file
        with another inode than the row's was replaced: it is read, and lists
        as ``integrity_failure`` unless it still holds the lines the row saw.
        """
        path = f"{self._root}/{relative_path(row.id)}"
        if row.status != _IN_PROGRESS:
            try:
                found = os.stat(path)
            except FileNotFoundError:
                return None
            if found.st_size < row.size or (
                row.inode not in (None, found.st_ino) and self._changed(path, row)
            ):
                return row._replace(replayable=0, reason=_INTEGRITY_FAILURE)
            return row
        if not os.path.exists(path):
            # Opening (the file comes next), or its process died before making
            # it: either way, nothing to list; a dead one's row is dropped.
            if not opener_alive(path, row.owner_object()):
                self.writes.forget([row.id])
            return None
        if self._alive(row):
            return row
        # Its writer is gone: the file knows. The record is incomplete, or it
        # completed and the row was not updated yet (written behind by another
        # process, or lost when that process was killed), or its file never got
        # a header (a recording failure).
        fresh = self.refresh(row.id, row)
        return row._replace(status="incomplete") if fresh is None else fresh

    @staticmethod
    def _changed(path: str, row: CatalogRow) -> bool:
        """Whether a replaced file no longer holds the lines its row saw."""
        try:
            data = files.read(path, row.id)
        except RecordNotFound:
            return True
        return catalog_mismatch(data, row.lines, row.chain_head) is not None

    def _summary(self, row: CatalogRow) -> RecordSummary | None:
        settled = self._settled(row)
        if settled is None:
            return None
        return RecordSummary(
            settled.id,
            settled.created_utc,
            settled.intent,
            settled.intent_version,
            settled.envelope_hash,
            _STATUSES[settled.status],
            bool(settled.replayable),
            _REASONS[settled.reason] if settled.reason else None,
            settled.agent,
            settled.duration_ms,
        )
