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
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import TracebackType
from typing import Final, TypeAlias

from .._util.ids import new_execution_id
from .._util.jsonvalue import JSONObject
from .._util.time import micros_of, parse_utc, utc_now
from ..errors import (
    RecordExists,
    RecordIntegrityError,
    RecordNotFound,
    StoreError,
    UnsupportedSchemaVersion,
)
from ..record.format import header_line, invalidated_line
from ..record.model import (
    ExecutionHeader,
    ExecutionRecord,
    RecordStatus,
    RecordSummary,
    ReplayableReason,
    StoreStats,
    VerifyReport,
    status_filter,
)
from ..record.reader import parse_record
from ..record.verify import salvage_header, verify_bytes
from . import _log
from ._files import cross_check
from ._layout import check_id
from ._owner import current_owner
from ._pg import HELD, Connection, Durability, lock_key
from ._scan import row_for
from .catalog import CatalogRow
from .hits import CacheHit, hit_line, parse_hits
from .writer import ChainWriter, wire_object

_Summaries: TypeAlias = list[RecordSummary]
_Ids: TypeAlias = list[str]
_Hits: TypeAlias = list[CacheHit]
_IN_PROGRESS: Final = RecordStatus.IN_PROGRESS.value
_UNFINISHED: Final = (RecordStatus.IN_PROGRESS, RecordStatus.INCOMPLETE)
_COLUMNS: Final = (
    "execution_id, created_us, created_utc, intent, intent_version, envelope_hash, "
    "status, replayable, reason, agent, duration_ms, parent_id, owner, lines, size, "
    "chain_head"
)
# The status a row shows: an unfinished record whose lock no session holds is
# incomplete. Used with "WITH held(k) AS (HELD)".
_STATUS: Final = (
    "CASE WHEN status = 'in_progress' AND lock_key NOT IN (SELECT k FROM held) "
    "THEN 'incomplete' ELSE status END"
)
_APPEND: Final = """WITH added AS (
        INSERT INTO intentusnet_lines (execution_id, seq, line)
        SELECT %s, s, l FROM unnest(%s::integer[], %s::bytea[]) AS u(s, l)
        RETURNING 1)
    UPDATE intentusnet_records SET lines = lines + (SELECT count(*) FROM added),
        size = size + %s, chain_head = %s {outcome}
    WHERE execution_id = %s"""
_OUTCOME: Final = ", status = %s, replayable = %s, reason = %s, agent = %s, " \
    "duration_ms = %s"  # fmt: skip


class PostgresRecordWriter(ChainWriter):
    """Appends the lines of one record, one statement (and commit) per write.

    Made by :meth:`PostgresExecutionStore.open`; it holds the record's advisory
    lock on the store's connection. If that connection is lost, the lock went
    with it: every later write raises :class:`StoreError`.
    """

    def __init__(
        self,
        store: PostgresExecutionStore,
        execution_id: str,
        header_hash: str,
        size: int,
    ) -> None:
        super().__init__(execution_id, header_hash, size)
        self._db = store._db
        self._session = self._db.session()
        self._store = store
        self._rows = 1  # the header is row 0
        self._final: JSONObject | None = None

    def complete(self, response: JSONObject, *, fingerprint: str | None = None) -> None:
        """Append ``FINAL_RESPONSE`` and the catalog's outcome in one statement."""
        with contextlib.suppress(TypeError):  # ChainWriter.complete raises for it
            self._final = wire_object(response)
        try:
            super().complete(response, fingerprint=fingerprint)
        finally:
            self._final = None

    def _emit(self, line: bytes) -> None:
        lines = [part + b"\n" for part in line.split(b"\n")[:-1]]
        seqs = list(range(self._rows, self._rows + len(lines)))
        head = "sha256:" + lines[-1][-67:-3].decode()
        params: list[object] = [self.execution_id, seqs, lines, len(line), head]
        outcome = ""
        if self._final is not None:
            outcome = _OUTCOME
            status, replayable, reason, agent, duration = self._outcome(self._final)
            params += [status, bool(replayable), reason, agent, duration]
        params.append(self.execution_id)
        with self._db.lock:
            if self._db.session() is not self._session:
                raise StoreError(
                    f"PostgreSQL at {self._db.where}: record {self.execution_id}: the "
                    "connection that opened it was lost, and its lock with it"
                )
            done = self._db.run(
                _APPEND.format(outcome=outcome) + " RETURNING lines",
                params,
                doing=f"record {self.execution_id}: could not append",
            )
        if not done:
            raise StoreError(f"record {self.execution_id} was deleted")
        self._rows += len(lines)

    def _finish(self, *, completed: bool) -> None:
        self._store._writing.discard(self.execution_id)
        with self._db.lock:
            try:
                if self._db.session() is self._session:
                    self._db.run(
                        "SELECT pg_advisory_unlock(%s)", [lock_key(self.execution_id)]
                    )
            except StoreError:
                pass  # the connection is gone, and the lock with it


