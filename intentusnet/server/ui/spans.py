"""What the detail panel shows for each bar of the timeline.

A bar's detail is read from the record as it is: an attempt's input (the
envelope's payload), output or error and its agent's own measure of its
length; a step's arguments, output or error, side-effect mark and the records
it links to; and for an LLM call (an HTTP step to an OpenAI or Anthropic API)
the model and token counts its recorded answer reports, priced when the
explorer has a price table. Values are shown as recorded, so where the record
holds redaction markers the panel shows the markers.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..._util.jsonvalue import as_float
from ...errors import StoreError
from ...integrations.usage import recorded_call_usage
from .render import duration_text, money, pretty_json
from .timeline import attempts, draw

if TYPE_CHECKING:
    from collections.abc import Callable

    from ..._util.jsonvalue import JSONObject, JSONValue
    from ...cache.prices import PriceTable
    from ...record.model import ExecutionRecord
    from ...steps.view import RecordedStep
    from ...store import ExecutionStore
    from .timeline import Bar, Timeline

__all__ = ["LLMCall", "SpanDetail", "details", "drawn"]


@dataclass(frozen=True, slots=True)
class LLMCall:
    """The model call an HTTP step made, as its recorded answer reports it."""

    provider: str
    model: str | None
    input_tokens: int | None
    output_tokens: int | None
    cost: str | None  # priced with the explorer's price table, with its currency
    cached: bool  # answered from an earlier record: these tokens were not spent


@dataclass(frozen=True, slots=True)
class SpanDetail:
    """One bar's detail: facts, linked records and JSON sections."""

    bar: Bar
    facts: tuple[tuple[str, str], ...]
    links: tuple[tuple[str, str], ...]  # (what, execution id)
    sections: tuple[tuple[str, str], ...]  # (title, text as recorded)
    llm: LLMCall | None = None


def _timing(bar: Bar) -> list[tuple[str, str]]:
    return [
        ("Started at", duration_text(bar.start_ms)),
        ("Ended at", duration_text(bar.end_ms) if bar.end_ms is not None else "never"),
        ("Duration", duration_text(bar.duration_ms)),
    ]


def drawn(
    store: ExecutionStore, record: ExecutionRecord, prices: PriceTable | None = None
) -> tuple[Timeline, list[SpanDetail]]:
    """The timeline of ``record`` (read from ``store``) and each bar's detail.

    ``prices`` prices the LLM calls' tokens.
    """

    def parent_of(execution_id: str) -> str | None:
        try:
            return store.load(execution_id).header.parent_execution_id
        except StoreError:  # gone, or unreadable: not known to be this one's
            return None

    timeline = draw(record)
    return timeline, details(record, timeline, parent_of, prices)


def details(
    record: ExecutionRecord,
    timeline: Timeline,
    parent_of: Callable[[str], str | None],
    prices: PriceTable | None = None,
) -> list[SpanDetail]:
    """The detail of every bar of ``timeline`` (drawn from ``record``).

    ``parent_of(execution_id)`` names a record's parent (``None`` if it has
    none or cannot be read): an LLM call's record parented elsewhere answered
    it from the cache. ``prices`` prices the calls' tokens.
    """
    steps = {step.number: step for step in timeline.steps}
    started = attempts(record)
    payload = record.envelope.get("payload")
    found = []
    for bar in timeline.bars:
        if bar.kind == "phase":
            found.append(_phase(bar))
        elif bar.kind == "attempt" and bar.number is not None:
            start, end = started[bar.number - 1]
            found.append(
                _attempt(bar, start.data, None if end is None else end.data, payload)
            )
        elif bar.number is not None:
            step = steps[bar.number]
            found.append(
                _step(bar, step, prices, record.header.execution_id, parent_of)
            )
    return found


def _phase(bar: Bar) -> SpanDetail:
    what = (
        "The routing call's time before its record was open: choosing the agents, "
        "redacting and hashing the envelope, creating the record."
        if bar.span == "phase-open"
        else "From the last agent event to the final response's line: building "
        "the answer, redacting it, fingerprinting and sealing it. Writing the "
        "catalog row and the cache come after the line and are not in the record."
    )
    return SpanDetail(bar, (("What", what), *_timing(bar)), (), ())


def _attempt(
    bar: Bar, start: JSONObject, end: JSONObject | None, payload: JSONValue
) -> SpanDetail:
    facts = [
        ("Agent", str(start.get("agent"))),
        ("Attempt", str(start.get("attempt"))),
        ("Outcome", bar.outcome),
        *_timing(bar),
    ]
    sections: list[tuple[str, str]] = [("Input (the payload)", pretty_json(payload))]
    if end is not None:
        own = as_float(end.get("durationMs"))
        if own is not None:
            facts.append(("Agent's own measure", duration_text(own)))
        if end.get("error") is not None:
            sections.append(("Error", pretty_json(end.get("error"))))
        else:
            sections.append(("Output", pretty_json(end.get("output"))))
        traceback = end.get("traceback")
        if isinstance(traceback, str):
            sections.append(("Traceback", traceback))
    return SpanDetail(bar, tuple(facts), (), tuple(sections))


def _step(
    bar: Bar,
    step: RecordedStep,
    prices: PriceTable | None,
    execution_id: str,
    parent_of: Callable[[str], str | None],
) -> SpanDetail:
    facts = [
        ("Step", str(step.number)),
        ("Called by", f"{step.agent} · attempt {step.attempt}"),
        ("Outcome", step.outcome),
        *_timing(bar),
        ("Step's own measure", duration_text(step.duration_ms)),
        (
            "Side effect",
            "yes: never served from a cache, never made again by a re-run"
            if step.side_effect
            else "no",
        ),
        (
            "Answered",
            "from the record " + (step.served_from or "")
            if step.source == "record"
            else "live",
        ),
    ]
    if step.parent is not None:
        facts.append(("Inside step", str(step.parent)))
    links = []
    if step.child_execution_id:
        what = "child execution" if step.name.startswith("route:") else "its record"
        links.append((what, step.child_execution_id))
    if step.served_from:
        links.append(("served from", step.served_from))
    sections = [("Arguments", pretty_json(step.args))]
    if step.error is not None:
        sections.append(("Error", pretty_json(step.error)))
    else:
        sections.append(("Output", pretty_json(step.output)))
    if step.traceback:
        sections.append(("Traceback", step.traceback))
    return SpanDetail(
        bar,
        tuple(facts),
        tuple(links),
        tuple(sections),
        _llm(step, prices, execution_id, parent_of),
    )


def _llm(
    step: RecordedStep,
    prices: PriceTable | None,
    execution_id: str,
    parent_of: Callable[[str], str | None],
) -> LLMCall | None:
    """The model call of an HTTP step to an LLM API, if it is one."""
    if not step.name.startswith("http ") or not isinstance(step.args, dict):
        return None
    if not isinstance(step.output, dict):
        return None
    usage = recorded_call_usage(step.args, step.output)
    if usage is None:
        return None
    model = usage.model or usage.response_model
    cost = None
    if prices is not None:
        amount = prices.cost(model, usage.input_tokens or 0, usage.output_tokens or 0)
        if amount is not None:
            cost = money(amount, prices.currency)
    # An HTTP step's record is the call it made, parented to this execution,
    # or an earlier one a cache hit came from (its tokens not spent again).
    child = step.child_execution_id
    cached = step.source == "record" or (
        child is not None and parent_of(child) != execution_id
    )
    return LLMCall(
        usage.provider, model, usage.input_tokens, usage.output_tokens, cost, cached
    )
