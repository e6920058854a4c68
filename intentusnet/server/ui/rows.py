"""What the records list shows of each record beyond its summary: tokens, cost, error.

A summary comes from the store's index; these come from the records themselves,
loaded with the one reader (``store.load``) a page (50 records) at a time.

A record's tokens are those its own answer carries (an LLM call an HTTP
transport recorded, see docs/cache.md) plus those of the LLM calls it made
live: its ``http`` steps whose record names it as parent. A step a cache hit
answered names an earlier record, whose tokens were spent then, not now. A
child intent's calls count on the child's own row. The cost is the tokens
priced by the price table the explorer was given (``--prices FILE``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from ...errors import RecordIntegrityError, RecordNotFound
from ...steps.view import record_steps
from ...store.usage import RecordedUsage, recorded_usage
from .render import NONE

if TYPE_CHECKING:
    from ...cache.prices import PriceTable
    from ...record.model import ExecutionRecord, RecordSummary
    from ...store import ExecutionStore

__all__ = ["RowDetail", "load_rows", "money", "row_details", "tokens_text"]


class RowDetail(NamedTuple):
    """The list's extra columns of one record, as text.

    ``tokens`` and ``cost`` are ``-`` without an LLM call (``cost`` also
    without a price table); ``tokens_title`` and ``cost_title`` explain them
    (input and output counts, and for the cost also the models without a
    price, so a narrow table without the tokens column still tells them).
    ``error`` is the code and message of a failed answer, or None.
    """

    tokens: str
    tokens_title: str
    cost: str
    cost_title: str
    error: str | None


def money(value: float, currency: str) -> str:
    """A cost as text: four decimals below 1, two above, and the currency."""
    return f"{value:,.2f} {currency}" if value >= 1 else f"{value:.4f} {currency}"


def tokens_text(count: int) -> str:
    """A token count with thousands separators."""
    return f"{count:,}"


def _calls(
    store: ExecutionStore, record: ExecutionRecord
) -> tuple[list[RecordedUsage], int]:
    """The usage of the record's own answer and of the LLM calls it made live.

    Also how many of its LLM calls a cache hit answered.
    """
    found = []
    hits = 0
    own = recorded_usage(record.final_response)
    if own is not None:
        found.append(own)
    execution_id = record.header.execution_id
    for step in record_steps(record):
        child = step.child_execution_id
        if child is None or not step.name.startswith("http "):
            continue
        try:
            call = store.load(child)
        except (RecordNotFound, RecordIntegrityError):
            continue  # pruned, or damaged: its own row says so
        used = recorded_usage(call.final_response)
        if used is None:
            continue
        if call.header.parent_execution_id != execution_id:
            hits += 1  # an earlier execution spent these tokens
        else:
            found.append(used)
    return found, hits


def _error(record: ExecutionRecord) -> str | None:
    answer = record.final_response
    error = None if answer is None else answer.get("error")
    if not isinstance(error, dict):
        return None
    code, message = error.get("code"), error.get("message")
    return ": ".join(str(part) for part in (code, message) if part)


def _detail(
    calls: list[RecordedUsage], hits: int, prices: PriceTable | None
) -> RowDetail:
    if not calls:
        why = "no LLM call"
        if hits:
            why = f"{hits} LLM call{'s' if hits != 1 else ''} served from the cache"
        return RowDetail(NONE, why, NONE, why, None)
    spent_in = sum(c.input_tokens for c in calls)
    spent_out = sum(c.output_tokens for c in calls)
    tokens_title = (
        f"{tokens_text(spent_in)} input + {tokens_text(spent_out)} output tokens "
        f"in {len(calls)} LLM call{'s' if len(calls) != 1 else ''}"
    )
    tokens = tokens_text(spent_in + spent_out)
    if prices is None:
        return RowDetail(
            tokens, tokens_title, NONE, f"{tokens_title}; no price table", None
        )
    costs = [prices.cost(c.model, c.input_tokens, c.output_tokens) for c in calls]
    priced = [x for x in costs if x is not None]
    unpriced = sorted(
        {c.model or "(none)" for c, x in zip(calls, costs, strict=True) if x is None}
    )
    cost = money(sum(priced), prices.currency) if priced else ""
    cost_title = tokens_title
    if unpriced:  # never guessed: said to be missing
        cost = f"{cost} +?" if cost else "?"
        cost_title += "; no price for " + ", ".join(unpriced)
    return RowDetail(tokens, tokens_title, cost, cost_title, None)


def load_rows(
    store: ExecutionStore, summaries: Iterable[RecordSummary]
) -> dict[str, ExecutionRecord | None]:
    """Each listed record, by id: None if it fails verification, left out if gone."""
    loaded: dict[str, ExecutionRecord | None] = {}
    for summary in summaries:
        try:
            loaded[summary.execution_id] = store.load(summary.execution_id)
        except RecordNotFound:
            continue
        except RecordIntegrityError:
            loaded[summary.execution_id] = None
    return loaded


def row_details(
    store: ExecutionStore,
    records: Mapping[str, ExecutionRecord | None],
    prices: PriceTable | None,
) -> dict[str, RowDetail]:
    """The extra columns of each loaded record (see :func:`load_rows`), by id."""
    details: dict[str, RowDetail] = {}
    for execution_id, record in records.items():
        if record is None:
            details[execution_id] = RowDetail(
                NONE, "", NONE, "", "the record fails verification: open it to see why"
            )
            continue
        detail = _detail(*_calls(store, record), prices)
        details[execution_id] = detail._replace(error=_error(record))
    return details
