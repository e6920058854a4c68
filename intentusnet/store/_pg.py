"""The PostgreSQL store's connection and schema: one connection, errors wrapped.

Imported only by ``store/postgres.py``, so nothing else pays for psycopg.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from hashlib import sha256
from typing import Any, Final, Literal, TypeAlias

import psycopg
from psycopg.conninfo import conninfo_to_dict

from ..errors import StoreError

#: The schema version this release writes and reads (the ``intentusnet_schema`` row).
SCHEMA_VERSION: Final = 1
Durability = Literal["flush", "fsync"]
#: A result row. psycopg types values by the query, which mypy cannot see.
Row: TypeAlias = tuple[Any, ...]
#: ``synchronous_commit`` for each durability (docs/store.md, "PostgreSQL").
SYNCHRONOUS_COMMIT: Final[dict[str, str]] = {"flush": "off", "fsync": "on"}
#: Default seconds to wait for a connection, unless the DSN says otherwise.
CONNECT_TIMEOUT: Final = 10
# Serialises schema creation among processes starting at once (any fixed key).
_SCHEMA_LOCK: Final = 0x1E7E_0005_C4E3_A001

SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS intentusnet_schema (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        version integer NOT NULL)""",
    # Derived data, rebuilt by reindex() from intentusnet_lines; the columns
    # are the file store's catalog row, plus the record's advisory-lock key.
    """CREATE TABLE IF NOT EXISTS intentusnet_records (
        execution_id text PRIMARY KEY,
        created_us bigint NOT NULL,
        created_utc text NOT NULL,
        intent text NOT NULL,
        intent_version text NOT NULL,
        envelope_hash text NOT NULL,
        status text NOT NULL,
        replayable boolean NOT NULL,
        reason text,
        agent text,
        duration_ms double precision,
        parent_id text,
        owner text,
        lines integer NOT NULL,
        size bigint NOT NULL,
        chain_head text NOT NULL,
        lock_key bigint NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_records_hash
        ON intentusnet_records (envelope_hash, created_us DESC, execution_id DESC)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_records_created
        ON intentusnet_records (created_us DESC, execution_id DESC)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_records_intent
        ON intentusnet_records (intent, created_us DESC)""",
    # The records themselves: each sealed line, newline included, byte for byte.
    """CREATE TABLE IF NOT EXISTS intentusnet_lines (
        execution_id text NOT NULL
            REFERENCES intentusnet_records ON DELETE CASCADE,
        seq integer NOT NULL,
        line bytea NOT NULL,
        PRIMARY KEY (execution_id, seq))""",
    """CREATE TABLE IF NOT EXISTS intentusnet_cache_hits (
        hit_id text PRIMARY KEY,
        created_us bigint NOT NULL,
        intent text NOT NULL,
        line bytea NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_cache_hits_created
        ON intentusnet_cache_hits (created_us DESC, hit_id DESC)""",
)


def lock_key(execution_id: str) -> int:
    """The record's session advisory-lock key: 63 bits of a SHA-256 of its id."""
    digest = sha256(b"intentusnet-record:" + execution_id.encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


#: Keys of the advisory locks held now by any session on this database
#: (a bigint key shows in pg_locks as classid = high, objid = low 32 bits).
HELD: Final = """SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"""


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
                _create_schema(conn, self.where)
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

    def close(self) -> None:
        """Close the connection (the next call reconnects)."""
        with self.lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None


#: Connections inherited over fork(): kept, never closed, by the child.
_INHERITED: list[object] = []


def _create_schema(conn: psycopg.Connection[Row], where: str) -> None:
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_SCHEMA_LOCK])
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO intentusnet_schema (version) VALUES (%s) "
            "ON CONFLICT DO NOTHING",
            [SCHEMA_VERSION],
        )
        row = conn.execute("SELECT version FROM intentusnet_schema").fetchone()
    version = row[0] if row else None
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"PostgreSQL at {where}: the intentusnet tables are of schema version "
            f"{version}; this release uses version {SCHEMA_VERSION}. Upgrade "
            "intentusnet to use them."
        )
