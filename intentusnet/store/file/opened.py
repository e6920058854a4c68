"""Logs of opened records: how a record is listed before its catalog row is written.

Catalog rows are written behind, in batches (see ``catalog_writer``). Until its
batch is committed, the row of a just-opened record is one line of its process's
log, ``<root>/opened/<pid>-<token>.rows``, appended with one ``write()`` when
the record opens: cheaper than a SQLite commit, and kept by the OS if the
process is then killed. A log is made under a dot name, locked with an
exclusive ``flock`` and only then renamed into place, so a log without a lock
belongs to a process that is gone (the kernel drops the lock however a process
dies). Once a log is large and its rows are committed, the owner starts a new
log and deletes the old one: a log only ever grows, and stays small.

A store's queries first copy the rows of other processes' logs into the
catalog's table of opened records (``OtherLogs.collect``); logs of processes
that are gone are deleted once copied.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import Final

import orjson

from ..._util.files import FILE_MODE, make_dirs
from ..._util.ids import uuid7_hex
from ..rows import CatalogRow

#: The directory of the logs under a store's root.
LOG_DIR: Final = "opened"
_SUFFIX: Final = ".rows"
_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
#: A log whose rows are all committed is replaced once it is this large (each
#: row is about 400 bytes): often enough to keep logs small, rarely enough that
#: making files (slow on some file systems) costs nothing per execution.
RENEW_BYTES: Final = 256 * 1024
#: A directory unchanged for this long cannot have changed unseen within the
#: same tick of the file system's clock.
_SETTLED_NS: Final = 50_000_000


def row_line(row: CatalogRow) -> bytes:
    """One log line: the row's columns as a JSON array."""
    return orjson.dumps(tuple(row)) + b"\n"


def parse_rows(data: bytes) -> list[CatalogRow]:
    """The rows of the complete lines of ``data``; damaged lines are skipped."""
    rows: list[CatalogRow] = []
    for line in data.split(b"\n")[:-1]:
        try:
            rows.append(CatalogRow(*orjson.loads(line)))
        except (orjson.JSONDecodeError, TypeError):
            continue  # torn by a failed write: its record is found by reindex
    return rows


class OpenedLog:
    """This process's log for one store, created on first use (again after fork)."""

    def __init__(self, root: str) -> None:
        self.directory = f"{root}/{LOG_DIR}"
        #: the current log's file name ("" when there is none)
        self.name = ""
        self._fd = -1
        self._pid = -1
        self._size = 0

    def append(self, row: CatalogRow) -> None:
        """Add one row with one ``write()``.

        Raises:
            OSError: the log could not be made or written (nothing is left of
                the line).
        """
        if self._fd < 0:  # also after fork: the child lets go of the log
            self._start()
        line = row_line(row)
        try:
            written = os.write(self._fd, line)
            if written != len(line):
                raise OSError(28, "short write to the log of opened records")
        except OSError:
            with contextlib.suppress(OSError):
                os.ftruncate(self._fd, self._size)
            raise
        self._size += written

    @property
    def empty(self) -> bool:
        """Whether this process's current log holds no rows."""
        return self._size == 0 or self._fd < 0

    def renew(self) -> None:
        """Once the log is large, start a new one and delete the old (committed) one.

        Rows already committed may stay in the log meanwhile: readers copying
        them again changes nothing. If no new log can be made, the old one is
        kept.
        """
        if self.empty or self._size < RENEW_BYTES:
            return
        old_fd, old_name = self._fd, self.name
        try:
            self._start()
        except OSError:
            return
        self._drop(old_fd, old_name)

    def remove(self) -> None:
        """Delete this process's log (its rows are committed); safe to repeat."""
        if self._pid == os.getpid() and self._fd >= 0:
            self._drop(self._fd, self.name)
        self._fd, self.name, self._pid, self._size = -1, "", -1, 0

    def release(self) -> None:
        """Stop using the log but leave it, for readers to copy and delete.

        Also what a forked child does with its parent's log: closing a copy of
        the descriptor leaves the parent's lock in place.
        """
        if self._fd >= 0:
            with contextlib.suppress(OSError):
                os.close(self._fd)
        self._fd, self.name, self._pid, self._size = -1, "", -1, 0

    def _start(self) -> None:
        make_dirs(Path(self.directory))
        name = f"{os.getpid()}-{uuid7_hex()}{_SUFFIX}"
        hidden = f"{self.directory}/.{name}"
        fd = os.open(hidden, _CREATE, FILE_MODE)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(hidden, f"{self.directory}/{name}")
        except OSError:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(hidden)
            raise
        self._fd, self.name, self._pid, self._size = fd, name, os.getpid(), 0

    def _drop(self, fd: int, name: str) -> None:
        # Deleted before its lock is released: a reader never sees it unlocked.
        with contextlib.suppress(OSError):
            os.unlink(f"{self.directory}/{name}")
        with contextlib.suppress(OSError):
            os.close(fd)


class OtherLogs:
    """Reads the logs of other processes (and other store objects) of one store."""

    def __init__(self, root: str) -> None:
        self.directory = f"{root}/{LOG_DIR}"
        #: per log: its inode and how far it was read
        self._read: dict[str, tuple[int, int]] = {}
        self._quiet_mtime = -1

    def collect(self, own: str) -> tuple[list[CatalogRow], list[str]]:
        """Rows added to other logs since last asked, and the logs found dead.

        A dead log's rows are all returned; delete it once they are committed.
        """
        try:
            mtime = os.stat(self.directory).st_mtime_ns
            if mtime == self._quiet_mtime and not self._read:
                return [], []  # nothing but our own log, as last time
            names = [n for n in os.listdir(self.directory) if n.endswith(_SUFFIX)]
        except OSError:
            return [], []  # no logs (or none we may read): the catalog alone
        rows: list[CatalogRow] = []
        dead: list[str] = []
        read: dict[str, tuple[int, int]] = {}
        for name in names:
            if name == own or name[0] == ".":
                continue
            path = f"{self.directory}/{name}"
            try:
                fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
            except OSError:
                continue  # deleted meanwhile (its rows are committed), or not ours
            try:
                alive = _locked(fd)
                inode, size = (found := os.fstat(fd)).st_ino, found.st_size
                seen_inode, offset = self._read.get(name, (inode, 0))
                if seen_inode != inode or not alive:
                    offset = 0
                data = os.pread(fd, size - offset, offset) if size > offset else b""
            except OSError:
                continue
            finally:
                os.close(fd)
            rows += parse_rows(data)
            if alive:
                read[name] = (inode, offset + data.rfind(b"\n") + 1)
            else:
                dead.append(path)
        self._read = read
        settled = time.time_ns() - mtime > _SETTLED_NS
        self._quiet_mtime = mtime if settled and not read and not dead else -1
        return rows, dead


def _locked(fd: int) -> bool:
    """Whether the log's owner still holds its lock (True if that cannot be told)."""
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return True  # no flock here: never take a log for dead
    return False
