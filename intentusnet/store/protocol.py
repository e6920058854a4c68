"""The seams between the router (and CLI) and a store of execution records.

Any backend that provides these methods works with the router and the CLI
(the file, memory and PostgreSQL stores here). They are typing protocols:
structural, checked by mypy, not base classes. What the replay cache needs
beyond them is in ``cache/seams.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeAlias

from .._util.jsonvalue import JSONObject
from ..record.model import (
    EventType,
    ExecutionRecord,
    RecordSummary,
    StoreStats,
    VerifyReport,
)
from .filters import ListFilters

if TYPE_CHECKING:
    from .verification import Progress, StoreVerification

__all__ = [
    "ExecutionStore",
    "RecordWriter",
]

# ``list`` is also a method name below; these keep annotations unambiguous.
_Summaries: TypeAlias = list[RecordSummary]
_Ids: TypeAlias = list[str]


class RecordWriter(Protocol):
    """Appends the events of one execution to its record, in order."""

    @property
    def execution_id(self) -> str:
        """The record's id."""
        ...

    def append(self, event_type: EventType | str, data: JSONObject) -> None:
        """Append one event; it has reached the OS when this returns.

        Raises:
            StoreError: the event could not be written.
        """
        ...

    def append_soon(self, event_type: EventType | str, data: JSONObject) -> None:
        """Seal one event now; write it with the next append, complete or close.

        For a caller that appends another event before any code but its own
        runs (added in 0.1.0): the lines then share one write, and a crash
        between the two calls leaves the record as a crash just before this
        one would. A store that cannot hold a line back writes it at once.

        Raises:
            StoreError: the event could not be sealed (a failed write is raised
                by the call that writes it).
        """
        ...

    def complete(self, response: JSONObject, *, fingerprint: str | None = None) -> None:
        """Append ``FINAL_RESPONSE`` with ``response``, close, update the catalog.

        ``fingerprint`` (the execution's, see ``ExecutionRecord.fingerprint``)
        is stored in the same line when given.
        """
        ...

    def close(self) -> None:
        """Stop without completing (the record reads as incomplete); idempotent."""
        ...


class ExecutionStore(Protocol):
    """Where execution records are kept (DESIGN §5)."""

    @property
    def root(self) -> Path:
        """Where the store lives (informational for stores without a directory)."""
        ...

    @property
    def where(self) -> str:
        """Where the records are, for people (added in 0.1.0).

        A directory, or ``PostgreSQL at host:port/dbname`` (never a password).
        """
        ...

    @property
    def directory(self) -> Path | None:
        """The local directory holding the records, or None (added in 0.1.0).

        None for PostgreSQL and memory; a replay cache keeps its disk tier
        here by default.
        """
        ...

    def open(
        self,
        envelope: JSONObject,
        *,
        envelope_hash: str,
        execution_id: str | None = None,
        parent_execution_id: str | None = None,
        configuration: JSONObject | None = None,
    ) -> RecordWriter:
        """Create a record and write its header, before any agent runs.

        Args:
            envelope: the envelope in wire form (or an object with ``to_wire()``).
            envelope_hash: its hash, as computed by ``compute_hash``.
            execution_id: the record's id; a new time-sortable id if ``None``.
            parent_execution_id: the execution this one belongs to, if any.
            configuration: the router's configuration for the intent, with its
                fingerprint, for the header (added in 0.1.0).

        Raises:
            InvalidExecutionId: a given id is not allowed (nothing was touched).
            RecordExists: a record with this id exists; records are never rewritten.
            StoreError: the record could not be created or written.
        """
        ...

    def load(self, execution_id: str) -> ExecutionRecord:
        """Read and verify one record.

        Raises:
            InvalidExecutionId: the id is not allowed (nothing was touched).
            RecordNotFound: no such record.
            UnsupportedSchemaVersion: the record is of a newer format.
            RecordIntegrityError: the record is damaged (other than a torn last
                line, which makes it incomplete); the message names the line.
        """
        ...

    def exists(self, execution_id: str) -> bool:
        """Whether a record with this id exists."""
        ...

    def list(self, filters: ListFilters = ListFilters()) -> _Summaries:
        """Summaries of the records matching every filter given, newest first.

        Every filter is answered by the store's own query (``ListFilters()``,
        the default, selects every record; ``filters`` added in 0.1.0).
        """
        ...

    def find_by_hash(
        self, envelope_hash: str, replayable_only: bool = True
    ) -> ExecutionRecord | None:
        """The newest record made from an envelope with this hash, or None.

        With ``replayable_only`` (default) only replayable records count. The
        record is loaded and verified before it is returned.
        """
        ...

    def invalidate(self, execution_id: str, reason: str) -> None:
        """Mark a record not replayable (appends an ``INVALIDATED`` event).

        A record invalidated already is left as it is (its first reason stands).
        A signed record's ``INVALIDATED`` line is signed too, by the store's key.

        Raises:
            InvalidExecutionId, RecordNotFound: as for :meth:`load`.
            RecordIntegrityError: the record is damaged.
            StoreError: a process is still writing the record.
            SigningKeyError: the record is signed and this store has no key.
        """
        ...

    def delete(self, execution_id: str) -> None:
        """Delete one record."""
        ...

    def prune(
        self,
        older_than: timedelta,
        *,
        dry_run: bool = False,
        on_progress: Callable[[int, int], None] | None = None,
    ) -> _Ids:
        """Delete records older than ``older_than``; return their ids.

        With ``dry_run`` nothing is deleted. ``on_progress(done, total)`` is
        called as records are deleted: how many so far, and how many go in all
        (added in 0.1.0).
        """
        ...

    def verify(self, execution_id: str) -> VerifyReport:
        """Check one record line by line."""
        ...

    def verify_all(
        self,
        *,
        each: bool = False,
        processes: int = 1,
        on_progress: Progress | None = None,
    ) -> StoreVerification:
        """Verify every record, as the result is iterated (added in 0.1.0).

        Iterating yields the reports with failures or notes (every report with
        ``each``); the result's totals count every record checked. ``processes``
        read the files of a large store (a store read record by record ignores
        it); ``on_progress`` is called with the records checked so far.
        """
        ...

    def reindex(
        self,
        *,
        processes: int = 1,
        on_progress: Progress | None = None,
        on_changed: Callable[[str, str], None] | None = None,
    ) -> int:
        """Rebuild any index from the records; return how many were indexed.

        ``processes`` and ``on_progress`` as for :meth:`verify_all`. A record
        changed since the index saw it is not accepted as it is now: it is
        passed to ``on_changed`` with how it differs (arguments added in 0.1.0).
        """
        ...

    def stats(self) -> StoreStats:
        """Counts and sizes over the store."""
        ...

    def iter_ids(self) -> Iterator[str]:
        """Every record id, in a stable order."""
        ...

    # -- for the replay cache (added in 0.1.0) -----------------------------------

    def change_probe(self, execution_id: str) -> Callable[[], object]:
        """A cheap check whose answer changes whenever the record changes.

        ``None`` once the record is gone. The replay cache asks it on every hit.
        """
        ...