class PostgresExecutionStore:
    """An :class:`ExecutionStore` and :class:`CacheHitJournal` in PostgreSQL.

    Args:
        dsn: a libpq connection string or ``postgresql://`` URL. Messages name
            its host, port and database, never its password.
        durability: ``"flush"`` (default): every write is committed with
            ``synchronous_commit = off`` before the call returns, so a killed
            router process loses nothing written; ``"fsync"``: committed with
            ``synchronous_commit = on``, so each write is on the server's disk
            (and its synchronous standbys) before the call returns.

    The tables are created on first use. Safe for several threads (they share
    one connection) and any number of processes and hosts. Added in 0.2.0.
    """

    def __init__(self, dsn: str, *, durability: Durability = "flush") -> None:
        if durability not in ("flush", "fsync"):
            raise ValueError(
                f"durability must be 'flush' or 'fsync', not {durability!r}"
            )
        self.durability: Final = durability
        self._db = Connection(dsn, durability)
        self._writing: set[str] = set()
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        """``:memory:``: the store has no local directory.

        A replay cache over it keeps its disk tier in a temporary directory.
        """
        return Path(":memory:")

    @property
    def where(self) -> str:
        """``host:port/dbname`` of the server (no password)."""
        return self._db.where

    def __repr__(self) -> str:
        return f"PostgresExecutionStore({self.where!r}, durability={self.durability!r})"

    def __enter__(self) -> PostgresExecutionStore:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection; records still open read as incomplete from now."""
        self._db.close()

    # -- writing ------------------------------------------------------------------

    def open(
        self,
        envelope: JSONObject,
        *,
        envelope_hash: str,
        execution_id: str | None = None,
        parent_execution_id: str | None = None,
    ) -> PostgresRecordWriter:
        """Create a record and write its header line; return its writer.

        The header row, the catalog row and the record's lock are taken before
        this returns: the record is listed at once, ``in_progress``.

        Raises:
            InvalidExecutionId: a given id is not allowed (nothing was sent).
            RecordExists: a record with this id exists.
            StoreError: the database could not be reached or written.
        """
        execution_id = (
            new_execution_id() if execution_id is None else check_id(execution_id)
        )
        if parent_execution_id is not None:
            check_id(parent_execution_id)
        created_utc, created_us = utc_now()
        try:
            wire = wire_object(envelope)
            line, digest = header_line(
                execution_id=execution_id,
                created_utc=created_utc,
                envelope_hash=envelope_hash,
                envelope=wire,
                parent_execution_id=parent_execution_id,
                owner=current_owner(),
            )
        except TypeError as exc:
            raise StoreError(f"record {execution_id}: envelope is not JSON") from exc
        intent = wire.get("intent")
        intent_d = intent if isinstance(intent, dict) else {}
        name, version = intent_d.get("name"), intent_d.get("version", "1.0")
        key = lock_key(execution_id)
        with self._db.lock:
            # The lock first: a reader never sees the row without its lock.
            (taken,) = self._db.run("SELECT pg_try_advisory_lock(%s)", [key])[0]
            if not taken or execution_id in self._writing:
                if taken:  # session locks count: undo this one
                    self._unlock(key)
                raise RecordExists(f"record {execution_id} already exists")
            try:
                added = self._db.run(
                    f"""WITH row AS (INSERT INTO intentusnet_records
                        ({_COLUMNS}, lock_key) VALUES
                        (%s, %s, %s, %s, %s, %s, 'in_progress', false,
                         'execution_incomplete', NULL, NULL, %s, NULL, 1, %s, %s, %s)
                        ON CONFLICT DO NOTHING RETURNING execution_id)
                    INSERT INTO intentusnet_lines (execution_id, seq, line)
                    SELECT execution_id, 0, %s FROM row RETURNING seq""",
                    [
                        execution_id,
                        created_us,
                        created_utc,
                        name if isinstance(name, str) else "",
                        version if isinstance(version, str) else "1.0",
                        envelope_hash,
                        parent_execution_id,
                        len(line),
                        digest,
                        key,
                        line,
                    ],
                    doing=f"record {execution_id}: could not open",
                )
            except BaseException:
                self._unlock(key)
                raise
            if not added:
                self._unlock(key)
                raise RecordExists(f"record {execution_id} already exists")
            self._writing.add(execution_id)
            return PostgresRecordWriter(self, execution_id, digest, len(line))

    def import_raw(self, execution_id: str, data: bytes) -> ExecutionRecord:
        """Store a record's bytes as they are (e.g. a file store's), verified first.

        The lines are kept byte for byte, so the record verifies and replays
        here as it did where it came from. An unfinished record arrives
        ``incomplete`` (no one here is writing it). Added in 0.2.0.

        Raises:
            InvalidExecutionId: the id is not allowed.
            RecordIntegrityError, UnsupportedSchemaVersion: the bytes do not
                hold a sound record of this id (a torn last line is left out).
            RecordExists: a record with this id exists here.
        """
        check_id(execution_id)
        data = data[: data.rfind(b"\n") + 1]  # a torn last line is not a line
        record = parse_record(data, execution_id, _gone)
        lines = [part + b"\n" for part in data.split(b"\n")[:-1]]
        row = _row_values(row_for(record.header, len(lines), len(data)))
        with self._db.lock:
            added = self._db.run(
                f"""WITH row AS (INSERT INTO intentusnet_records ({_COLUMNS}, lock_key)
                    VALUES ({", ".join(["%s"] * 17)})
                    ON CONFLICT DO NOTHING RETURNING execution_id)
                INSERT INTO intentusnet_lines (execution_id, seq, line)
                SELECT execution_id, s, l
                FROM row, unnest(%s::integer[], %s::bytea[]) AS u(s, l)
                RETURNING seq""",
                [*row, lock_key(execution_id), list(range(len(lines))), lines],
                doing=f"record {execution_id}: could not import",
            )
        if not added:
            raise RecordExists(f"record {execution_id} already exists")
        return record

    def invalidate(self, execution_id: str, reason: str) -> None:
        """Append an ``INVALIDATED`` event to a record no one is writing.

        Raises:
            InvalidExecutionId, RecordNotFound: as for :meth:`load`.
            RecordIntegrityError: the record is damaged.
            StoreError: a process (on any host) is still writing the record.
        """
        key = lock_key(check_id(execution_id))
        with self._db.lock:
            (taken,) = self._db.run("SELECT pg_try_advisory_lock(%s)", [key])[0]
            if not taken or execution_id in self._writing:
                if taken:
                    self._unlock(key)
                raise StoreError(f"record {execution_id} is still being written")
            try:
                data = self.raw(execution_id)
                record = parse_record(data, execution_id, _gone)
                line = invalidated_line(record, reason, utc_now()[1])
                data += line
                self._db.run(
                    _APPEND.format(outcome=_OUTCOME) + " RETURNING lines",
                    [
                        execution_id,
                        [len(record.events) + 1],
                        [line],
                        len(line),
                        "sha256:" + line[-67:-3].decode(),
                        *_outcome_of(parse_record(data, execution_id, _gone)),
                        execution_id,
                    ],
                    doing=f"record {execution_id}: could not invalidate",
                )
            finally:
                self._unlock(key)

    def delete(self, execution_id: str) -> None:
        """Delete one record (its lines and catalog row, in one statement).

        Raises:
            InvalidExecutionId, RecordNotFound.
        """
        gone = self._db.run(
            "DELETE FROM intentusnet_records WHERE execution_id = %s RETURNING 1",
            [check_id(execution_id)],
        )
        if not gone:
            raise RecordNotFound(f"no record {execution_id}")

    def prune(self, older_than: timedelta, *, dry_run: bool = False) -> _Ids:
        """Delete records created before now - ``older_than``; return their ids.

        Records still being written (their lock is held) are kept. Cache hits
        older than the cutoff are deleted too. With ``dry_run`` nothing is.
        """
        if older_than < timedelta(0):
            raise ValueError("older_than must not be negative")
        cutoff = micros_of(datetime.now(UTC) - older_than)
        chosen = f"""WITH held(k) AS ({HELD})
            SELECT execution_id FROM intentusnet_records
            WHERE created_us < %s AND {_STATUS} <> 'in_progress'"""
        if dry_run:
            rows = self._db.run(chosen + " ORDER BY execution_id", [cutoff])
            return [str(row[0]) for row in rows]
        with self._db.lock:
            rows = self._db.run(
                f"""DELETE FROM intentusnet_records WHERE execution_id IN ({chosen})
                RETURNING execution_id""",
                [cutoff],
            )
            self._db.run(
                "DELETE FROM intentusnet_cache_hits WHERE created_us < %s", [cutoff]
            )
        return sorted(str(row[0]) for row in rows)

    def reindex(self) -> int:
        """Rebuild every catalog row from the record's stored lines.

        Damaged records are indexed as ``integrity_failure`` where line 1 can be
        read; records of a newer format are left as they are (and logged).
        Returns the number of records indexed.
        """
        count = 0
        for execution_id in self.iter_ids():
            try:
                data = self.raw(execution_id)
            except RecordNotFound:
                continue  # deleted meanwhile
            try:
                record = parse_record(data, execution_id, _gone)
                values = _row_values(
                    row_for(record.header, data.count(b"\n"), len(data))
                )
            except UnsupportedSchemaVersion:
                _log.warning("record %s is of a newer format; left out", execution_id)
                continue
            except RecordIntegrityError:
                header = salvage_header(data, execution_id)
                if header is None:
                    _log.warning("record %s has no readable header", execution_id)
                    continue
                values = _row_values(row_for(header, data.count(b"\n"), len(data)))
            self._db.run(
                f"""UPDATE intentusnet_records SET ({_COLUMNS}, lock_key) =
                    ROW(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s,
                        %s, %s)
                WHERE execution_id = %s""",
                [*values, lock_key(execution_id), execution_id],
            )
            count += 1
        return count

    # -- reading ------------------------------------------------------------------

    def raw(self, execution_id: str) -> bytes:
        """The record's bytes, exactly as the file store's file would hold them.

        Raises:
            InvalidExecutionId, RecordNotFound.
        """
        rows = self._db.run(
            "SELECT line FROM intentusnet_lines WHERE execution_id = %s ORDER BY seq",
            [check_id(execution_id)],
        )
        if not rows:
            raise RecordNotFound(f"no record {execution_id}")
        return b"".join(bytes(row[0]) for row in rows)

    def load(self, execution_id: str) -> ExecutionRecord:
        """Read, verify and assemble a record (the one reader, as for files).

        Raises:
            InvalidExecutionId, RecordNotFound, UnsupportedSchemaVersion,
            RecordIntegrityError, StoreError (the database).
        """
        data = self.raw(execution_id)
        return parse_record(data, execution_id, lambda _owner: self._held(execution_id))

    def exists(self, execution_id: str) -> bool:
        """Whether a record with this id exists (raises InvalidExecutionId)."""
        return bool(
            self._db.run(
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
        found = self._db.run(
            f"SELECT {_COLUMNS} FROM intentusnet_records WHERE execution_id = %s",
            [execution_id],
        )
        row = CatalogRow(*found[0]) if found else None
        return cross_check(verify_bytes(data, execution_id), data, row)

    def iter_ids(self) -> Iterator[str]:
        """Every record id, sorted."""
        rows = self._db.run(
            "SELECT execution_id FROM intentusnet_records ORDER BY execution_id"
        )
        return iter([str(row[0]) for row in rows])

    def list(
        self,
        *,
        intent: str | None = None,
        status: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
    ) -> _Summaries:
        """Summaries of the records matching every filter given, newest first.

        Raises:
            ValueError: an unknown status or a negative limit.
        """
        wanted = status_filter(status)
        if limit is not None and limit < 0:
            raise ValueError(f"limit must be >= 0, not {limit}")
        rows = self._db.run(
            f"""WITH held(k) AS ({HELD})
            SELECT * FROM (
                SELECT execution_id, created_utc, intent, intent_version,
                    envelope_hash, {_STATUS} AS status, replayable, reason, agent,
                    duration_ms, created_us
                FROM intentusnet_records
                WHERE (%s::text IS NULL OR intent = %s)
                AND (%s::bigint IS NULL OR created_us >= %s)) AS r
            WHERE (%s::text IS NULL OR status = %s)
            ORDER BY created_us DESC, execution_id DESC LIMIT %s""",
            [
                intent,
                intent,
                *[None if since is None else micros_of(since)] * 2,
                *[None if wanted is None else wanted.value] * 2,
                limit,
            ],
        )
        return [
            RecordSummary(
                str(r[0]),
                str(r[1]),
                str(r[2]),
                str(r[3]),
                str(r[4]),
                RecordStatus(r[5]),
                bool(r[6]),
                None if r[7] is None else ReplayableReason(r[7]),
                None if r[8] is None else str(r[8]),
                None if r[9] is None else float(r[9]),
            )
            for r in rows
        ]

    def find_by_hash(
        self, envelope_hash: str, replayable_only: bool = True
    ) -> ExecutionRecord | None:
        """The newest record made from an envelope with this hash, or None.

        With ``replayable_only`` (default) only replayable records count. The
        record is loaded and verified before it is returned; a row that no
        longer matches its record is corrected and passed over.
        """
        rows = self._db.run(
            """SELECT execution_id FROM intentusnet_records
            WHERE envelope_hash = %s AND (replayable OR NOT %s)
            ORDER BY created_us DESC, execution_id DESC LIMIT 20""",
            [envelope_hash, replayable_only],
        )
        for (execution_id,) in rows:
            try:
                record = self.load(str(execution_id))
            except RecordNotFound:
                continue  # deleted meanwhile
            except RecordIntegrityError:
                continue
            if record.header.replayable or not replayable_only:
                return record
        return None

    def stats(self) -> StoreStats:
        """Counts per status and intent, and the bytes the store's tables take."""
        rows = self._db.run(
            f"""WITH held(k) AS ({HELD})
            SELECT {_STATUS}, intent, count(*) FROM intentusnet_records
            GROUP BY 1, 2"""
        )
        by_status: dict[str, int] = {}
        by_intent: dict[str, int] = {}
        for status, intent, count in rows:
            n = int(count)
            by_status[str(status)] = by_status.get(str(status), 0) + n
            by_intent[str(intent)] = by_intent.get(str(intent), 0) + n
        ((size,),) = self._db.run(
            "SELECT sum(pg_total_relation_size(t)) FROM unnest(ARRAY["
            "'intentusnet_records', 'intentusnet_lines', 'intentusnet_cache_hits'"
            "]::regclass[]) AS t"
        )
        total = int(size or 0)
        return StoreStats(sum(by_status.values()), by_status, by_intent, total)

    def change_probe(self, execution_id: str) -> Callable[[], object]:
        """A check whose answer changes whenever the record changes.

        One indexed query: the catalog row's line count, chain head and row
        version; ``None`` once the record is gone.
        """
        check_id(execution_id)

        def probe() -> object:
            rows = self._db.run(
                "SELECT lines, chain_head, xmin::text FROM intentusnet_records "
                "WHERE execution_id = %s",
                [execution_id],
            )
            return rows[0] if rows else None

        return probe

    # -- cache hits ---------------------------------------------------------------

    def record_cache_hit(
        self,
        source_execution_id: str,
        *,
        envelope_hash: str,
        intent_name: str,
        intent_version: str = "1.0",
        request_id: str | None = None,
        namespace: str = "default",
    ) -> str:
        """Note that a cached answer was served (one row, no record); its id."""
        line, hit_id, created = hit_line(
            source_execution_id,
            envelope_hash=envelope_hash,
            intent_name=intent_name,
            intent_version=intent_version,
            request_id=request_id,
            namespace=namespace,
        )
        self._db.run(
            "INSERT INTO intentusnet_cache_hits (hit_id, created_us, intent, line) "
            "VALUES (%s, %s, %s, %s)",
            [hit_id, parse_utc(created) or 0, intent_name, line],
        )
        return hit_id

    def cache_hits(
        self,
        *,
        intent: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
    ) -> _Hits:
        """Cache hits matching every filter given, newest first.

        A line whose bytes were edited is logged and left out.
        """
        since_us = None if since is None else micros_of(since)
        rows = self._db.run(
            """SELECT line FROM intentusnet_cache_hits
            WHERE (%s::text IS NULL OR intent = %s)
            AND (%s::bigint IS NULL OR created_us >= %s)
            ORDER BY created_us DESC, hit_id DESC LIMIT %s""",
            [intent, intent, since_us, since_us, limit],
        )
        data = b"".join(bytes(row[0]) for row in rows)
        return list(parse_hits(data, "cache-hit table"))

    def cache_hit_count(self) -> int:
        """How many cache hits are recorded."""
        ((count,),) = self._db.run("SELECT count(*) FROM intentusnet_cache_hits")
        return int(count)

    # -- internals ----------------------------------------------------------------

    def _held(self, execution_id: str) -> bool:
        """Whether any session (on any host) holds the record's writer lock."""
        key = lock_key(execution_id)
        rows = self._db.run(f"SELECT 1 FROM ({HELD}) AS held(k) WHERE k = %s", [key])
        return bool(rows)

    def _unlock(self, key: int) -> None:
        with contextlib.suppress(
            StoreError
        ):  # if the connection is gone, so is the lock
            self._db.run("SELECT pg_advisory_unlock(%s)", [key])


def _gone(_owner: JSONObject | None) -> bool:
    """For reading a record whose writer we know is not writing (we hold its lock)."""
    return False


def _row_values(row: CatalogRow) -> list[object]:
    """A catalog row as the records table's columns (unfinished = in_progress)."""
    values: list[object] = list(row)
    if row.status == RecordStatus.INCOMPLETE.value:
        values[6] = _IN_PROGRESS  # the lock, not the row, tells which it is
    values[7] = bool(row.replayable)
    return values


def _outcome_of(record: ExecutionRecord) -> list[object]:
    """A record's status, replayable, reason, agent and duration for its row."""
    h: ExecutionHeader = record.header
    status = _IN_PROGRESS if h.status in _UNFINISHED else h.status.value
    reason = h.replayable_reason
    return [
        status,
        h.replayable,
        None if reason is None else reason.value,
        h.agent,
        h.duration_ms,
    ]
