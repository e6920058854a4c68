"""What caching saved: LLM calls, tokens and cost spent on misses, avoided by hits.

A recording transport keeps the token usage an OpenAI or Anthropic answer
reports in the recorded answer (its payload's ``usage``). Every record holding
one is a call that was made (a *miss*): its tokens were spent. Every line of the
cache-hit journal names the record whose answer it served (a *hit*): that
record's tokens were avoided. :func:`savings_report` adds them up by provider
and model, and prices them with a :class:`PriceTable` when given one.

The file store keeps running totals of usage per provider and model in its
catalog, so a report reads a few rows, then the usage of the records the hits
were served from; over other stores each record is read once per
:class:`UsageLedger` (a completed record never changes). The hit journal is
read whole on each report.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, cast

from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import IntentusNetError
from ..record.model import RecordStatus
from ..store.filters import ListFilters
from ..store.usage import RecordedUsage, UsageTotal, recorded_usage
from .seams import UsageIndex

if TYPE_CHECKING:
    from ..store.protocol import ExecutionStore
    from .prices import PriceTable
    from .seams import CacheHitJournal

__all__ = ["ModelSavings", "SavingsReport", "UsageLedger", "savings_report"]


@dataclass(frozen=True, slots=True)
class ModelSavings:
    """Calls, tokens and cost of one provider's model.

    ``misses`` are calls made and recorded (their tokens spent), ``hits``
    answers served from those records instead (their tokens avoided). Costs
    are ``None`` without a price table, or when it has no price for the model.

    Added in 0.1.0.
    """

    provider: str
    model: str | None
    hits: int
    misses: int
    input_tokens_spent: int
    output_tokens_spent: int
    input_tokens_avoided: int
    output_tokens_avoided: int
    cost_spent: float | None = None
    cost_avoided: float | None = None

    @property
    def calls(self) -> int:
        """Every call: hits and misses."""
        return self.hits + self.misses

    def to_json(self) -> JSONObject:
        """The camelCase form ``stats --json`` and ``GET /v1/savings`` give."""
        return {
            "provider": self.provider,
            "model": self.model,
            **_counts(self),
        }


@dataclass(frozen=True, slots=True)
class SavingsReport:
    """What caching saved over a store, by provider and model, and in total.

    ``currency`` is the price table's (``None`` without one); ``unpriced``
    lists the models the table has no price for (their costs are not in the
    totals).

    Added in 0.1.0.
    """

    models: tuple[ModelSavings, ...]
    currency: str | None = None

    @property
    def hits(self) -> int:
        """Answers served from records of LLM calls."""
        return sum(m.hits for m in self.models)

    @property
    def misses(self) -> int:
        """LLM calls made (and recorded)."""
        return sum(m.misses for m in self.models)

    @property
    def calls(self) -> int:
        """Hits and misses."""
        return self.hits + self.misses

    @property
    def input_tokens_spent(self) -> int:
        """Input tokens of the calls made."""
        return sum(m.input_tokens_spent for m in self.models)

    @property
    def output_tokens_spent(self) -> int:
        """Output tokens of the calls made."""
        return sum(m.output_tokens_spent for m in self.models)

    @property
    def input_tokens_avoided(self) -> int:
        """Input tokens the hits did not send."""
        return sum(m.input_tokens_avoided for m in self.models)

    @property
    def output_tokens_avoided(self) -> int:
        """Output tokens the hits did not pay for."""
        return sum(m.output_tokens_avoided for m in self.models)

    @property
    def cost_spent(self) -> float | None:
        """The cost of the calls made, over the priced models."""
        return self._cost([m.cost_spent for m in self.models])

    @property
    def cost_avoided(self) -> float | None:
        """The cost the hits avoided, over the priced models."""
        return self._cost([m.cost_avoided for m in self.models])

    @property
    def unpriced(self) -> tuple[str, ...]:
        """Models without a price in the table (empty without a table)."""
        if self.currency is None:
            return ()
        return tuple(
            sorted(
                {m.model or "(unknown)" for m in self.models if m.cost_spent is None}
            )
        )

    def _cost(self, costs: list[float | None]) -> float | None:
        if self.currency is None:
            return None
        return sum(cost for cost in costs if cost is not None)

    def to_json(self) -> JSONObject:
        """The camelCase form ``stats --json`` and ``GET /v1/savings`` give."""
        unpriced: list[JSONValue] = list(self.unpriced)
        return {
            "currency": self.currency,
            **_counts(self),
            "unpriced": unpriced,
            "models": [m.to_json() for m in self.models],
        }


class _Tally:
    """One model's counts while a report is added up."""

    def __init__(self) -> None:
        self.hits = self.misses = 0
        self.spent = [0, 0]  # input, output tokens
        self.avoided = [0, 0]

    def savings(
        self, provider: str, model: str | None, prices: PriceTable | None
    ) -> ModelSavings:
        spent = avoided = None
        if prices is not None:
            spent = prices.cost(model, *self.spent)
            avoided = prices.cost(model, *self.avoided)
        return ModelSavings(
            provider=provider,
            model=model,
            hits=self.hits,
            misses=self.misses,
            input_tokens_spent=self.spent[0],
            output_tokens_spent=self.spent[1],
            input_tokens_avoided=self.avoided[0],
            output_tokens_avoided=self.avoided[1],
            cost_spent=spent,
            cost_avoided=avoided,
        )


