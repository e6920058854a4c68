"""What the replay cache needs from a store beyond ``ExecutionStore``.

Three small Protocols the stores implement without importing them (the store
sits below the cache): a :class:`CacheHitJournal` notes the answers served
from the cache, a :class:`UsageIndex` keeps each record's LLM token usage for
``savings_report``, and :class:`SharedFlights` runs an envelope once across
processes. Every store is a journal; the file store is also a usage index,
the PostgreSQL store shares flights.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeAlias, runtime_checkable

if TYPE_CHECKING:
    from ..store import (
        FileExecutionStore,
        MemoryExecutionStore,
        PostgresExecutionStore,
    )
    from ..store.hits import CacheHit, Hit
    from ..store.usage import RecordedUsage, UsageTotal

    _Hits: TypeAlias = list[CacheHit]

__all__ = ["CacheHitJournal", "SharedFlights", "UsageIndex"]


@runtime_checkable
class CacheHitJournal(Protocol):
    """Where a store notes the answers served from the replay cache.

    A hit is not an execution: it gets a journal line, not a record. The replay
    cache needs a store that is also a journal (every store is).
    """

    def record_cache_hit(self, hit: Hit) -> str:
        """Note that a cached answer was served (no new record); the hit's id."""
        ...

    def cache_hits(
        self,
        *,
        intent: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
    ) -> _Hits:
        """Cache hits, newest first."""
        ...

    def cache_hit_count(self) -> int:
        """How many cache hits are recorded."""
        ...


@runtime_checkable
class UsageIndex(Protocol):
    """A store whose index keeps LLM token usage (added in 0.1.0).

    ``savings_report`` reads running totals from it and the usage of the
    records hits were served from, instead of loading every record (the file
    store keeps both in its catalog; other stores are read record by record).
    """

    def usage_totals(self) -> list[UsageTotal]:
        """The usage of the completed records, added up per provider and model."""
        ...

    def usage_of(self, execution_ids: Iterable[str]) -> dict[str, RecordedUsage]:
        """The usage of those of these records completed with one, by id."""
        ...


@runtime_checkable
class SharedFlights(Protocol):
    """A store whose processes agree on who runs an envelope (added in 0.1.0).

    The replay cache's single flight holds within one process by itself; over
    a store that is also ``SharedFlights`` (PostgreSQL) it holds across every
    process and host sharing the store: one claims an envelope hash and runs
    it, the others wait for its record.
    """

    def try_flight(self, envelope_hash: str) -> bool:
        """Claim the envelope hash; False while another process holds it.

        A claim ends with :meth:`end_flight`, or with the claimer's connection
        or process, however it ended.
        """
        ...

    def end_flight(self, envelope_hash: str) -> None:
        """Give up a claim made by :meth:`try_flight`."""
        ...


if TYPE_CHECKING:

    def _conforms(
        file: FileExecutionStore,
        memory: MemoryExecutionStore,
        postgres: PostgresExecutionStore,
    ) -> tuple[
        CacheHitJournal,
        CacheHitJournal,
        CacheHitJournal,
        UsageIndex,
        SharedFlights,
    ]:
        # mypy holds the stores to the protocols the cache uses them through.
        return (file, memory, postgres, file, postgres)
