"""The cache-hit journal: one sealed line per answer served from the cache.

A hit is not an execution, so it gets no record file of its own: a popular
cached answer would otherwise cost one file per request. Instead each hit is
one ``CACHE_HIT`` line appended to a journal of the day (UTC) it happened::

    <root>/cache-hits/2026-11-22.jsonl

Every line carries the SHA-256 of its own bytes as its last field, so an edited
line is found and left out when the journal is read. Lines are written with one
``write()`` on a file opened with ``O_APPEND``, so several processes can append
to one journal. Retention deletes whole day files, as it deletes whole records.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from hashlib import sha256
from pathlib import Path
from typing import Final

import orjson

from .._util.files import FILE_MODE, make_dirs
from .._util.ids import uuid7_hex
from .._util.jsonvalue import JSONObject
from .._util.time import micros_of, parse_utc, utc_now
from . import _log

__all__ = ["HITS_DIR", "CacheHit", "HitJournal", "hit_line", "parse_hits"]

#: The journal directory under a store's root.
HITS_DIR: Final = "cache-hits"
#: The journal line format this release writes and reads.
HITS_VERSION: Final = 1
_HASH_TAG: Final = b',"hash":"sha256:'
_TAIL: Final = len(_HASH_TAG) + 64 + 2
_OPEN: Final = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC
_SUFFIX: Final = ".jsonl"


@dataclass(frozen=True, slots=True)
class CacheHit:
    """One answer served from the replay cache instead of running agents.

    Attributes:
        hit_id: ``hit-`` + a time-sortable UUIDv7 in hex.
        created_utc: when the hit was served (ISO 8601, UTC, ``Z``).
        source_execution_id: the record whose answer was served.
        envelope_hash: the hash of the envelope answered.
        intent_name: the intent answered.
        intent_version: its version.
        request_id: the caller's request id, when there was one.
        namespace: the cache namespace that served it.

    Added in 0.1.0.
    """

    hit_id: str
    created_utc: str
    source_execution_id: str
    envelope_hash: str
    intent_name: str
    intent_version: str
    request_id: str | None
    namespace: str

    def to_json(self) -> JSONObject:
        """Return the camelCase form ``records list --json`` prints."""
        return {
            "kind": "cache_hit",
            "hitId": self.hit_id,
            "createdUtc": self.created_utc,
            "intent": {"name": self.intent_name, "version": self.intent_version},
            "envelopeHash": self.envelope_hash,
            "status": "cache_hit",
            "sourceExecutionId": self.source_execution_id,
            "requestId": self.request_id,
            "namespace": self.namespace,
        }


def hit_line(
    source_execution_id: str,
    *,
    envelope_hash: str,
    intent_name: str,
    intent_version: str,
    request_id: str | None,
    namespace: str,
) -> tuple[bytes, str, str]:
    """Seal one journal line for a hit happening now.

    Returns:
        The line (newline included), the hit id and the UTC time text.
    """
    hit_id = "hit-" + uuid7_hex()
    created, _micros = utc_now()
    body = orjson.dumps(
        {
            "v": HITS_VERSION,
            "type": "CACHE_HIT",
            "hitId": hit_id,
            "createdUtc": created,
            "sourceExecutionId": source_execution_id,
            "envelopeHash": envelope_hash,
            "intent": {"name": intent_name, "version": intent_version},
            "requestId": request_id,
            "namespace": namespace,
        }
    )[:-1]
    digest = sha256(body).hexdigest().encode()
    return body + _HASH_TAG + digest + b'"}\n', hit_id, created


def parse_hits(data: bytes, where: str = "journal") -> Iterator[CacheHit]:
    """Yield the sound hits of a journal's bytes; damaged lines are logged, skipped.

    A torn last line (a crash mid-write) is skipped silently.
    """
    lines = data.split(b"\n")
    lines.pop()  # b"" after the last newline, or a torn line
    for number, line in enumerate(lines, 1):
        hit = _parse_line(line)
        if hit is None:
            _log.warning("%s line %d is damaged or edited; left out", where, number)
        else:
            yield hit


def _parse_line(line: bytes) -> CacheHit | None:
    if (
        len(line) <= _TAIL
        or line[-_TAIL:-66] != _HASH_TAG
        or line[-2:] != b'"}'
        or sha256(line[:-_TAIL]).hexdigest().encode() != line[-66:-2]
    ):
        return None
    try:
        fields = orjson.loads(line)
        intent = fields["intent"]
        request_id = fields.get("requestId")
        return CacheHit(
            hit_id=str(fields["hitId"]),
            created_utc=str(fields["createdUtc"]),
            source_execution_id=str(fields["sourceExecutionId"]),
            envelope_hash=str(fields["envelopeHash"]),
            intent_name=str(intent["name"]),
            intent_version=str(intent["version"]),
            request_id=None if request_id is None else str(request_id),
            namespace=str(fields.get("namespace", "default")),
        )
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


def select(
    hits: Iterator[CacheHit] | list[CacheHit],
    *,
    intent: str | None,
    since_us: int | None,
) -> list[CacheHit]:
    """The hits matching the filters, newest first."""
    found = [
        hit
        for hit in hits
        if (intent is None or hit.intent_name == intent)
        and (since_us is None or (parse_utc(hit.created_utc) or 0) >= since_us)
    ]
    found.sort(key=lambda hit: (hit.created_utc, hit.hit_id), reverse=True)
    return found


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

    def append(
        self,
        source_execution_id: str,
        *,
        envelope_hash: str,
        intent_name: str,
        intent_version: str,
        request_id: str | None,
        namespace: str,
    ) -> str:
        """Append one hit; return its id.

        Raises:
            OSError: the journal could not be written.
        """
        line, hit_id, created = hit_line(
            source_execution_id,
            envelope_hash=envelope_hash,
            intent_name=intent_name,
            intent_version=intent_version,
            request_id=request_id,
            namespace=namespace,
        )
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

    def prune(self, cutoff: datetime, *, dry_run: bool = False) -> list[str]:
        """Delete day files holding only hits older than ``cutoff``; their days."""
        cutoff_us = micros_of(cutoff)
        gone = [day for day in self.days() if _day_end_us(day) <= cutoff_us]
        if not dry_run:
            for day in gone:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(f"{self._dir}/{day}{_SUFFIX}")
        return gone

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
