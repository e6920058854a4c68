"""FileExecutionStore: one JSON Lines file per execution, indexed by SQLite.

Layout (DESIGN §5)::

    <root>/catalog.sqlite3            the catalog (derived; rebuilt by reindex();
                                      in ``catalog_dir`` when one is given)
    <root>/<2 hex of sha256(id)>/<id>.jsonl   one record

Record files are created exclusively with mode 0600, directories with 0700. The
files are the truth: a lost or corrupt catalog is rebuilt from them.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Final, Literal, TypeAlias

from orjson import dumps

from ..._util.files import make_dirs
from ..._util.jsonvalue import JSONObject
from ..._util.time import utc_now
from ...errors import (
    RecordIntegrityError,
    RecordNotFound,
    StoreError,
)
from ...record.format import header_line
from ...record.keys import SigningKey, load_signing_key
from ...record.model import ExecutionRecord, RecordSummary, StoreStats, VerifyReport
from ...record.reader import parse_record
from ...tlog.cadence import DEFAULT_CADENCE, LogCadence
from .. import logger
from ..durable import ListsInterrupted
from ..filters import ListFilters
from ..ids import check_id, new_record_id
from ..owner import current_owner, owner_alive
from ..queues import KeepsQueues
from ..rows import CatalogRow
from ..step_index import StepKey, StepRef, ended_steps
from ..translog import KeepsLog
from ..urls import is_url, public_url
from ..usage import RecordedUsage, UsageTotal, usage_from_text, usage_text
from ..writer import wire_object
from . import durable, files, waits
from .durable import FileDurable
from .files import cut_from, headerless, verify_file
from .layout import CATALOG_NAME, has_records, relative_path, walk_ids
from .loaded import LoadedRecords
from .queues import FileQueues
from .waits import FileWaits
from .writer import FileRecordWriter

# The catalog's queries and upkeep (and with them sqlite3) and the cache-hit
# journal load when first used, so that reading one record (``intentusnet
# replay ID``) imports neither (the writer's rows are ``rows.CatalogRow``).
# The transparency log's modules load only for a store that signs (so logs).
if TYPE_CHECKING:
    from ...tlog.publish import LogWitnesses
    from ...tlog.sequencer import LogSequencer
    from ..hits import CacheHit, Hit
    from ..verification import Progress, StoreVerification
    from .hits import HitJournal
    from .index import StoreIndex

    _Hits: TypeAlias = list[CacheHit]
    _Totals: TypeAlias = list[UsageTotal]

__all__ = [
    "DEFAULT_ROOT",
    "Durability",
    "FileExecutionStore",
]

# ``list`` is also a method name below; these keep annotations unambiguous.
_Summaries: TypeAlias = list[RecordSummary]
_Ids: TypeAlias = list[str]
_StepRefs: TypeAlias = list[StepRef]


#: How record writes reach the disk: ``"flush"`` hands every line to the OS
#: before returning (a killed process loses nothing); ``"fsync"`` also forces the
#: record to the disk when it opens and completes (a power cut loses nothing).
Durability = Literal["flush", "fsync"]
DEFAULT_ROOT: Final = ".intentusnet/records"


def _url_refused(url: str, from_env: bool) -> str:
    named = "INTENTUSNET_STORE" if from_env else "the root"
    return (
        f"{named} names a PostgreSQL store ({public_url(url)}), not a directory, "
        "so a FileExecutionStore cannot open it: use intentusnet.open_store(), "
        "which opens a URL or a path as --store does, or PostgresExecutionStore"
    )


class FileExecutionStore(
    ListsInterrupted, FileDurable, FileWaits, KeepsQueues, KeepsLog
):
    """Execution records as files on a local disk, safe for several processes.

    Args:
        root: the store directory; default ``$INTENTUSNET_STORE`` or
            ``.intentusnet/records``. Created (mode 0700) on first write.
        durability: ``"flush"`` (default) or ``"fsync"``, see :data:`Durability`.
        signing_key: a :class:`SigningKey`, or the path of its private key file:
            every record opened names its id in line 1 and is signed each time
            it is closed (completed, closed unfinished, invalidated); see
            docs/records.md, "Signatures". Added in 0.1.0.
        catalog_dir: the directory of the store's derived files, the catalog
            and the logs of opened records, when they must not sit in the
            root (default: the root); one store's alone. A catalog that misses
            records is not noticed: every process writing the store must name
            the same directory, or use a new one each time (it is rebuilt from
            the record files when missing). Added in 0.1.0.
        log_cadence: with a ``signing_key``, each record closed is appended to
            the store's transparency log (``<root>/log/``) off the caller's
            thread, and a checkpoint signed with the key is published at the
            pace this :class:`LogCadence` sets (default: 0.5 s or 256 leaves);
            ``None`` keeps no log. Without a key there is no log: checkpoints
            are never unsigned (docs/log.md). Added in 0.1.0.
        log_witnesses: with a log, the witnesses each new checkpoint is sent
            to; it is published (``checkpoint.cosigned``) only once a quorum
            of them cosigned it (docs/log.md, "Running a witness"). Default:
            those ``$INTENTUSNET_LOG_WITNESSES`` names (``URL=VKEY ...``, with
            ``$INTENTUSNET_LOG_WITNESS_QUORUM``), else none. Added in 0.1.0.

    Raises:
        ValueError: an unknown durability, or a ``postgresql://`` URL for the
            root (given, or in ``$INTENTUSNET_STORE``): a URL names a
            PostgreSQL store, which ``intentusnet.open_store()`` opens.
        SigningKeyError: ``signing_key`` cannot be read as an Ed25519 private key.
        LogIntegrityError: ``$INTENTUSNET_LOG_WITNESSES`` or its quorum is
            malformed.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        durability: Durability = "flush",
        signing_key: SigningKey | str | os.PathLike[str] | None = None,
        catalog_dir: str | os.PathLike[str] | None = None,
        log_cadence: LogCadence | None = DEFAULT_CADENCE,
        log_witnesses: LogWitnesses | None = None,
    ) -> None:
        if durability not in ("flush", "fsync"):
            raise ValueError(
                f"durability must be 'flush' or 'fsync', not {durability!r}"
            )
        from_env = root is None
        signer = load_signing_key(signing_key)
        if root is None:
            root = os.environ.get("INTENTUSNET_STORE") or DEFAULT_ROOT
        if is_url(root):
            raise ValueError(_url_refused(str(root), from_env))
        self.root = Path(root)
        #: where the records are, for people: the directory (added in 0.1.0)
        self.where: Final = str(self.root)
        #: the local directory of the records (added in 0.1.0)
        self.directory: Final[Path | None] = self.root
        self.durability = durability
        self._root = os.fspath(self.root)
        #: where the catalog and the logs of opened records are
        self._derived = self.root if catalog_dir is None else Path(catalog_dir)
        self._fsync = durability == "fsync"
        self._connected = False
        self._owner: tuple[JSONObject, str] | None = None
        self._loaded = LoadedRecords()
        self._queues = FileQueues(self.root, fsync=self._fsync)
        self._keep_log(signer, log_cadence, log_witnesses)
        self._made = time.time()  # records closed since are queued by this store

    # The catalog and the hit journal are made on first use. Threads racing to
    # make one may both build it (the constructors touch nothing outside the
    # object), but ``setdefault`` hands every thread the first one stored.

    @cached_property
    def _index(self) -> StoreIndex:
        from .catalog import Catalog
        from .index import StoreIndex

        if self._derived != self.root:
            # Made now: a catalog whose directory is missing reads as read only.
            with contextlib.suppress(OSError):
                make_dirs(self._derived)
        catalog = Catalog(
            self._derived / CATALOG_NAME, is_empty=lambda: not has_records(self._root)
        )
        made = StoreIndex(catalog, self._root, self.load, os.fspath(self._derived))
        index: StoreIndex = self.__dict__.setdefault("_index", made)
        return index

    def _open_sequencer(self, key: SigningKey, cadence: LogCadence) -> LogSequencer:
        from .translog import open_sequencer

        return open_sequencer(self._root, key, cadence, self._made, self._witnesses)

    @cached_property
    def _hits(self) -> HitJournal:
        from .hits import HitJournal

        journal: HitJournal = self.__dict__.setdefault("_hits", HitJournal(self.root))
        return journal

    def __repr__(self) -> str:
        return f"FileExecutionStore({self._root!r}, durability={self.durability!r})"

    def __enter__(self) -> FileExecutionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Write queued catalog rows and close the catalog connection.

        The store stays usable: the connection reopens when needed.
        """
        # Only what was made: closing must not build the catalog of a store
        # that never used it.
        if "_index" in self.__dict__:
            self._index.writes.close()
            self._index.catalog.close()
        if "_hits" in self.__dict__:
            self._hits.close()
        if "_sequencer" in self.__dict__:
            self._sequencer.close()  # what is queued goes into the log now

    # -- writing ------------------------------------------------------------------

    def open(
        self,
        envelope: JSONObject,
        *,
        envelope_hash: str,
        execution_id: str | None = None,
        parent_execution_id: str | None = None,
        configuration: JSONObject | None = None,
    ) -> FileRecordWriter:
        """Create a record's file and write its header line; return its writer."""
        execution_id = new_record_id(execution_id, parent_execution_id)
        created_utc, created_us = utc_now()
        owner, owner_text = self._owner_fields()
        try:
            wire = wire_object(envelope)
            line, digest = header_line(
                execution_id=execution_id,
                created_utc=created_utc,
                envelope_hash=envelope_hash,
                envelope=wire,
                parent_execution_id=parent_execution_id,
                owner=owner,
                key_id=None if self._signer is None else self._signer.key_id,
                configuration=configuration,
            )
        except TypeError as exc:
            raise StoreError(
                f"record {execution_id}: envelope is not JSON ({exc})"
            ) from exc
        if not self._connected:
            self._connect()
        found = wire.get("intent")
        intent: JSONObject = found if isinstance(found, dict) else {}
        # Logged before the file exists (lines 0: no line of it is on disk
        # yet), so that a record is listed from its first byte on, whenever
        # its process is killed; readers skip a row whose file is missing.
        row = CatalogRow(
            execution_id,
            created_us,
            created_utc,
            name if isinstance(name := intent.get("name"), str) else "",
            version if isinstance(version := intent.get("version"), str) else "1.0",
            envelope_hash,
            "in_progress",
            0,
            "execution_incomplete",
            None,
            None,
            parent_execution_id,
            owner_text,
            0,
            len(line),
            "",
        )
        writes = self._index.writes
        writes.opened(row)
        try:
            fd = files.create(
                self._root, relative_path(execution_id), line, fsync=self._fsync
            )
        except BaseException:
            writes.not_opened(row)
            raise
        return FileRecordWriter(
            execution_id,
            fd=fd,
            header_hash=digest,
            size=len(line),
            fsync=self._fsync,
            row=row._replace(inode=os.fstat(fd).st_ino),
            on_complete=writes.write_later if self._cadence is None else self._logged,
            signer=self._signer,
        )

    def _logged(self, row: CatalogRow, ended: list[StepKey]) -> None:
        """A record closed: its catalog row queued, and its leaf for the log."""
        self._index.writes.write_later(row, ended)
        self._log_leaf(row.id, row.chain_head)

    def import_raw(self, execution_id: str, data: bytes) -> ExecutionRecord:
        """Store a record's bytes as they are (e.g. a PostgreSQL store's), verified.

        The file holds the bytes unchanged, so the record verifies and replays
        here as it did where it came from. An unfinished record arrives
        ``incomplete`` (no one here is writing it). Added in 0.1.0.

        Raises:
            InvalidExecutionId: the id is not allowed (nothing was touched).
            RecordIntegrityError, UnsupportedSchemaVersion: the bytes do not
                hold a sound record of this id (a torn last line is left out).
            RecordExists: a record with this id exists here.
            StoreError: the file could not be written.
        """
        from ..rows import row_for

        check_id(execution_id)
        data = data[: data.rfind(b"\n") + 1]  # a torn last line is not a line
        record = parse_record(data, execution_id, lambda _owner: False)
        _ = record.events  # every line is checked before anything is written
        if not self._connected:
            self._connect()
        fd = files.create(
            self._root, relative_path(execution_id), data, fsync=self._fsync
        )
        inode = os.fstat(fd).st_ino
        os.close(fd)
        usage = usage_text(record.final_response)
        row = row_for(record.header, data.count(b"\n"), len(data), usage)
        self._index.writes.write(row._replace(inode=inode), ended_steps(record))
        return record

    def invalidate(self, execution_id: str, reason: str) -> None:
        """Append an ``INVALIDATED`` line to the file, never rewritten.

        A torn last line left by a crash is cut off first, so that the new line
        continues the chain.
        """
        check_id(execution_id)
        files.append_invalidated(
            self._path(execution_id),
            execution_id,
            reason,
            fsync=self._fsync,
            signer=self._signer,
        )
        self._index.refresh(execution_id)
        self._log_closed_again(execution_id)

    def delete(self, execution_id: str) -> None:
        """Delete a record's file and its catalog row (its key and resume link too).

        Raises:
            InvalidExecutionId, RecordNotFound: as for :meth:`load`.
        """
        check_id(execution_id)
        self._log_deletions([execution_id])
        durable.forget(self._root, execution_id)
        waits.forget_signals(self._root, execution_id)
        try:
            os.unlink(self._path(execution_id))
        except FileNotFoundError:
            raise files.not_found(execution_id, self._root) from None
        except OSError as exc:
            raise StoreError(f"record {execution_id}: could not delete: {exc}") from exc
        self._index.writes.forget([execution_id])

    # -- reading ------------------------------------------------------------------

    def load(self, execution_id: str) -> ExecutionRecord:
        """Read, verify and assemble a record.

        Raises:
            RecordNotFound: also for a file with no complete first line (status
                ``recording_failure``): there is no record in it to load.
            RecordIntegrityError: also for a file with no complete first line
                whose catalog row saw the record settled (its lines were cut).
        """
        check_id(execution_id)
        path = f"{self._root}/{relative_path(execution_id)}"
        data = files.read(path, execution_id)
        if headerless(data):
            row = self._index.row(execution_id)  # a failure path: the catalog
            problem = None if row is None else cut_from(data, row)
            if problem is not None:
                raise RecordIntegrityError(f"record {execution_id}: {problem}")
            raise RecordNotFound(
                f"record {execution_id} holds nothing to load: its file has no "
                f"complete first line ({len(data)} bytes), because its process was "
                "stopped between creating it and writing the header (status "
                "recording_failure). `intentusnet prune` removes it."
            )
        record = self._loaded.get(execution_id, data)
        if record is None:
            record = parse_record(
                data, execution_id, lambda owner: owner_alive(path, owner)
            )
            self._loaded.keep(execution_id, data, record)
        return record

    def raw(self, execution_id: str) -> bytes:
        """The record's file, byte for byte (a torn last line included).

        Added in 0.1.0.

        Raises:
            InvalidExecutionId, RecordNotFound.
        """
        return self._read(check_id(execution_id))

    def exists(self, execution_id: str) -> bool:
        """Whether a record with this id exists (raises InvalidExecutionId)."""
        return os.path.exists(self._path(check_id(execution_id)))

    def verify(self, execution_id: str) -> VerifyReport:
        """Check a record line by line; report every failure instead of raising.

        Beyond the hash chain, the catalog's last seen line count and chain head
        are compared with the file, which reveals whole lines cut from its end.
        A file with no complete first line is a recording failure, not a
        failure: the report is valid, with ``recording_failure`` and a note.

        Raises:
            InvalidExecutionId, RecordNotFound, UnsupportedSchemaVersion.
        """
        check_id(execution_id)
        data = self._read(execution_id)
        return verify_file(data, execution_id, self._index.row(execution_id))

    def verify_all(
        self,
        *,
        each: bool = False,
        processes: int = 1,
        on_progress: Progress | None = None,
    ) -> StoreVerification:
        """Verify every record file, one shard directory at a time.

        Memory does not grow with the store. A file of a newer format is a
        failure here (it cannot be judged). ``processes`` are used for a store
        of 20,000 records or more (multiprocessing "forkserver": a script
        calling this with more than 1 must guard its main code with ``if
        __name__ == "__main__":``). Added in 0.1.0.
        """
        from ..verification import StoreVerification
        from .scan import over_shards, rows_without_files, verify_chunk

        if os.path.isdir(self._root):
            self._index.writes.flush()  # the catalog is compared with the files
        catalog = self._index.catalog
        tallies = itertools.chain(
            over_shards(catalog, self._root, verify_chunk, each, processes=processes),
            rows_without_files(catalog, self._root),
        )
        return StoreVerification(tallies, on_progress)

    def iter_ids(self) -> Iterator[str]:
        """Yield the id of every record file, in a stable order."""
        return walk_ids(self._root)

    # -- catalog queries ----------------------------------------------------------

    def list(self, filters: ListFilters = ListFilters()) -> _Summaries:
        """Summaries of the records matching ``filters``, newest first.

        Every filter is a query on the catalog's indexes, so a filter that
        matches few records answers as fast as one that matches many.

        Raises:
            StoreError: the catalog cannot be read or rebuilt.
        """
        if not os.path.isdir(self._root):
            return []
        return self._index.summaries(filters)

    def find_by_hash(
        self, envelope_hash: str, replayable_only: bool = True
    ) -> ExecutionRecord | None:
        """The newest record with this envelope hash, found by the catalog."""
        if not os.path.isdir(self._root):
            return None
        return self._index.find(envelope_hash, replayable_only)

    def find_steps(
        self,
        envelope_hash: str,
        name: str,
        args_hash: str | None = None,
        *,
        limit: int | None = None,
    ) -> _StepRefs:
        """Ended steps, from the catalog's step index (see ``StepIndex``).

        Raises:
            StoreError: the catalog cannot be read or rebuilt.
        """
        if not os.path.isdir(self._root):
            return []
        return self._index.find_steps(envelope_hash, name, args_hash, limit)

    def prune(
        self,
        older_than: timedelta,
        *,
        dry_run: bool = False,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> _Ids:
        """Delete records created more than ``older_than`` ago; return their ids.

        Records still being written are kept. A record's idempotency key (the
        key file whose claim names it) and resume link go with it: the key is
        new again (added in 0.1.0). Files with no complete first line
        (status ``recording_failure``: nothing was recorded in them) are deleted
        whatever their age, once their process is gone.
        """
        if older_than < timedelta(0):
            raise ValueError("older_than must not be negative")
        if not os.path.isdir(self._root):
            return []
        cutoff = datetime.now(UTC) - older_than
        ids = self._index.prunable(cutoff)
        if dry_run:
            return ids
        self._hits.prune(cutoff)
        self._log_deletions(ids)
        removed: _Ids = []
        try:
            for execution_id in ids:
                durable.forget(self._root, execution_id)
                waits.forget_signals(self._root, execution_id)
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self._path(execution_id))
                removed.append(execution_id)
                if on_progress is not None:
                    on_progress(len(removed), len(ids))
        except OSError as exc:
            raise StoreError(
                f"prune stopped after {len(removed)} records: {exc}"
            ) from exc
        finally:
            self._index.writes.forget(removed)
        return removed

    def reindex(
        self,
        *,
        processes: int = 1,
        on_progress: Progress | None = None,
        on_changed: Callable[[str, str], None] | None = None,
    ) -> int:
        """Rebuild the catalog from the record files; return records indexed.

        Each record's hash chain is checked and its lines read, one shard
        directory at a time, so memory does not grow with the store. Damaged
        records are indexed as ``integrity_failure`` where line 1 can be read,
        files with no complete first line as ``recording_failure``; files of a
        newer format or with an unreadable header are left out (and logged).

        A record whose file no longer holds the last line the catalog saw
        (same place, same hash: records are append-only) was changed or cut
        since: even if its chain holds (every hash recomputed), it is not
        accepted. Its row keeps the catalog's chain head, so ``verify`` still
        fails it, and says ``integrity_failure``; it is logged and passed to
        ``on_changed``. A catalog that was deleted remembers nothing: only a
        signature then tells (docs/records.md, "Signatures").
        """
        if not os.path.isdir(self._root):
            return 0
        return self._index.rebuild(on_progress, processes, on_changed)

    def stats(self) -> StoreStats:
        """Counts per status and intent, and bytes used, from the catalog.

        The bytes include the catalog and the cache-hit journal.
        """
        if not os.path.isdir(self._root):
            return StoreStats(records=0, by_status={}, by_intent={}, bytes_on_disk=0)
        catalog = self._derived / CATALOG_NAME  # the store's, whatever answers
        extra = self._hits.size()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                extra += os.stat(f"{catalog}{suffix}").st_size
        return self._index.stats(extra)

    def usage_totals(self) -> _Totals:
        """The LLM token usage of the completed records, per provider and model.

        Running totals the catalog keeps as records are written (see
        ``store.usage``), so ``savings_report`` reads a few rows however large
        the store. Added in 0.1.0.
        """
        if not os.path.isdir(self._root):
            return []
        return self._index.usage_totals()

    def usage_of(self, execution_ids: Iterable[str]) -> dict[str, RecordedUsage]:
        """The LLM token usage of these records, by id, where they carry one.

        Only completed records whose answer carries usage are in the answer;
        ``savings_report`` asks it for the records cache hits were served from.
        Added in 0.1.0.
        """
        ids = list(execution_ids)
        if not ids or not os.path.isdir(self._root):
            return {}
        found: dict[str, RecordedUsage] = {}
        for execution_id, text in self._index.usage_of(ids):
            usage = usage_from_text(text)
            if usage is not None:
                found[execution_id] = usage
        return found

    # -- cache hits (see store/hits.py) -------------------------------------------

    def record_cache_hit(self, hit: Hit) -> str:
        """Append the hit to the day's journal (no record file); return its id.

        Raises:
            StoreError: the journal could not be written.
        """
        try:
            return self._hits.append(hit)
        except (OSError, TypeError) as exc:
            raise StoreError(f"could not record a cache hit: {exc}") from exc

    def cache_hits(
        self,
        *,
        intent: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
    ) -> _Hits:
        """Cache hits matching every filter given, newest first (added in 0.1.0)."""
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, not {limit}")
        return self._hits.read(intent=intent, since=since, limit=limit)

    def cache_hit_count(self) -> int:
        """How many cache hits the journal holds (added in 0.1.0)."""
        return self._hits.count()

    def change_probe(self, execution_id: str) -> Callable[[], object]:
        """Return a cheap check whose answer changes whenever the record changes.

        One ``stat()``: the file's size, inode, modification time and status
        change time (``st_ctime_ns``), or ``None`` once the file is gone. An
        appended ``INVALIDATED`` line, an edited byte or a deletion all change
        the answer, also an edit of the same size whose modification time was
        put back (``touch -d``, ``os.utime``): no call can set the change time.
        The replay cache asks it on every hit. Added in 0.1.0.

        Raises:
            InvalidExecutionId: the id is not allowed.
        """
        path = self._path(check_id(execution_id))
        stat = os.stat

        def probe() -> object:
            try:
                found = stat(path)
            except OSError:
                return None
            return (found.st_size, found.st_ino, found.st_mtime_ns, found.st_ctime_ns)

        return probe

    # -- internals ----------------------------------------------------------------

    def _path(self, execution_id: str) -> str:
        return f"{self._root}/{relative_path(execution_id)}"

    def _owner_fields(self) -> tuple[JSONObject, str]:
        owner = current_owner()
        if self._owner is None or self._owner[0] is not owner:
            self._owner = (owner, dumps(owner).decode())
        return self._owner

    def _connect(self) -> None:
        # Before the first record file is made, so that a new catalog of a new
        # store can tell it is complete.
        import sqlite3

        self._connected = True
        try:
            make_dirs(self.root)
            make_dirs(self._derived)
            self._index.catalog.connect()
        except (sqlite3.Error, OSError) as exc:
            logger.warning("catalog %s unavailable (%s)", self._index.catalog.path, exc)

    def _read(self, execution_id: str) -> bytes:
        return files.read(self._path(execution_id), execution_id)
