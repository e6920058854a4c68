"""The overview's figures: executions, errors, latency and spend, by day.

Read from the store's index: the newest records of the last :data:`DAYS` days
(``store.list``, at most :data:`ROWS` of them, and the page says when it
stopped there), the cache hits of the same days, and, from a store that
indexes it (``UsageIndex``: the file store's catalog), the token usage of its
LLM calls, priced by the explorer's price table. A store without that index
(PostgreSQL, memory) would have to load every record for it: the page shows
no tokens or spend there and says so. Only days with records or hits get a
row.

Latency is the recorded ``durationMs`` of the records that finished, its
percentiles by nearest rank (p95 is the smallest duration at least 95% of
them do not exceed). The error rate is the share of records that failed or
never finished (``failed``, ``incomplete``, ``recording_failure``) among those
not still running.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Final

from ...cache.seams import CacheHitJournal, UsageIndex
from ...record.model import RecordStatus
from ...store.filters import ListFilters

if TYPE_CHECKING:
    from ...cache.prices import PriceTable
    from ...record.model import RecordSummary
    from ...store import ExecutionStore
    from ...store.usage import RecordedUsage

__all__ = ["DAYS", "ROWS", "Figures", "Window", "add_up", "percentile", "window"]

#: How many days back the overview reaches.
DAYS: Final = 30
#: The most records (and cache hits) it reads.
ROWS: Final = 10_000
_ERRORS: Final = frozenset(
    {RecordStatus.FAILED, RecordStatus.INCOMPLETE, RecordStatus.RECORDING_FAILURE}
)


def percentile(ordered: Sequence[float], share: float) -> float | None:
    """The nearest-rank percentile of sorted values (``share`` in 0..1)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(share * len(ordered)) - 1)]


@dataclass
class Figures:
    """One day's (or the whole window's) figures."""

    label: str
    executions: int = 0
    errors: int = 0
    running: int = 0
    hits: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0
    cost: float = 0.0
    unpriced: set[str] = field(default_factory=set)
    durations: list[float] = field(default_factory=list)

    def add(self, summary: RecordSummary, used: RecordedUsage | None) -> None:
        """Count one record (and the usage its answer carries)."""
        self.executions += 1
        if summary.status in _ERRORS:
            self.errors += 1
        elif summary.status is RecordStatus.IN_PROGRESS:
            self.running += 1
        if summary.duration_ms is not None and summary.status not in _ERRORS:
            self.durations.append(summary.duration_ms)
        if used is not None:
            self.calls += 1
            self.input_tokens += used.input_tokens
            self.output_tokens += used.output_tokens

    def price(self, used: RecordedUsage, prices: PriceTable) -> None:
        """Add what one LLM call cost, or note its model as unpriced."""
        cost = prices.cost(used.model, used.input_tokens, used.output_tokens)
        if cost is None:
            self.unpriced.add(used.model or "(no model)")
        else:
            self.cost += cost

    @property
    def error_rate(self) -> float | None:
        """Errors among the records not still running (None: none)."""
        settled = self.executions - self.running
        return self.errors / settled if settled else None

    @property
    def hit_rate(self) -> float | None:
        """Cache hits among hits and executions (None: neither)."""
        total = self.hits + self.executions
        return self.hits / total if total else None

    def latency(self) -> tuple[float | None, float | None, float | None]:
        """p50, p95 and p99 of the finished records' durations."""
        ordered = sorted(self.durations)
        return (
            percentile(ordered, 0.5),
            percentile(ordered, 0.95),
            percentile(ordered, 0.99),
        )


@dataclass
class Window:
    """The overview: the whole window and each day with data, newest first."""

    since: date
    total: Figures
    days: list[Figures]
    read: int
    truncated: bool
    oldest_read: str | None
    usage_indexed: bool


def window(store: ExecutionStore, prices: PriceTable | None) -> Window:
    """Add up the last :data:`DAYS` days of ``store`` (see the module)."""
    since = datetime.now(UTC).date() - timedelta(days=DAYS - 1)
    start = datetime.combine(since, datetime.min.time(), UTC)
    rows = store.list(ListFilters(since=start, limit=ROWS))
    hit_days: list[str] = []
    if isinstance(store, CacheHitJournal):
        hits = store.cache_hits(since=start, limit=ROWS)
        hit_days = [hit.created_utc[:10] for hit in hits]
    usage = None
    if isinstance(store, UsageIndex):
        usage = store.usage_of(summary.execution_id for summary in rows)
    return add_up(since, rows, hit_days, usage, prices)


def add_up(
    since: date,
    rows: Sequence[RecordSummary],
    hit_days: Iterable[str],
    usage: Mapping[str, RecordedUsage] | None,
    prices: PriceTable | None,
) -> Window:
    """The overview of ``rows`` (newest first) and the days of cache hits.

    A record's day is the date of its ``created_utc`` (UTC); ``usage`` is the
    LLM usage by record id, None when the store does not index it.
    """
    total = Figures("all")
    days: dict[str, Figures] = {}
    for summary in rows:
        day = summary.created_utc[:10]
        used = None if usage is None else usage.get(summary.execution_id)
        for figures in (total, days.setdefault(day, Figures(day))):
            figures.add(summary, used)
            if used is not None and prices is not None:
                figures.price(used, prices)
    for day in hit_days:
        total.hits += 1
        days.setdefault(day, Figures(day)).hits += 1
    return Window(
        since=since,
        total=total,
        days=[days[label] for label in sorted(days, reverse=True)],
        read=len(rows),
        truncated=len(rows) == ROWS,
        oldest_read=rows[-1].created_utc if rows else None,
        usage_indexed=usage is not None,
    )
