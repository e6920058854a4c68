"""The PostgreSQL store's transparency log: the same tiles, as rows.

Each file of a log's C2SP tiles layout (``tile/...``, ``checkpoint``,
``checkpoint.cosigned``) is a row of ``intentusnet_log_tiles`` (origin, path,
the file's bytes), so a log here is byte for byte the one a file store would
hold, and is served, proved and audited by the same code (``tlog``).

An append is one transaction: it takes the log's transaction-scoped advisory
lock (``schema.log_lock``), so one appender at a time appends, on any host;
it reads the checkpoint and the right edge, writes the new tiles, bundles,
checkpoint and the leaves' index rows (``intentusnet_log_leaves``), and
commits. A sequencer killed at any point leaves nothing of its append: the
transaction is rolled back with its connection, and the lock goes with it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any, Final

import psycopg

from ...errors import (
    LogError,
    LogIntegrityError,
    RecordIntegrityError,
    RecordNotFound,
    StoreError,
    UnsupportedSchemaVersion,
)
from ...record.keys import PublicKey, SigningKey
from ...record.model import ExecutionRecord
from ...record.signing import KeyRing
from ...tlog.audit import RecordState, log_origin, record_state
from ...tlog.cadence import LogCadence
from ...tlog.leaf import LogLeaf
from ...tlog.log import TileLog
from ...tlog.publish import LogWitnesses, publish_checkpoint
from ...tlog.sequencer import LogSequencer
from .catalog import STATUS
from .connection import Connection
from .schema import HELD, log_lock

__all__ = [
    "PostgresLeafIndex",
    "PostgresTileLog",
    "open_sequencer",
    "pending_leaves",
    "record_states",
    "store_log",
    "store_logs",
]


class PostgresTileLog(TileLog):
    """A :class:`TileLog` whose files are rows of ``intentusnet_log_tiles``.

    ``db`` is a connection of its own (not the store's session: an append's
    transaction must not hold up the records' writes).
    """

    def __init__(
        self, db: Connection, origin: str, signing_key: SigningKey | None = None
    ) -> None:
        super().__init__(
            Path(f"{db.where}/log/{origin}"), origin=origin, signing_key=signing_key
        )
        self._db = db
        self._tx: psycopg.Connection[Any] | None = None

    def __repr__(self) -> str:
        return f"PostgresTileLog({self._db.where!r}, origin={self.origin!r})"

    def append(
        self,
        leaves: Sequence[bytes],
        *,
        select: Callable[[int], Sequence[bytes]] | None = None,
    ) -> int:
        """Append as :meth:`TileLog.append` does, in one transaction (module doc).

        Raises:
            LogError: no origin or key, or the database failed (nothing of
                this append is then in the log).
            LogIntegrityError: as for :meth:`TileLog.append`.
        """
        if self.origin is None or self._key is None:
            raise LogError("appending to a log needs its origin and signing key")
        chosen: list[tuple[int, list[bytes]]] = []

        def pick(size: int) -> Sequence[bytes]:
            found = list(leaves if select is None else select(size))
            chosen[:] = [(size, found)]
            return found

        with self._transaction() as conn:
            size = self._append((), self.origin, self._key, pick)
            for start, found in chosen:
                rows = _leaf_rows(self.origin, start, found)
                if rows:
                    with conn.cursor() as cursor:
                        cursor.executemany(
                            "INSERT INTO intentusnet_log_leaves VALUES "
                            "(%s, %s, %s, %s)",
                            rows,
                        )
            return size

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """The log's connection in a transaction holding the log's lock.

        Raises:
            LogError: the database failed (the transaction is rolled back).
        """
        assert self.origin is not None
        with self._db.lock:
            try:
                conn = self._db.session()
                with conn.transaction():
                    conn.execute(
                        "SELECT pg_advisory_xact_lock(%s)", [log_lock(self.origin)]
                    )
                    self._tx = conn
                    try:
                        yield conn
                    finally:
                        self._tx = None
            except StoreError as exc:
                raise LogError(str(exc)) from exc
            except psycopg.Error as exc:
                raise LogError(f"{self._db.where}: the log: {exc}") from exc

    # -- the storage seam (see TileLog) ------------------------------------------

    def _read(self, relative: str) -> bytes | None:
        sql = "SELECT data FROM intentusnet_log_tiles WHERE origin = %s AND path = %s"
        params = [self.origin or "", relative]
        if self._tx is not None:  # inside the append: what it wrote so far
            rows = self._tx.execute(sql, params).fetchall()
        else:
            try:
                rows = self._db.read(sql, params)
            except StoreError as exc:
                raise LogError(str(exc)) from exc
        return bytes(rows[0][0]) if rows else None

    def _write(self, relative: str, data: bytes) -> None:
        assert self._tx is not None
        self._tx.execute(
            "INSERT INTO intentusnet_log_tiles VALUES (%s, %s, %s) "
            "ON CONFLICT (origin, path) DO UPDATE SET data = excluded.data",
            [self.origin, relative, data],
        )

    def _begin_writes(self) -> None:
        pass  # rows need no folder

    def _discard_after(self, size: int) -> None:
        pass  # a killed append's rows were rolled back with it

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        with self._transaction():
            yield


class PostgresLeafIndex:
    """The leaves of one log by execution id: ``intentusnet_log_leaves``.

    Written in the transaction that appends the leaves, so always in step
    with the log (``catch_up`` and ``add`` have nothing to do).
    """

    def __init__(self, log: PostgresTileLog) -> None:
        self.log: Final = log
        self._origin = log.origin or ""

    def catch_up(self, size: int | None = None) -> int:
        """The log's size: the index is written with the leaves."""
        return self.log.size if size is None else size

    def add(self, start: int, leaves: Sequence[LogLeaf]) -> None:
        """Nothing: the append wrote the rows."""

    def holds(self, execution_id: str, chain_head: str) -> bool:
        """Whether some leaf is this record at this chain head."""
        return bool(
            self._read(
                "SELECT 1 FROM intentusnet_log_leaves WHERE origin = %s "
                "AND execution_id = %s AND chain_head = %s",
                [self._origin, execution_id, chain_head],
            )
        )

    def newest(self, execution_id: str) -> int | None:
        """The index of the record's newest leaf, or None."""
        rows = self._read(
            "SELECT max(leaf) FROM intentusnet_log_leaves WHERE origin = %s "
            "AND execution_id = %s",
            [self._origin, execution_id],
        )
        found = rows[0][0] if rows else None
        return None if found is None else int(found)

    def scanned(self) -> float:
        """0: the scan here is exact (``pending_leaves``), it needs no window."""
        return 0.0

    def mark_scanned(self, started: float) -> None:
        """Nothing to note (see :meth:`scanned`)."""

    def close(self) -> None:
        """Nothing held open (the log's connection is the store's to close)."""

    def _read(self, sql: str, params: Sequence[object]) -> list[Any]:
        tx = self.log._tx
        if tx is not None:  # under the append's lock: see what it sees
            return tx.execute(sql, params).fetchall()
        try:
            return self.log._db.read(sql, params)
        except StoreError as exc:
            raise LogError(str(exc)) from exc


def store_logs(db: Connection) -> list[PostgresTileLog]:
    """Every log of the store (an origin with a checkpoint), by origin."""
    rows = db.read(
        "SELECT origin FROM intentusnet_log_tiles WHERE path = 'checkpoint' "
        "ORDER BY origin"
    )
    return [PostgresTileLog(db, str(row[0])) for row in rows]


def store_log(
    db: Connection, key_id: str, signing_key: SigningKey | None = None
) -> PostgresTileLog:
    """The store's log of key ``key_id``: read only, or appendable with the key."""
    return PostgresTileLog(db, log_origin(key_id), signing_key)


def open_sequencer(
    db: Connection,
    load: Callable[[str], ExecutionRecord],
    key: SigningKey,
    cadence: LogCadence,
    witnesses: LogWitnesses | None = None,
) -> LogSequencer:
    """The sequencer appending the records the store closes to the key's log.

    ``db`` is the log's own connection; ``load`` reads a record (checked).
    """
    log = store_log(db, key.key_id, key)
    index = PostgresLeafIndex(log)

    def pending(since: float, before: float) -> tuple[list[LogLeaf], float]:
        return pending_leaves(db, load, key.key_id), before

    publish = None
    if witnesses is not None:
        publish = partial(publish_checkpoint, log, key.public_key, witnesses)
    return LogSequencer(log, cadence, pending, None, publish, index)


#: The closed records whose chain head is no leaf of the log, oldest first.
_PENDING: Final = f"""WITH held(k) AS ({HELD})
    SELECT r.execution_id FROM intentusnet_records r
    WHERE {STATUS} <> 'in_progress'
    AND NOT EXISTS (SELECT 1 FROM intentusnet_log_leaves l WHERE l.origin = %s
        AND l.execution_id = r.execution_id AND l.chain_head = r.chain_head)
    ORDER BY r.created_us, r.execution_id"""


def pending_leaves(
    db: Connection, load: Callable[[str], ExecutionRecord], key_id: str
) -> list[LogLeaf]:
    """The leaves of the closed records that are not leaves yet (one query).

    Only records signed by ``key_id``, or unsigned. The index is in the
    database, so the scan is exact: no window of times, as the file store
    needs. Records that fail their checks are left out: the audit names them.
    """
    found = []
    for (execution_id,) in db.read(_PENDING, [log_origin(key_id)]):
        record = _load(load, str(execution_id))
        if record is None or record.header.key_id not in (key_id, None):
            continue
        header = record.header
        found.append(LogLeaf(header.execution_id, header.chain_head, header.key_id))
    return found


def record_states(
    db: Connection, load: Callable[[str], ExecutionRecord], key: PublicKey
) -> Iterator[RecordState]:
    """Every record of the store, as the audit judges it against the leaves.

    Its age is since it closed (created, plus its duration), or was created.
    """
    ring = KeyRing([key])
    now = time.time()
    rows = db.read(
        "SELECT execution_id, created_us, coalesce(duration_ms, 0) "
        "FROM intentusnet_records ORDER BY execution_id"
    )
    for execution_id, created_us, duration_ms in rows:
        age = now - int(created_us) / 1e6 - float(duration_ms) / 1e3
        try:
            record = load(str(execution_id))
        except RecordNotFound:
            continue  # deleted meanwhile
        except (RecordIntegrityError, UnsupportedSchemaVersion) as exc:
            yield RecordState(str(execution_id), True, None, frozenset(), 0.0, str(exc))
            continue
        yield record_state(record, key, ring, age)


def _load(
    load: Callable[[str], ExecutionRecord], execution_id: str
) -> ExecutionRecord | None:
    try:
        return load(execution_id)
    except (RecordNotFound, RecordIntegrityError, UnsupportedSchemaVersion):
        return None


def _leaf_rows(origin: str, start: int, leaves: list[bytes]) -> list[list[object]]:
    rows: list[list[object]] = []
    for at, data in enumerate(leaves, start):
        try:
            leaf = LogLeaf.from_bytes(data)
        except LogIntegrityError:
            continue  # not a record's leaf: nothing to index
        rows.append([origin, at, leaf.execution_id, leaf.indexed_head])
    return rows
