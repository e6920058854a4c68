"""The PostgreSQL store's connection: one connection, errors wrapped.

Imported only by the PostgreSQL store's modules (``store/postgres.py`` and its
``_pg_*`` parts), so nothing else pays for psycopg.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from typing import Any, Final, Literal, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..errors import StoreError
from ._pg_schema import create_schema

Durability = Literal["flush", "fsync"]
#: A result row. psycopg types values by the query, which mypy cannot see.
Row: TypeAlias = tuple[Any, ...]
#: ``synchronous_commit`` for each durability (docs/store.md, "PostgreSQL").
SYNCHRONOUS_COMMIT: Final[dict[str, str]] = {"flush": "off", "fsync": "on"}
#: Default seconds to wait for a connection, unless the DSN says otherwise.
CONNECT_TIMEOUT: Final = 10


def describe(dsn: str) -> str:
    """``host:port/dbname`` of a DSN, for messages: never the password."""
    try:
        parts = conninfo_to_dict(dsn)
    except psycopg.Error:
        return "an unparsable DSN"
    host = str(parts.get("host") or parts.get("hostaddr") or "the default socket")
    port = str(parts.get("port") or "5432")
    return f"{host}:{port}/{parts.get('dbname') or parts.get('user') or ''}"


class Connection:
    """One psycopg connection in autocommit mode, used by one thread at a time.

    A lost connection raises :class:`StoreError` naming the server; the next
    call connects again (a fresh session: locks of the old one are gone).
    """

    def __init__(self, dsn: str, durability: Durability) -> None:
        self.dsn = dsn
        self.where = describe(dsn)
        self.lock = threading.RLock()
        self._sync = SYNCHRONOUS_COMMIT[durability]
        self._conn: psycopg.Connection[Row] | None = None
        self._pid = 0
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
        params = conninfo_to_dict(self.dsn)
        timeout = params.get("connect_timeout", CONNECT_TIMEOUT)
        try:
            conn = psycopg.connect(self.dsn, autocommit=True, connect_timeout=timeout)
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
        return StoreError(f"PostgreSQL at {self.where}: {doing}: {what}: {detail}")

    def run(
        self, sql: str, params: Sequence[object] = (), *, doing: str = "query failed"
    ) -> list[Row]:
        """Execute one statement; return its rows (``[]`` if it returns none)."""
        with self.lock:
            conn = self.session()
            try:
                cursor = conn.execute(sql, params)
                return cursor.fetchall() if cursor.description else []
            except psycopg.Error as exc:
                raise self.error(doing, exc) from exc

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
        """Close the connection (the next call reconnects)."""
        with self.lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


#: Connections inherited over fork(): kept, never closed, by the child.
_INHERITED: list[object] = []
