"""The file store's cache-hit journal: a file of sealed lines per UTC day.

Lines are written with one ``write()`` on a file opened with ``O_APPEND``, so
several processes can append to one journal. Retention deletes whole day files,
as it deletes whole records. The line format is ``store.hits``'.
"""

from __future__ import annotations

import contextlib
import os
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final

from ..._util.files import FILE_MODE, make_dirs
from ..._util.time import micros_of
from ..hits import HITS_DIR, CacheHit, Hit, hit_line, parse_hits, select

__all__ = ["HitJournal"]

_OPEN: Final = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
_SUFFIX: Final = ".jsonl"


class HitJournal:
    """Appends hits to, and reads them from, a store's ``cache-hits`` directory.

    Safe for several threads (appends take a lock) and several processes
    (each line is one ``O_APPEND`` write).
    """

    def __init__(self, root: Path) -> None:
        self.directory = root / HITS_DIR
        self._dir = os.fspath(self.directory)
        self._lock = threading.Lock()
        self._fd = -1
        self._day = ""
        self._pid = -1

    def append(self, hit: Hit) -> str:
        """Append one hit; return its id.

        Raises:
            OSError: the journal could not be written.
        """
        line, hit_id, created = hit_line(hit)
        day = created[:10]
        with self._lock:
            fd = self._fd
            if day != self._day or self._pid != os.getpid():
                fd = self._open(day)
            if os.write(fd, line) != len(line):
                raise OSError(28, "short write to the cache-hit journal")
        return hit_id

    def _open(self, day: str) -> int:
        if self._fd >= 0 and self._pid == os.getpid():
            os.close(self._fd)
        self._fd = -1  # one inherited over fork() is left to the parent
        path = f"{self._dir}/{day}{_SUFFIX}"
        try:
            fd = os.open(path, _OPEN, FILE_MODE)
        except FileNotFoundError:
            make_dirs(self.directory)
            fd = os.open(path, _OPEN, FILE_MODE)
        self._fd, self._day, self._pid = fd, day, os.getpid()
        return fd

    def close(self) -> None:
        """Close the journal file (it reopens on the next append)."""
        with self._lock:
            if self._fd >= 0 and self._pid == os.getpid():
                with contextlib.suppress(OSError):
                    os.close(self._fd)
            self._fd, self._day = -1, ""

    def days(self) -> list[str]:
        """The journal's day files, newest first (``YYYY-MM-DD``)."""
        try:
            names = os.listdir(self._dir)
        except (FileNotFoundError, NotADirectoryError):
            return []
        days = [
            name[: -len(_SUFFIX)]
            for name in names
            if name.endswith(_SUFFIX) and _is_day(name[: -len(_SUFFIX)])
        ]
        return sorted(days, reverse=True)

    def read(
        self,
        *,
        intent: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
    ) -> list[CacheHit]:
        """Hits matching every filter given, newest first."""
        since_us = None if since is None else micros_of(since)
        found: list[CacheHit] = []
        for day in self.days():
            if since_us is not None and _day_end_us(day) <= since_us:
                break  # this day and every older one ended before ``since``
            hits = parse_hits(self._read_day(day), f"cache-hit journal {day}")
            found += select(hits, intent=intent, since_us=since_us)
            if limit is not None and len(found) >= limit:
                break  # older days hold only older hits
        return found if limit is None else found[:limit]

    def count(self) -> int:
        """How many hits the journal holds (complete lines, not verified)."""
        return sum(self._read_day(day).count(b"\n") for day in self.days())

    def size(self) -> int:
        """Bytes the journal files take."""
        total = 0
        for day in self.days():
            with contextlib.suppress(OSError):
                total += os.stat(f"{self._dir}/{day}{_SUFFIX}").st_size
        return total

    def prune(self, cutoff: datetime) -> None:
        """Delete the day files holding only hits older than ``cutoff``."""
        cutoff_us = micros_of(cutoff)
        for day in self.days():
            if _day_end_us(day) <= cutoff_us:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self._dir}/{day}{_SUFFIX}")

    def _read_day(self, day: str) -> bytes:
        try:
            with open(f"{self._dir}/{day}{_SUFFIX}", "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return b""


def _is_day(text: str) -> bool:
    try:
        datetime.strptime(text, "%Y-%m-%d")
    except ValueError:
        return False
    return len(text) == 10


def _day_end_us(day: str) -> int:
    start = datetime.strptime(day, "%Y-%m-%d").replace(tzinfo=UTC)
    return micros_of(start + timedelta(days=1))
