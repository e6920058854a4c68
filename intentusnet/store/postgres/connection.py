"""The PostgreSQL store's connections: one session that writes, a pool that reads.

The session connection makes every write and holds every advisory lock (a
record's writer lock, a cache flight), so a lock lives exactly as long as the
connection whose statements it guards. Reads take a connection from a pool
(psycopg_pool), so threads serving cache hits, replays and listings do not
queue behind one connection. Errors are wrapped in :class:`StoreError` naming
the server, never the password.

Imported only by the PostgreSQL store's modules (``store/postgres/store.py`` and its
``_pg_*`` parts), so nothing else pays for psycopg.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from ...errors import StoreError
from .schema import create_schema

Durability = Literal["flush", "fsync"]
#: A result row. psycopg types values by the query, which mypy cannot see.
Row: TypeAlias = tuple[Any, ...]
#: ``synchronous_commit`` for each durability (docs/store.md, "PostgreSQL").
SYNCHRONOUS_COMMIT: Final[dict[str, str]] = {"flush": "off", "fsync": "on"}
#: Default seconds to wait for a connection, unless the DSN says otherwise.
CONNECT_TIMEOUT: Final = 10
#: Default number of connections in the read pool.
POOL_SIZE: Final = 4


def describe(dsn: str) -> str:
    """``host:port/dbname`` of a DSN, for messages: never the password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "an unparsable DSN"
    host = str(parts.get("host") or parts.get("hostaddr") or "the default socket")
    port = str(parts.get("port") or "5432")
    return f"{host}:{port}/{parts.get('dbname') or parts.get('user') or ''}"


def _connect_timeout(dsn: str) -> float:
    """The DSN's ``connect_timeout`` (seconds) if above 0, else the default."""
    try:
        given = float(str(conninfo_to_dict(dsn).get("connect_timeout") or 0))
    except (psycopg.Error, ValueError):
        return CONNECT_TIMEOUT  # connecting will say what is wrong with the DSN
    return given if given > 0 else CONNECT_TIMEOUT