class UsageLedger:
    """The token usage recorded in a store, each record read once.

    The service keeps one for ``/metrics`` and ``GET /v1/savings``, so each
    report reads only the records completed since the last. Added in 0.1.0.
    """

    def __init__(self, store: ExecutionStore) -> None:
        self.store = store
        self._known: dict[str, RecordedUsage | None] = {}
        self._lock = threading.Lock()

    def report(self, prices: PriceTable | None = None) -> SavingsReport:
        """Add up calls, tokens and (with ``prices``) costs; see the module."""
        # Every store keeps a hit journal (the file, memory and PostgreSQL ones).
        hits = cast("CacheHitJournal", self.store).cache_hits()
        served = Counter(hit.source_execution_id for hit in hits)
        with self._lock:  # one reader of new records at a time
            totals, sources = self._usage(served)
        tallies: dict[tuple[str, str | None], _Tally] = {}
        for total in totals:
            tally = tallies.setdefault((total.provider, total.model), _Tally())
            tally.misses += total.calls
            tally.spent[0] += total.input_tokens
            tally.spent[1] += total.output_tokens
        for source, count in served.items():
            used = sources.get(source)
            if used is None:
                continue  # not an LLM call, or its record is gone
            tally = tallies.setdefault((used.provider, used.model), _Tally())
            tally.hits += count
            tally.avoided[0] += count * used.input_tokens
            tally.avoided[1] += count * used.output_tokens
        models = [
            tally.savings(provider, model, prices)
            for (provider, model), tally in sorted(
                tallies.items(), key=lambda item: (item[0][0], item[0][1] or "")
            )
        ]
        currency = None if prices is None else prices.currency
        return SavingsReport(tuple(models), currency)

    def _usage(
        self, sources: Iterable[str]
    ) -> tuple[list[UsageTotal], Mapping[str, RecordedUsage]]:
        """The totals per provider and model, and the usage of ``sources``.

        A store that indexes usage (the file store's catalog) answers at once.
        """
        if isinstance(self.store, UsageIndex):
            return self.store.usage_totals(), self.store.usage_of(sources)
        known = self._read()
        tallies: dict[tuple[str, str | None], list[int]] = {}
        for used in known.values():
            if used is not None:
                tally = tallies.setdefault((used.provider, used.model), [0, 0, 0])
                tally[0] += 1
                tally[1] += used.input_tokens
                tally[2] += used.output_tokens
        totals = [UsageTotal(*key, *counts) for key, counts in tallies.items()]
        return totals, {i: used for i in sources if (used := known.get(i))}

    def _read(self) -> Mapping[str, RecordedUsage | None]:
        """The usage of every completed record, read once (deleted ones dropped)."""
        before = self._known
        now: dict[str, RecordedUsage | None] = {}
        for summary in self.store.list(ListFilters(status=RecordStatus.COMPLETED)):
            execution_id = summary.execution_id
            if execution_id in before:
                now[execution_id] = before[execution_id]
                continue
            try:
                record = self.store.load(execution_id)
            except (IntentusNetError, OSError):
                continue  # gone meanwhile, or damaged: nothing to count
            now[execution_id] = recorded_usage(record.final_response)
        self._known = now
        return now


def savings_report(
    store: ExecutionStore, prices: PriceTable | None = None
) -> SavingsReport:
    """What caching saved over ``store``: LLM calls, tokens and costs by model.

    Args:
        store: a store recording transports write to (file, memory or
            PostgreSQL).
        prices: prices per million tokens; without them costs are ``None``.

    Added in 0.1.0.
    """
    return UsageLedger(store).report(prices)


def _counts(savings: ModelSavings | SavingsReport) -> JSONObject:
    """The calls, tokens and costs of a model's or a report's JSON form."""
    return {
        "calls": savings.calls,
        "hits": savings.hits,
        "misses": savings.misses,
        "inputTokens": {
            "spent": savings.input_tokens_spent,
            "avoided": savings.input_tokens_avoided,
        },
        "outputTokens": {
            "spent": savings.output_tokens_spent,
            "avoided": savings.output_tokens_avoided,
        },
        "cost": {"spent": savings.cost_spent, "avoided": savings.cost_avoided},
    }
