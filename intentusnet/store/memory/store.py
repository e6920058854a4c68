"""MemoryExecutionStore: the in-memory twin of FileExecutionStore, for tests.

Records are kept as the same sealed bytes a file would hold and read back by the
same code, so a test against this store exercises the real format; only the
disk, the catalog and the processes are left out. Queries scan every record.
"""

from __future__ import annotations

import os
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Final, TypeAlias

from ..._util.jsonvalue import JSONObject
from ..._util.time import micros_of, parse_utc, utc_now
from ...errors import RecordExists, RecordNotFound, StoreError
from ...record.format import header_line
from ...record.keys import SigningKey, load_signing_key
from ...record.model import (
    ExecutionRecord,
    RecordStatus,
    RecordSummary,
    StoreStats,
    VerifyReport,
)
from ...record.reader import parse_record
from ...record.signing import invalidated, invalidated_lines
from ...record.verify import verify_bytes
from ..durable import ListsInterrupted
from ..filters import ListFilters
from ..hits import CacheHit, Hit, hit_line, parse_hits, select
from ..ids import check_id, new_record_id
from ..owner import current_owner
from ..queues import KeepsQueues
from ..step_index import StepRef, ended_steps
from ..verification import Progress, VerifiesEach
from ..writer import ChainWriter, wire_object
from .durable import MemoryDurable
from .queues import MemoryQueues

__all__ = [
    "MemoryExecutionStore",
    "MemoryRecordWriter",
]

# ``list`` is also a method name below; these keep annotations unambiguous.
_Summaries: TypeAlias = list[RecordSummary]
_Ids: TypeAlias = list[str]
_Records: TypeAlias = list[ExecutionRecord]
_Hits: TypeAlias = list[CacheHit]
_StepRefs: TypeAlias = list[StepRef]
_SUMMARY: Final = RecordSummary._fields


class MemoryRecordWriter(ChainWriter):
    """Appends lines to a record held by a :class:`MemoryExecutionStore`."""

    def __init__(
        self, store: MemoryExecutionStore, execution_id: str, header_hash: str
    ) -> None:
        super().__init__(
            execution_id, header_hash, len(store._data[execution_id]), store._signer
        )
        self._store = store

    def _emit(self, line: bytes) -> None:
        with self._store._lock:
            if self.execution_id not in self._store._data:
                raise StoreError(f"record {self.execution_id} was deleted")
            self._store._data[self.execution_id] += line

    def _finish(self, *, completed: bool) -> None:
        self._store._writing.discard(self.execution_id)


