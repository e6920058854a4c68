"""What the records list shows of each record beyond its summary: tokens, cost, error.

A summary comes from the store's index; these come from the records themselves,
loaded with the one reader (``store.load``) a page (50 records) at a time.

Each LLM call is counted once, on the row of its own record: the
``http.request`` record an HTTP transport made of it (see docs/cache.md),
whose answer carries its usage, as the overview counts it. The row of the
execution that made the calls live (its ``http`` steps whose record names it
as parent) shows their total too, marked as such ("incl. 2 calls"): a figure
that gathers rows listed on their own, never added to them. A step a cache
hit answered names an earlier record, whose tokens were spent then, not now.
A child intent's calls show on the child's own row. The cost is the tokens
priced by the price table the explorer was given (``--prices FILE``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, NamedTuple

from ...errors import RecordIntegrityError, RecordNotFound
from ...steps.view import record_steps
from ...store.usage import RecordedUsage, recorded_usage
from .render import NONE, money

if TYPE_CHECKING:
    from ...cache.prices import PriceTable
    from ...record.model import ExecutionRecord, RecordSummary
    from ...store import ExecutionStore

__all__ = ["RowDetail", "RowUsage", "load_rows", "row_details", "row_usage"]


class RowDetail(NamedTuple):
    """The list's extra columns of one record, as text.

    ``tokens`` and ``cost`` are ``-`` without an LLM call (``cost`` also
    without a price table); ``tokens_title`` and ``cost_title`` explain them
    (input and output counts, and for the cost also the models without a
    price, so a narrow table without the tokens column still tells them).
    ``included`` is how many LLM calls of other rows the figures gather (0:
    the record's own call, or none). ``error`` is the code and message of a
    failed answer, or None.
    """

    tokens: str
    tokens_title: str
    cost: str
    cost_title: str
    error: str | None
    included: int = 0


class RowUsage(NamedTuple):
    """The LLM usage of one listed record.

    ``own`` is the call the record itself is (counted on its row); ``calls``
    are the calls it made live, each counted on its own record's row;
    ``hits`` counts its calls a cache answered from earlier records. A record
    that is a call (``own``) is shown as that call alone.
    """

    own: RecordedUsage | None
    calls: list[RecordedUsage]
    hits: int


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def row_usage(store: ExecutionStore, record: ExecutionRecord) -> RowUsage:
    """The usage of ``record``'s own answer and of the LLM calls it made live."""
    calls = []
    hits = 0
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
            calls.append(used)
    return RowUsage(recorded_usage(record.final_response), calls, hits)


def _error(record: ExecutionRecord) -> str | None:
    answer = record.final_response
    error = None if answer is None else answer.get("error")
    if not isinstance(error, dict):
        return None
    code, message = error.get("code"), error.get("message")
    return ": ".join(str(part) for part in (code, message) if part)


def _detail(usage: RowUsage, prices: PriceTable | None) -> RowDetail:
    calls = [usage.own] if usage.own is not None else usage.calls
    if not calls:
        why = "no LLM call"
        if usage.hits:
            why = f"{_plural(usage.hits, 'LLM call')} served from the cache"
        return RowDetail(NONE, why, NONE, why, None)
    spent_in = sum(c.input_tokens for c in calls)
    spent_out = sum(c.output_tokens for c in calls)
    counts = f"{spent_in:,} input + {spent_out:,} output tokens"
    included = 0 if usage.own is not None else len(calls)
    tokens_title = f"{counts} in this LLM call"
    if included:
        tokens_title = (
            f"{counts} in the {_plural(included, 'LLM call')} it made, "
            f"each counted on its own row (http.request)"
        )
    tokens = f"{spent_in + spent_out:,}"
    if prices is None:
        return RowDetail(
            tokens,
            tokens_title,
            NONE,
            f"{tokens_title}; no price table",
            None,
            included,
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
    return RowDetail(tokens, tokens_title, cost, cost_title, None, included)


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
        detail = _detail(row_usage(store, record), prices)
        details[execution_id] = detail._replace(error=_error(record))
    return details
