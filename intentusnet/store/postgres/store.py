"""PostgresExecutionStore: the same sealed records, kept in PostgreSQL.

Each record line is one row of ``intentusnet_lines`` (id, seq, the line's bytes),
so a record read back is byte for byte what the file store writes, and the same
reader (``parse_record``) and verifier (``verify_bytes``) check it. The catalog
is ``intentusnet_records``: derived columns, kept current by every write in the
same statement, rebuilt from the lines by :meth:`reindex`.

A writer holds a session advisory lock on its record from ``open`` until
``complete`` or ``close``; PostgreSQL releases it when the writer's connection
ends, however its process died. An unfinished record is ``in_progress`` while
the lock is held, by a session on any host, else ``incomplete``. See
docs/store.md, "PostgreSQL". Needs the ``postgres`` extra (psycopg 3).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, TypeAlias

from ..._util.jsonvalue import JSONObject
from ..._util.time import micros_of
from ...errors import (
    RecordIntegrityError,
    RecordNotFound,
    StoreError,
)
from ...record.keys import SigningKey, load_signing_key
from ...record.model import ExecutionRecord, RecordSummary, StoreStats, VerifyReport
from ...record.reader import parse_record
from ...record.verify import verify_bytes
from ...tlog.cadence import DEFAULT_CADENCE, LogCadence
from ...tlog.publish import LogWitnesses
from ...tlog.sequencer import LogSequencer
from ..filters import ListFilters
from ..ids import check_id
from ..queues import KeepsQueues
from ..rows import CatalogRow, cross_check
from ..step_index import StepRef
from ..translog import KeepsLog
from ..verification import Progress, VerifiesEach
from . import catalog, steps
from .catalog import COLUMNS, STATUS
from .connection import POOL_SIZE, Connection, Durability
from .durable import PgDurable
from .hits import PostgresHitJournal
from .queues import PostgresQueues
from .schema import HELD, flight_key, lock_key
from .waits import PgWaits
from .writer import (
    PostgresRecordWriter,
    append_invalidated,
    import_record,
    lock_record,
    open_record,
    unlock,
)

#: The records made from one envelope hash (and replayable, unless the second
#: parameter is false), newest first: find_by_hash's candidates.
_CANDIDATES: Final = """SELECT execution_id FROM intentusnet_records
    WHERE envelope_hash = %s AND (replayable OR NOT %s)
    ORDER BY created_us DESC, execution_id DESC"""
#: In a statement deleting records (``gone``): the idempotency keys naming
#: them go too (their resume links go by the foreign key).
_FORGET_KEYS: Final = """DELETE FROM intentusnet_keys
    WHERE execution_id IN (SELECT execution_id FROM gone)"""
_Ids: TypeAlias = list[str]
_Summaries: TypeAlias = list[RecordSummary]
_StepRefs: TypeAlias = list[StepRef]


class PostgresExecutionStore(
    PostgresHitJournal, PgDurable, PgWaits, KeepsQueues, KeepsLog, VerifiesEach
):
    """An :class:`ExecutionStore` and :class:`CacheHitJournal` in PostgreSQL.

    Args:
        dsn: a libpq connection string or ``postgresql://`` URL. Messages name
            its host, port and database, never its password.
        durability: ``"flush"`` (default): every write is committed with
            ``synchronous_commit = off`` before the call returns, so a killed
            router process loses nothing written; ``"fsync"``: committed with
            ``synchronous_commit = on``, so each write is on the server's disk
            (and its synchronous standbys) before the call returns.
        pool_size: connections in the read pool (psycopg_pool), opened on the
            first read. Writes and advisory locks go through one more
            connection, the store's session; queue slots and buckets
            through another, opened when a queue first asks.
        signing_key: as for ``FileExecutionStore``: records are signed by the
            same code (added in 0.1.0).
        log_cadence, log_witnesses: as for ``FileExecutionStore``: with a
            ``signing_key``, each record closed is a leaf of the store's
            transparency log, kept in the database (``intentusnet_log_tiles``);
            routers on any number of hosts append through one sequencer at a
            time (docs/log.md; added in 0.1.0).

    The tables are created on first use. Safe for any number of threads (reads
    run in parallel on the pool; writes take turns on the session), processes
    and hosts. Added in 0.1.0.
    """

    def __init__(
        self,
        dsn: str,
        *,
        durability: Durability = "flush",
        pool_size: int = POOL_SIZE,
        signing_key: SigningKey | str | os.PathLike[str] | None = None,
        log_cadence: LogCadence | None = DEFAULT_CADENCE,
        log_witnesses: LogWitnesses | None = None,
    ) -> None:
        if durability not in ("flush", "fsync"):
            raise ValueError(
                f"durability must be 'flush' or 'fsync', not {durability!r}"
            )
        if (
            isinstance(pool_size, bool)
            or not isinstance(pool_size, int)
            or pool_size < 1
        ):
            raise ValueError(f"pool_size must be an int >= 1, not {pool_size!r}")
        self.durability: Final = durability
        self._keep_log(load_signing_key(signing_key), log_cadence, log_witnesses)
        self._db = Connection(dsn, durability, pool_size)
        #: ``:memory:``: no local directory (a replay cache over the store keeps
        #: its disk tier in a temporary directory)
        self.root = Path(":memory:")
        #: ``PostgreSQL at host:port/dbname`` (never the password)
        self.where: Final = f"PostgreSQL at {self._db.where}"
        #: None: the records are in the database, in no local directory
        self.directory: Final[Path | None] = None
        self._writing: set[str] = set()  # ids whose lock our session holds
        self._holding: set[str] = set()  # key hashes whose claim it holds
        # Queue slots and buckets on their own connection, opened on first use:
        # a router waiting for a turn asks for a slot every few milliseconds,
        # which would otherwise queue the records' writes behind it.
        self._queue_db = Connection(dsn, durability, 1)
        # The log's own connection: an append's transaction holds up no write.
        self._log_db = Connection(dsn, durability, 1)
        self._queues = PostgresQueues(self._queue_db, self._db)

    def _open_sequencer(self, key: SigningKey, cadence: LogCadence) -> LogSequencer:
        from .translog import open_sequencer

        return open_sequencer(self._log_db, self.load, key, cadence, self._witnesses)

    def log_connection(self) -> Connection:
        """The connection of the store's transparency log (``intentusnet log``)."""
        return self._log_db

    def __repr__(self) -> str:
        where = self._db.where
        return f"PostgresExecutionStore({where!r}, durability={self.durability!r})"

    def __enter__(self) -> PostgresExecutionStore:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections; records still open read as incomplete from now.

        What the log's sequencer has queued is appended first.
        """
        if "_sequencer" in self.__dict__:
            self._sequencer.close()
        self._log_db.close()
        self._queue_db.close()
        self._db.close()

    # -- writing ------------------------------------------------------------------

    def open(
        self,
        envelope: JSONObject,
        *,
        envelope_hash: str,
        execution_id: str | None = None,
        parent_execution_id: str | None = None,
        configuration: JSONObject | None = None,
    ) -> PostgresRecordWriter:
        """Create a record: its header and catalog rows and its lock, at once."""
        writer = open_record(
            self._db,
            self._writing,
            envelope,
            envelope_hash=envelope_hash,
            execution_id=execution_id,
            parent_execution_id=parent_execution_id,
            signer=self._signer,
            configuration=configuration,
        )
        if self._cadence is not None:
            writer.on_closed = self._log_leaf
        return writer

    def import_raw(self, execution_id: str, data: bytes) -> ExecutionRecord:
        """As ``FileExecutionStore.import_raw``: one row per line, byte for byte."""
        return import_record(self._db, check_id(execution_id), data)

    def invalidate(self, execution_id: str, reason: str) -> None:
        """Append an ``INVALIDATED`` event to a record no session on any host writes."""
        check_id(execution_id)
        with self._db.lock:
            if not lock_record(self._db, execution_id, self._writing):
                raise StoreError(f"record {execution_id} is still being written")
            try:
                append_invalidated(
                    self._db, execution_id, self.raw(execution_id), reason, self._signer
                )
            finally:
                unlock(self._db, execution_id)
        self._log_closed_again(execution_id)

    def delete(self, execution_id: str) -> None:
        """Delete one record (its lines, row, key and resume link, in one statement).

        Raises:
            InvalidExecutionId, RecordNotFound.
        """
        self._log_deletions([check_id(execution_id)])
        gone = self._db.run(
            f"""WITH gone AS (
                DELETE FROM intentusnet_records WHERE execution_id = %s
                RETURNING execution_id),
            keys AS ({_FORGET_KEYS})
            SELECT 1 FROM gone""",
            [check_id(execution_id)],
        )
        if not gone:
            raise RecordNotFound(f"no record {execution_id}")

    def prune(
        self,
        older_than: timedelta,
        *,
        dry_run: bool = False,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> _Ids:
        """Delete records created before now - ``older_than``; return their ids.

        Records still being written (their lock is held) are kept. Cache hits
        older than the cutoff are deleted too, and so are the idempotency keys
        naming the records (their resume links go with them; added in 0.1.0).
        With ``dry_run`` nothing is. One statement: ``on_progress(done,
        total)`` is called once, after it.
        """
        if older_than < timedelta(0):
            raise ValueError("older_than must not be negative")
        cutoff = micros_of(datetime.now(UTC) - older_than)
        chosen = f"""WITH held(k) AS ({HELD})
            SELECT execution_id FROM intentusnet_records
            WHERE created_us < %s AND {STATUS} <> 'in_progress'"""
        if dry_run or self._cadence is not None:
            rows = self._db.read(chosen + " ORDER BY execution_id", [cutoff])
            if dry_run:
                return [str(row[0]) for row in rows]
            # With a log, the deletions are logged first: only these go.
            self._log_deletions(str(row[0]) for row in rows)
            chosen += " AND execution_id = ANY(%s)"
            params: list[object] = [cutoff, [str(row[0]) for row in rows]]
        else:
            params = [cutoff]
        with self._db.lock:
            rows = self._db.run(
                f"""WITH gone AS (
                    DELETE FROM intentusnet_records WHERE execution_id IN ({chosen})
                    RETURNING execution_id),
                keys AS ({_FORGET_KEYS})
                SELECT execution_id FROM gone""",
                params,
            )
            self._db.run(
                "DELETE FROM intentusnet_cache_hits WHERE created_us < %s", [cutoff]
            )
        if on_progress is not None:
            on_progress(len(rows), len(rows))
        return sorted(str(row[0]) for row in rows)

    def reindex(
        self,
        *,
        processes: int = 1,
        on_progress: Progress | None = None,
        on_changed: Callable[[str, str], None] | None = None,
    ) -> int:
        """Rebuild every row from the stored lines, as ``FileExecutionStore`` does.

        Records are read a batch at a time, in this process (``processes`` is
        not used); ``on_progress`` is called after each batch.
        """
        return catalog.reindex(self._db, on_changed=on_changed, on_progress=on_progress)

    # -- reading ------------------------------------------------------------------

    def find_steps(
        self,
        envelope_hash: str,
        name: str,
        args_hash: str | None = None,
        *,
        limit: int | None = None,
    ) -> _StepRefs:
        """Ended steps, from ``intentusnet_steps`` in one query (see ``StepIndex``)."""
        return steps.find(self._db, envelope_hash, name, args_hash, limit)

    def raw(self, execution_id: str) -> bytes:
        """The record's bytes, exactly as the file store's file would hold them.

        Raises:
            InvalidExecutionId, RecordNotFound.
        """
        rows = self._db.read(
            "SELECT line FROM intentusnet_lines WHERE execution_id = %s ORDER BY seq",
            [check_id(execution_id)],
        )
        if not rows:
            raise RecordNotFound(f"no record {execution_id}")
        return b"".join(bytes(row[0]) for row in rows)

    def load(self, execution_id: str) -> ExecutionRecord:
        """Read, verify and assemble a record (the one reader, as for files)."""
        return self._parse(execution_id, self.raw(execution_id))

    def exists(self, execution_id: str) -> bool:
        """Whether a record with this id exists (raises InvalidExecutionId)."""
        return bool(
            self._db.read(
                "SELECT 1 FROM intentusnet_records WHERE execution_id = %s",
                [check_id(execution_id)],
            )
        )

    def verify(self, execution_id: str) -> VerifyReport:
        """Check a record line by line, and against its catalog row.

        The row's line count and chain head reveal lines cut from its end.

        Raises:
            InvalidExecutionId, RecordNotFound, UnsupportedSchemaVersion.
        """
        data = self.raw(execution_id)
        found = self._db.read(
            f"SELECT {COLUMNS} FROM intentusnet_records WHERE execution_id = %s",
            [execution_id],
        )
        row = CatalogRow(*found[0]) if found else None
        return cross_check(verify_bytes(data, execution_id), data, row)

    def iter_ids(self) -> Iterator[str]:
        """Every record id, sorted."""
        rows = self._db.read(
            "SELECT execution_id FROM intentusnet_records ORDER BY execution_id"
        )
        return iter([str(row[0]) for row in rows])

    def list(self, filters: ListFilters = ListFilters()) -> _Summaries:
        """Summaries of the records matching ``filters``, newest first.

        One query, its filters on indexed columns (see ``ExecutionStore.list``).
        """
        return catalog.summaries(self._db, filters)

    def find_by_hash(
        self, envelope_hash: str, replayable_only: bool = True
    ) -> ExecutionRecord | None:
        """The newest record with this envelope hash that verifies.

        The newest candidate's lines come with the query that finds it (one
        round trip in the usual case); if they do not verify, the next
        candidates are read one at a time (up to 20 in all).
        """
        params = [envelope_hash, replayable_only]
        newest = self._db.read(
            f"""SELECT l.execution_id, l.line FROM ({_CANDIDATES} LIMIT 1) AS c
            JOIN intentusnet_lines l USING (execution_id) ORDER BY l.seq""",
            params,
        )
        if not newest:
            return None
        data = b"".join(bytes(row[1]) for row in newest)
        found = self._servable(str(newest[0][0]), data, replayable_only)
        if found is not None:
            return found
        for (execution_id,) in self._db.read(
            f"{_CANDIDATES} OFFSET 1 LIMIT 19", params
        ):
            try:
                data = self.raw(str(execution_id))
            except RecordNotFound:
                continue  # deleted meanwhile
            found = self._servable(str(execution_id), data, replayable_only)
            if found is not None:
                return found
        return None

    def stats(self) -> StoreStats:
        """Counts per status and intent, and the bytes the store's tables take."""
        return catalog.stats(self._db)

    def change_probe(self, execution_id: str) -> Callable[[], object]:
        """A check whose answer changes whenever the record changes.

        One indexed query: the catalog row's line count, chain head and row
        version; ``None`` once the record is gone.
        """
        check_id(execution_id)

        def probe() -> object:
            rows = self._db.read(
                "SELECT lines, chain_head, xmin::text FROM intentusnet_records "
                "WHERE execution_id = %s",
                [execution_id],
            )
            return rows[0] if rows else None

        return probe

    # -- queues and durable executions (added in 0.1.0) -------------------------

    def interrupted(self, intent: str, *, until: datetime, limit: int) -> _Summaries:
        """Records to recover (see ``store.durable.DurableStore``), in one query.

        It reads the unfinished rows of the intent (a partial index), decides
        ``incomplete`` by the advisory locks (so across hosts), and leaves out
        the rows a resume link names whose resumer's record exists.
        """
        filters = ListFilters(
            intent=intent, status="incomplete", until=until, limit=limit
        )
        return catalog.summaries(self._db, filters, unresumed=True)

    # -- single flight across processes -------------------------------------------

    def try_flight(self, envelope_hash: str) -> bool:
        """Claim the right to run an envelope; False if another session holds it.

        A session advisory lock on the store's session connection, keyed by
        the hash: PostgreSQL releases it with the connection, however the
        claiming process ended. Claims of one store object are re-entrant.
        """
        (taken,) = self._db.run(
            "SELECT pg_try_advisory_lock(%s)", [flight_key(envelope_hash)]
        )[0]
        return bool(taken)

    def end_flight(self, envelope_hash: str) -> None:
        """Give up a claim made by :meth:`try_flight` (gone anyway with the session)."""
        with contextlib.suppress(StoreError):
            self._db.run("SELECT pg_advisory_unlock(%s)", [flight_key(envelope_hash)])

    # -- internals ----------------------------------------------------------------

    def _parse(self, execution_id: str, data: bytes) -> ExecutionRecord:
        """The one reader over a record's bytes; asks the locks if it is unfinished."""
        return parse_record(data, execution_id, lambda _owner: self._held(execution_id))

    def _servable(
        self, execution_id: str, data: bytes, replayable_only: bool
    ) -> ExecutionRecord | None:
        """The record in ``data`` if it verifies and may be returned by find_by_hash."""
        try:
            record = self._parse(execution_id, data)
        except RecordIntegrityError:
            return None
        return record if record.header.replayable or not replayable_only else None

    def _held(self, execution_id: str) -> bool:
        """Whether any session (on any host) holds the record's writer lock."""
        key = lock_key(execution_id)
        rows = self._db.read(f"SELECT 1 FROM ({HELD}) AS held(k) WHERE k = %s", [key])
        return bool(rows)