class MemoryExecutionStore(ListsInterrupted, MemoryDurable, KeepsQueues, VerifiesEach):
    """An :class:`ExecutionStore` in memory; nothing survives the process.

    Args:
        signing_key: as for ``FileExecutionStore`` (added in 0.1.0).
    """

    def __init__(
        self, *, signing_key: SigningKey | str | os.PathLike[str] | None = None
    ) -> None:
        self._signer = load_signing_key(signing_key)
        self.root = Path(":memory:")
        #: where the records are, for people (added in 0.1.0)
        self.where: Final = "this process's memory"
        #: the local directory of the records: none (added in 0.1.0)
        self.directory: Final[Path | None] = None
        self._data: dict[str, bytearray] = {}
        self._writing: set[str] = set()
        self._lock = threading.RLock()
        self._hits = bytearray()
        MemoryDurable.__init__(self)
        self._queues = MemoryQueues(
            lambda i: i in self._writing or i in self.held_records
        )

    def open(
        self,
        envelope: JSONObject,
        *,
        envelope_hash: str,
        execution_id: str | None = None,
        parent_execution_id: str | None = None,
        configuration: JSONObject | None = None,
    ) -> MemoryRecordWriter:
        """Create a record and write its header line; return its writer."""
        execution_id = new_record_id(execution_id, parent_execution_id)
        line, digest = header_line(
            execution_id=execution_id,
            created_utc=utc_now()[0],
            envelope_hash=envelope_hash,
            envelope=wire_object(envelope),
            parent_execution_id=parent_execution_id,
            owner=current_owner(),
            key_id=None if self._signer is None else self._signer.key_id,
            configuration=configuration,
        )
        with self._lock:
            if execution_id in self._data:
                raise RecordExists(f"record {execution_id} already exists")
            self._data[execution_id] = bytearray(line)
            self._writing.add(execution_id)
        return MemoryRecordWriter(self, execution_id, digest)

    def raw(self, execution_id: str) -> bytes:
        """The record's bytes, exactly as a file would hold them."""
        with self._lock:
            try:
                return bytes(self._data[check_id(execution_id)])
            except KeyError:
                raise RecordNotFound(f"no record {execution_id}") from None

    def load(self, execution_id: str) -> ExecutionRecord:
        """Read, verify and assemble a record."""
        return parse_record(
            self.raw(execution_id),
            execution_id,
            lambda _owner: execution_id in self._writing,
        )

    def exists(self, execution_id: str) -> bool:
        """Whether a record with this id exists."""
        return check_id(execution_id) in self._data

    def iter_ids(self) -> Iterator[str]:
        """Every record id, sorted."""
        with self._lock:
            return iter(sorted(self._data))

    def list(self, filters: ListFilters = ListFilters()) -> _Summaries:
        """Summaries of matching records, newest first (see ``ExecutionStore``)."""
        f = filters
        found: _Summaries = []
        for record in self._newest_first():
            h = record.header
            created_us = parse_utc(h.created_utc) or 0
            if f.fixed_match(
                h.execution_id, h.intent_name, created_us, h.envelope_hash
            ) and f.state_match(h.status, h.replayable):
                # a summary's fields are the header's, by name
                found.append(RecordSummary._make(getattr(h, n) for n in _SUMMARY))
        return found if f.limit is None else found[: f.limit]

    def find_by_hash(
        self, envelope_hash: str, replayable_only: bool = True
    ) -> ExecutionRecord | None:
        """The newest record with this envelope hash."""
        for record in self._newest_first():
            if record.header.envelope_hash == envelope_hash and (
                record.header.replayable or not replayable_only
            ):
                return record
        return None

    def find_steps(
        self,
        envelope_hash: str,
        name: str,
        args_hash: str | None = None,
        *,
        limit: int | None = None,
    ) -> _StepRefs:
        """Ended steps, read from every record (see ``StepIndex``)."""
        found: _StepRefs = []
        for record in self._newest_first():
            if record.header.envelope_hash != envelope_hash:
                continue
            found += [
                StepRef(record.execution_id, number)
                for named, hashed, number in ended_steps(record)
                if named == name and args_hash in (None, hashed)
            ]
        return found if limit is None else found[:limit]

    def invalidate(self, execution_id: str, reason: str) -> None:
        """Append an ``INVALIDATED`` event to a record no one is writing."""
        with self._lock:
            if execution_id in self._writing:
                raise StoreError(f"record {execution_id} is still being written")
            record = self.load(execution_id)
            if invalidated(record):
                return  # its first reason stands, as in every store
            line = invalidated_lines(record, reason, utc_now()[1], self._signer)
            data = self._data[execution_id]
            del data[data.rfind(b"\n") + 1 :]  # drop a torn last line
            data += line

    def delete(self, execution_id: str) -> None:
        """Delete one record."""
        with self._lock:
            if self._data.pop(check_id(execution_id), None) is None:
                raise RecordNotFound(f"no record {execution_id}")
        self._forget({execution_id})

    def prune(
        self,
        older_than: timedelta,
        *,
        dry_run: bool = False,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> _Ids:
        """Delete records created before now - ``older_than``; return their ids.

        The idempotency keys naming them and their resume links go too. All
        at once: ``on_progress(done, total)`` is called once, at the end.
        """
        cutoff = micros_of(datetime.now(UTC) - older_than)
        ids = [
            r.execution_id
            for r in self._newest_first()
            if (parse_utc(r.header.created_utc) or 0) < cutoff
            and r.header.status is not RecordStatus.IN_PROGRESS
        ]
        if not dry_run:
            with self._lock:
                for execution_id in ids:
                    self._data.pop(execution_id, None)
                lines = bytes(self._hits).splitlines(keepends=True)
                self._hits = bytearray().join(
                    line
                    for line in lines
                    for hit in parse_hits(line)
                    if (parse_utc(hit.created_utc) or 0) >= cutoff
                )
            self._forget(set(ids))
            if on_progress is not None:
                on_progress(len(ids), len(ids))
        return ids

    def verify(self, execution_id: str) -> VerifyReport:
        """Check one record line by line."""
        return verify_bytes(self.raw(execution_id), execution_id)

    def reindex(
        self,
        *,
        processes: int = 1,
        on_progress: Progress | None = None,
        on_changed: Callable[[str, str], None] | None = None,
    ) -> int:
        """Nothing to rebuild (nothing changes behind this store's back).

        Returns the number of records, which ``on_progress`` is called with.
        """
        count = len(self._data)
        if on_progress is not None:
            on_progress(count)
        return count

    def stats(self) -> StoreStats:
        """Counts per status and intent, and bytes held."""
        headers = [record.header for record in self._newest_first()]
        by_status = Counter(header.status.value for header in headers)
        by_intent = Counter(header.intent_name for header in headers)
        with self._lock:
            size = sum(len(data) for data in self._data.values())
        return StoreStats(len(self._data), dict(by_status), dict(by_intent), size)

    def record_cache_hit(self, hit: Hit) -> str:
        """Append one hit to the in-memory journal; return its id."""
        line, hit_id, _created = hit_line(hit)
        with self._lock:
            self._hits += line
        return hit_id

    def cache_hits(
        self,
        *,
        intent: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
    ) -> _Hits:
        """Cache hits matching every filter given, newest first."""
        with self._lock:
            data = bytes(self._hits)
        since_us = None if since is None else micros_of(since)
        found = select(parse_hits(data), intent=intent, since_us=since_us)
        return found if limit is None else found[:limit]

    def cache_hit_count(self) -> int:
        """How many cache hits the journal holds."""
        with self._lock:
            return self._hits.count(b"\n")

    def change_probe(self, execution_id: str) -> Callable[[], object]:
        """A check whose answer changes whenever the record changes (its length)."""
        check_id(execution_id)
        data = self._data

        def probe() -> object:
            found = data.get(execution_id)
            return None if found is None else (len(found), id(found))

        return probe

    def _newest_first(self) -> _Records:
        with self._lock:
            ids = list(self._data)
        records = [self.load(i) for i in ids]
        records.sort(key=lambda r: (r.header.created_utc, r.execution_id), reverse=True)
        return records