class Connection:
    """A session connection for writes and locks, and a pool for reads.

    The session is used by one thread at a time (``lock``), in autocommit
    mode. A lost connection raises :class:`StoreError` naming the server; the
    next call connects again (a fresh session: locks of the old one are gone).
    The read pool is opened on the first read, after the session has connected
    (so a wrong DSN fails at once with libpq's reason, and the schema exists).
    """

    def __init__(self, dsn: str, durability: Durability, pool_size: int) -> None:
        self.dsn = dsn
        self.where = describe(dsn)
        self.lock = threading.RLock()
        self.pool_size = pool_size
        self._sync = SYNCHRONOUS_COMMIT[durability]
        self._timeout = _connect_timeout(dsn)
        self._conn: psycopg.Connection[Row] | None = None
        self._pool: ConnectionPool[psycopg.Connection[Row]] | None = None
        self._pid = self._pool_pid = 0
        self._schema_ready = False

    def session(self) -> psycopg.Connection[Row]:
        """The live connection, connecting (and creating the schema) if needed."""
        conn = self._conn
        if conn is not None and not conn.closed and self._pid == os.getpid():
            return conn
        if conn is not None and self._pid != os.getpid():
            _INHERITED.append(conn)  # the parent's: closing it here would end it
        elif conn is not None:
            conn.close()
        self._conn = None
        try:
            conn = psycopg.connect(
                self.dsn, autocommit=True, connect_timeout=max(1, round(self._timeout))
            )
        except psycopg.Error as exc:
            raise self.error("could not connect", exc) from exc
        try:
            conn.execute(
                "SELECT set_config('synchronous_commit', %s, false)", [self._sync]
            )
            if not self._schema_ready:
                create_schema(conn, self.where)
        except BaseException as exc:
            conn.close()
            if isinstance(exc, psycopg.Error):
                raise self.error("could not set up the session", exc) from exc
            raise
        self._schema_ready = True
        self._conn, self._pid = conn, os.getpid()
        return conn

    def error(self, doing: str, exc: BaseException) -> StoreError:
        """A StoreError for a failure of ``doing``, naming the server, not secrets."""
        detail = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        password = conninfo_to_dict(self.dsn).get("password")
        if password:
            detail = detail.replace(str(password), "***")
        lost = isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)
        what = "connection lost" if lost else type(exc).__name__
        if isinstance(exc, PoolTimeout):
            what = f"no connection free within {self._timeout:g} s"
            detail = f"all {self.pool_size} of the read pool are busy or unreachable"
        return StoreError(f"PostgreSQL at {self.where}: {doing}: {what}: {detail}")

    def run(
        self, sql: str, params: Sequence[object] = (), *, doing: str = "query failed"
    ) -> list[Row]:
        """Execute one statement; return its rows (``[]`` if it returns none)."""
        with self.lock:
            conn = self.session()
            try:
                return _rows(conn.execute(sql, params))
            except psycopg.Error as exc:
                raise self.error(doing, exc) from exc

    def read(
        self, sql: str, params: Sequence[object] = (), *, doing: str = "query failed"
    ) -> list[Row]:
        """Execute one statement that writes nothing, on a pooled connection.

        A pooled connection the server ended while it was idle (a restart, a
        failover, a DBA) is dropped and the read runs once more on another.
        """
        pool = self._readers()
        try:
            with pool.connection() as conn:
                try:
                    return _rows(conn.execute(sql, params))
                except psycopg.OperationalError:
                    if not conn.broken:
                        raise
            # The pool has dropped the dead connection: once more, on another.
            with pool.connection() as conn:
                return _rows(conn.execute(sql, params))
        except psycopg.Error as exc:
            raise self.error(doing, exc) from exc

    def _readers(self) -> ConnectionPool[psycopg.Connection[Row]]:
        """The read pool of this process, opened on first use."""
        pool = self._pool
        if pool is not None and self._pool_pid == os.getpid():
            return pool
        with self.lock:
            if self._pool is not None and self._pool_pid == os.getpid():
                return self._pool
            if self._pool is not None:
                _INHERITED.append(self._pool)  # the parent's: its threads are not here
            self.session()
            pool = ConnectionPool(
                self.dsn,
                kwargs={
                    "autocommit": True,
                    "connect_timeout": max(1, round(self._timeout)),
                },
                min_size=1,
                max_size=self.pool_size,
                timeout=self._timeout,
                name=f"intentusnet {self.where}",
                open=False,
            )
            try:
                pool.open(wait=True, timeout=self._timeout)
            except psycopg.Error as exc:
                pool.close()
                raise self.error("could not open the read pool", exc) from exc
            self._pool, self._pool_pid = pool, os.getpid()
            return pool

    def run_many(
        self, sql: str, rows: Sequence[Sequence[object]], *, doing: str = "query failed"
    ) -> None:
        """Execute one statement for each of ``rows`` (pipelined: one round trip)."""
        if not rows:
            return
        with self.lock:
            conn = self.session()
            try:
                with conn.cursor() as cursor:
                    cursor.executemany(sql, rows)
            except psycopg.Error as exc:
                raise self.error(doing, exc) from exc

    def close(self) -> None:
        """Close the session and the read pool (the next call reconnects)."""
        with self.lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            if self._pool is not None and self._pool_pid == os.getpid():
                self._pool.close()
            self._conn = self._pool = None


def _rows(cursor: psycopg.Cursor[Row]) -> list[Row]:
    """A statement's rows; ``[]`` for one that returns none.

    ``rownumber`` says so without building the result's column descriptions.
    """
    return cursor.fetchall() if cursor.rownumber is not None else []


#: Connections and pools inherited over fork(): kept, never closed, by the child.
_INHERITED: list[object] = []
