"""One SQLite file shared by many processes: WAL, busy timeout, safe connections.

Each process opens its own connection (one inherited over ``fork()`` is never
used); threads share it under a lock. A process that may write the file and its
directory opens it for writing, and writes only when asked to (opening a sound
database of the current layout writes nothing); one that may not opens it read
only. A database found corrupt (SQLite says so, or a caller's check does) is
moved aside (``<name>.corrupt-<time>``) when it can be, and
:class:`DatabaseCorrupt` is raised either way: the caller keeps only derived
data in it, which it rebuilds.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, TypeVar

from ..._util.sqlite import says_damaged
from .. import logger

_T = TypeVar("_T")
#: How long a writer waits for another process's lock, in seconds.
_TIMEOUT_S: Final = 30.0
_OPEN: weakref.WeakSet[Database] = weakref.WeakSet()

#: Creates or updates the schema of a database, inside a write transaction;
#: ``fresh`` says the file was just created.
Setup = Callable[[sqlite3.Connection, bool], None]
#: Whether a database's schema is current, reading only (no setup needed).
Ready = Callable[[sqlite3.Connection], bool]


class DatabaseCorrupt(sqlite3.DatabaseError):
    """The database is damaged; it was moved aside if this process could."""


class DatabaseReadOnly(sqlite3.OperationalError):
    """The database would need writing (made, set up, rebuilt) and may not be."""


class Database:
    """A SQLite file opened lazily, per process, with corruption detection.

    Args:
        path: the database file (created with mode 0600 if missing).
        setup: run in a write transaction on a new connection, unless
            ``ready`` says the schema is current.
        ready: reads whether the schema is current; may raise
            :class:`DatabaseCorrupt` for a schema that cannot be right.
        functions: SQL functions every connection has (the schema's triggers
            may call them).
        on_reset: called after a corrupt database was moved aside.
    """

    def __init__(
        self,
        path: Path,
        setup: Setup,
        *,
        ready: Ready = lambda db: False,
        functions: Mapping[str, Callable[..., int]] | None = None,
        on_reset: Callable[[], None] = lambda: None,
    ) -> None:
        self.path = path
        self._setup = setup
        self._ready = ready
        self._functions = dict(functions or {})
        self._on_reset = on_reset
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None
        self._pid = -1
        #: whether this process may not write the file (known once connected)
        self.read_only = False
        self._new = False  # the file was just made (set by _open)
        _OPEN.add(self)

    def run(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` on this process's connection, under the lock.

        Raises:
            DatabaseCorrupt: the database is damaged (moved aside if possible).
            DatabaseReadOnly: it needs writing, and this process may not.
            sqlite3.Error: any other failure.
        """
        with self._lock:
            try:
                return operation(self._connection())
            except (sqlite3.DatabaseError, UnicodeDecodeError) as exc:
                # Text that is not UTF-8 (in a row, or in SQLite's own message
                # about a damaged schema) can only be a damaged byte: none is
                # written here.
                if isinstance(exc, sqlite3.DatabaseError) and not is_corrupt(exc):
                    raise
                if not self.read_only:
                    self._quarantine(exc)
                if isinstance(exc, DatabaseCorrupt):
                    raise
                raise DatabaseCorrupt(str(exc)) from exc

    def transaction(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` in one write transaction (rolled back on error)."""
        return self.run(lambda db: _in_transaction(db, operation))

    def read(self, operation: Callable[[sqlite3.Connection], _T]) -> _T:
        """Run ``operation`` in one read transaction: one snapshot for its queries."""
        return self.run(lambda db: _in_snapshot(db, operation))

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
        self.read_only = not may_write(self.path)
        db = self._open_read_only() if self.read_only else self._open()
        for name, function in self._functions.items():
            db.create_function(name, -1, function, deterministic=True)
        try:
            if self.read_only:
                if not self._ready(db):
                    raise DatabaseReadOnly(
                        f"{self.path} is of an older layout and may not be written"
                    )
            else:
                _use_wal(db)
                db.execute("PRAGMA synchronous = NORMAL")
                if not self._ready(db):  # new, or of another layout: a write
                    _in_transaction(db, lambda conn: self._setup(conn, self._new))
        except BaseException:
            db.close()
            raise
        self._conn, self._pid = db, os.getpid()
        return db

    def _open(self) -> sqlite3.Connection:
        self._new = not self.path.exists()
        if self._new:
            # Created here so that its mode is ours, not the umask's.
            os.close(os.open(self.path, os.O_CREAT | os.O_WRONLY | os.O_CLOEXEC, 0o600))
        return sqlite3.connect(
            self.path,
            timeout=_TIMEOUT_S,
            isolation_level=None,  # transactions are explicit
            check_same_thread=False,  # threads share it under self._lock
        )

    def _open_read_only(self) -> sqlite3.Connection:
        if not self.path.exists():
            raise DatabaseReadOnly(f"{self.path} does not exist and may not be made")
        uri = self.path.resolve().as_uri()
        db: sqlite3.Connection | None = None
        try:
            db = sqlite3.connect(
                f"{uri}?mode=ro",
                uri=True,
                timeout=_TIMEOUT_S,
                isolation_level=None,
                check_same_thread=False,
            )
            db.execute("SELECT count(*) FROM sqlite_master").fetchone()
            return db
        except sqlite3.OperationalError:
            # A WAL database needs its -shm file, which a read-only directory
            # cannot hold if no writer made it ("unable to open", "attempt to
            # write a readonly database"): read the file as it is.
            if db is not None:
                db.close()
        wal = Path(f"{self.path}-wal")
        if wal.exists() and wal.stat().st_size > 0:
            # Rows a writer has in its log, which this process cannot read:
            # the file alone would answer from an older state.
            raise DatabaseReadOnly(f"{self.path}: its write-ahead log cannot be read")
        return sqlite3.connect(
            f"{uri}?mode=ro&immutable=1",
            uri=True,
            isolation_level=None,
            check_same_thread=False,
        )

    def _quarantine(self, exc: Exception) -> None:
        if self._conn is not None:
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
        self._conn = None
        aside = f"{self.path}.corrupt-{time.time_ns()}"
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.replace(f"{self.path}{suffix}", aside + suffix)
        logger.warning(
            "catalog %s is corrupt (%s); moved it to %s and starting a new one, "
            "which is rebuilt from the record files",
            self.path,
            exc,
            aside,
        )
        self._on_reset()


def may_write(path: Path) -> bool:
    """Whether this process may write ``path`` and make files beside it.

    False on a read-only mount or without the permissions; SQLite needs both
    (its ``-wal`` and ``-shm`` files live beside the database).
    """
    if not os.access(path.parent, os.W_OK):
        return False
    return not path.exists() or os.access(path, os.W_OK)


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


def _in_snapshot(
    db: sqlite3.Connection, operation: Callable[[sqlite3.Connection], _T]
) -> _T:
    db.execute("BEGIN")  # deferred: a read transaction, no lock taken
    try:
        return operation(db)
    finally:
        if db.in_transaction:
            db.execute("COMMIT")


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


def is_corrupt(exc: sqlite3.DatabaseError) -> bool:
    """Whether an error of SQLite's, or of a row's seal, says the file is damaged."""
    return (
        isinstance(exc, DatabaseCorrupt)
        or says_damaged(exc)
        or "Could not decode to UTF-8" in str(exc)  # see run()
    )


def _after_fork() -> None:
    # A lock held by another thread at fork time would stay held in the child.
    for database in list(_OPEN):
        database._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork)
