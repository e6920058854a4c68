"""One SQLite file shared by many processes: WAL, busy timeout, safe connections.

Each process opens its own connection (one inherited over ``fork()`` is never
used); threads share it under a lock. A database that SQLite reports as corrupt
is moved aside (``<name>.corrupt-<time>``) and a fresh one is started: the caller
keeps only derived data in it, which it can rebuild.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Final, TypeVar

from . import _log

_T = TypeVar("_T")
_CORRUPT: Final = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB
_OPEN: weakref.WeakSet[Database] = weakref.WeakSet()

#: Creates or checks the schema of a database, inside a write transaction;
#: ``fresh`` says the file was just created.
Setup = Callable[[sqlite3.Connection, bool], None]


class Database:
    """A SQLite file opened lazily, per process, with corruption recovery.

    Args:
        path: the database file (created with mode 0600 if missing).
        setup: run in a write transaction on every new connection.
        on_reset: called after a corrupt database was moved aside.
        timeout_s: how long a writer waits for another process's lock.
    """

    def __init__(
        self,
        path: Path,
        setup: Setup,
        *,
        on_reset: Callable[[], None] = lambda: None,
        timeout_s: float = 30.0,
    ) -> None:
        self.path = path
        self._setup = setup
        self._on_reset = on_reset
        self._timeout = timeout_s
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        _OPEN.add(self)

    def run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` on this process's connection, under the lock."""
        with self._lock:
            try:
                return operation(self._connection())
            except sqlite3.DatabaseError as exc:
                if not _is_corrupt(exc):
                    raise
                self._quarantine(exc)
                return operation(self._connection())

    def transaction(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` in one write transaction (rolled back on error)."""
        return self.run(lambda db: _in_transaction(db, operation))

    def close(self) -> None:
        """Close this process's connection; the next use opens a new one."""
        with self._lock:
            if self._conn is not None and self._pid == os.getpid():
                self._conn.close()
            self._conn = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        self._conn = None  # inherited over fork(): neither use nor close it
        fresh = not self.path.exists()
        if fresh:
            # Created here so that its mode is ours, not the umask's.
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        db = sqlite3.connect(
            self.path,
            timeout=self._timeout,
            isolation_level=None,  # transactions are explicit
            check_same_thread=False,  # threads share it under self._lock
        )
        try:
            _use_wal(db)
            db.execute("PRAGMA synchronous = NORMAL")
            _in_transaction(db, lambda conn: self._setup(conn, fresh))
        except BaseException:
            db.close()
            raise
        self._conn, self._pid = db, os.getpid()
        return db

    def _quarantine(self, exc: sqlite3.DatabaseError) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
        self._conn = None
        aside = f"{self.path}.corrupt-{time.time_ns()}"
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{self.path}{suffix}", aside + suffix)
        _log.warning(
            "catalog %s is corrupt (%s); moved it to %s and starting a new one, "
            "which is rebuilt from the record files",
            self.path,
            exc,
            aside,
        )
        self._on_reset()


def _in_transaction(
    db: sqlite3.Connection, operation: Callable[[sqlite3.Connection], _T]
) -> _T:
    db.execute("BEGIN IMMEDIATE")
    try:
        result = operation(db)
        db.execute("COMMIT")
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise
    return result


def _use_wal(db: sqlite3.Connection) -> None:
    for attempt in range(50):
        try:
            db.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            # Switching a brand-new file to WAL needs a moment alone with it.
            if "locked" not in str(exc) or attempt == 49:
                raise
            time.sleep(0.01)


def _is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _CORRUPT:
        return True
    text = str(exc)
    return "not a database" in text or "malformed" in text


def _after_fork() -> None:
    # A lock held by another thread at fork time would stay held in the child.
    for database in list(_OPEN):
        database._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
