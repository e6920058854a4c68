"""The replay cache's disk tier: diskcache behind a seam that never raises.

Every operation either works or is logged and answers "nothing": routing must
not fail because a cache did. A database SQLite reports as corrupt is moved
aside (``<directory>.corrupt-<time>``), a fresh one is started, and the owner is
told (``on_reset``) so that it can rebuild the entries from the store, which is
the truth. ``read_stats`` reads a directory's persisted counts without a store
(for ``intentusnet stats``).
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, TypeVar

import diskcache  # type: ignore[import-untyped]  # ships no types

from .._util.files import make_dirs
from .._util.jsonvalue import JSONObject, wire_form
from .._util.sqlite import says_damaged
from ..errors import CacheError

__all__ = [
    "CACHE_DIR",
    "CacheStats",
    "DiskTier",
    "counter_key",
    "read_stats",
]

_log = logging.getLogger("intentusnet.cache")
_T = TypeVar("_T")
#: A reset within this many seconds of the last one is not tried again: a
#: database that keeps failing is left alone rather than rebuilt in a loop.
_RESET_PAUSE_S: Final = 1.0
#: How long an operation waits for another process's write lock before it is
#: given up (a miss, or an answer not stored): a cache must not stall routing.
_BUSY_TIMEOUT_S: Final = 2.0
#: Keys of the persisted hit and miss counters start with this; entry keys are
#: ``<namespace>|<hash>``, and a namespace is neither empty nor holds ``|``.
STATS_PREFIX: Final = "|stats|"
#: The disk tier's directory under a store's root, when none is given.
CACHE_DIR: Final = "replay-cache"


@dataclass(frozen=True, slots=True)
class CacheStats:
    """Counts of one cache namespace.

    Attributes:
        namespace: the namespace counted.
        hits: answers served without running agents (in-flight answers shared
            with identical concurrent requests included).
        misses: requests that ran agents.
        entries: answers the disk tier holds for this namespace.
        bytes: bytes the cache directory takes (all namespaces).
        directory: the cache directory.

    Hits and misses are totals over every process using the directory, brought
    up to date at most once a second and when a cache is closed. Added in 0.1.0.
    """

    namespace: str
    hits: int
    misses: int
    entries: int
    bytes: int
    directory: str

    def to_json(self) -> JSONObject:
        """Return the camelCase form ``intentusnet stats --json`` prints."""
        return wire_form(self)


class DiskTier:
    """One diskcache directory, bounded by ``size_limit`` bytes.

    Args:
        directory: created with mode 0700 if missing (the entries hold answers).
        size_limit: entries are evicted, oldest stored first, beyond this;
            ``None`` keeps the limit the database was created with.
        on_reset: called after a corrupt database was replaced by an empty one.

    Raises:
        CacheError: the directory or database cannot be opened at all.
    """

    def __init__(
        self,
        directory: Path,
        size_limit: int | None,
        on_reset: Callable[[], None] = lambda: None,
    ) -> None:
        self.directory = directory
        self._size_limit = size_limit
        self._on_reset = on_reset
        self._lock = threading.Lock()
        self._last_reset = 0.0
        self._cache: diskcache.Cache | None = None
        #: the database was found corrupt when opened and started afresh; the
        #: owner rebuilds it (``on_reset`` is for later resets)
        self.was_reset = False
        try:
            try:
                self._cache = self._open()
            except sqlite3.DatabaseError as exc:
                if not says_damaged(exc):
                    raise
                self._quarantine(exc)
                self._cache = self._open()
                self.was_reset = True
        except (sqlite3.Error, OSError) as exc:
            raise CacheError(f"cache {directory} cannot be opened: {exc}") from exc

    def _open(self) -> diskcache.Cache:
        make_dirs(self.directory)
        # Getting an entry must not write: "least-recently-stored" eviction keeps
        # reads read-only (LRU would update a row on every hit).
        settings: dict[str, object] = {
            "eviction_policy": "least-recently-stored",
            "cull_limit": 16,
        }
        if self._size_limit is not None:
            settings["size_limit"] = self._size_limit
        return diskcache.Cache(
            os.fspath(self.directory), timeout=_BUSY_TIMEOUT_S, **settings
        )

    # -- operations (none raises) ---------------------------------------------------

    def get(self, key: str) -> bytes | None:
        """The value stored under ``key``, or ``None``."""
        found = self._run(lambda cache: cache.get(key), None)
        return found if isinstance(found, bytes) else None

    def set(self, key: str, value: bytes, expire: float | None) -> bool:
        """Store ``value`` (expiring after ``expire`` seconds); False on failure."""
        return bool(
            self._run(lambda cache: cache.set(key, value, expire=expire), False)
        )

    def delete(self, key: str) -> None:
        """Forget ``key``."""
        self._run(lambda cache: cache.delete(key), False)

    def keys(self, prefix: str) -> list[str]:
        """Every key starting with ``prefix``."""

        def scan(cache: diskcache.Cache) -> list[str]:
            return [
                k
                for k in cache.iterkeys()
                if isinstance(k, str) and k.startswith(prefix)
            ]

        return self._run(scan, [])

    def add_to(self, key: str, delta: int) -> None:
        """Add ``delta`` to a persisted counter."""
        if delta:
            self._run(lambda cache: cache.incr(key, delta, default=0), 0)

    def counter(self, key: str) -> int:
        """A persisted counter's value (0 if never set)."""
        found = self._run(lambda cache: cache.get(key, 0), 0)
        return found if isinstance(found, int) else 0

    def volume(self) -> int:
        """Bytes the cache takes on disk (database and value files)."""
        return int(self._run(lambda cache: cache.volume(), 0))

    def close(self) -> None:
        """Close this process's connections (they reopen on use)."""
        cache = self._cache
        if cache is not None:
            with contextlib.suppress(sqlite3.Error, OSError):
                cache.close()

    # -- failure handling -----------------------------------------------------------

    def _run(self, operation: Callable[[diskcache.Cache], _T], default: _T) -> _T:
        cache = self._cache
        if cache is None:
            return default
        try:
            return operation(cache)
        except (sqlite3.Error, diskcache.Timeout, OSError) as exc:
            if isinstance(exc, sqlite3.DatabaseError) and says_damaged(exc):
                self._reset(cache, exc)
            else:
                _log.warning(
                    "cache %s: %s; carrying on without it", self.directory, exc
                )
        return default

    def _reset(self, broken: diskcache.Cache, exc: BaseException) -> None:
        with self._lock:
            replaced = self._cache is not broken
            if replaced:
                return  # another thread replaced it already
            if time.monotonic() - self._last_reset < _RESET_PAUSE_S:
                return
            self._last_reset = time.monotonic()
            with contextlib.suppress(sqlite3.Error, OSError):
                broken.close()
            self._cache = None
            self._quarantine(exc)
            try:
                self._cache = self._open()
            except (sqlite3.Error, OSError) as again:
                _log.error(
                    "cache %s could not be started again (%s); routing carries on "
                    "without a cache",
                    self.directory,
                    again,
                )
                return
        try:
            self._on_reset()
        except Exception:  # a failed rebuild leaves an empty cache, which is correct
            _log.exception("rebuilding cache %s failed", self.directory)

    def _quarantine(self, exc: BaseException) -> None:
        aside = f"{self.directory}.corrupt-{time.time_ns()}"
        try:
            os.replace(self.directory, aside)
        except OSError:
            shutil.rmtree(self.directory, ignore_errors=True)
            aside = "(deleted)"
        _log.warning(
            "cache database in %s is corrupt (%s); moved it to %s and starting an "
            "empty one, rebuilt from the store",
            self.directory,
            exc,
            aside,
        )


def counter_key(namespace: str, what: str) -> str:
    """The key of a namespace's persisted counter (``hits`` or ``misses``)."""
    return f"{STATS_PREFIX}{namespace}|{what}"


def read_stats(directory: str | Path) -> list[CacheStats]:
    """The persisted counts of every namespace in a cache directory.

    For ``intentusnet stats``: nothing is created when ``directory`` is missing.
    """
    path = Path(directory)
    if not (path / "cache.db").is_file():
        return []
    disk = DiskTier(path, None)
    try:
        keys = disk.keys("")
        names = sorted(
            {key.split("|")[2] for key in keys if key.startswith(STATS_PREFIX)}
            | {key.split("|")[0] for key in keys if not key.startswith("|")}
        )
        volume = disk.volume()
        return [
            CacheStats(
                namespace=name,
                hits=disk.counter(counter_key(name, "hits")),
                misses=disk.counter(counter_key(name, "misses")),
                entries=len(disk.keys(name + "|")),
                bytes=volume,
                directory=str(path),
            )
            for name in names
        ]
    finally:
        disk.close()
