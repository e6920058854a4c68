"""What caching saved: calls, tokens and costs added up from a store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from integrations.fakeapi import FakeAPI
from llmkit import Expected, record_calls

from intentusnet import (
    FileExecutionStore,
    IntentRouter,
    MemoryExecutionStore,
    PriceTable,
    ReplayCache,
    SavingsReport,
    open_store,
    savings_report,
)
from intentusnet.cache.savings import UsageLedger

CALLS = [
    ("openai", "gpt-4o-mini", "hello there"),
    ("openai", "gpt-4o-mini", "hello there"),
    ("openai", "gpt-4o-mini", "hello there"),
    ("openai", "gpt-4o", "a longer question asked once"),
    ("anthropic", "claude-3-5-haiku-latest", "bonjour"),
    ("anthropic", "claude-3-5-haiku-latest", "bonjour"),
]
PRICES = PriceTable.from_json(
    {
        "currency": "USD",
        "models": {
            "gpt-4o-mini": {"input": 0.15, "output": 0.6},
            "claude-3-5-haiku*": {"input": 0.8, "output": 4},
        },
    }
)
PROVIDER = {"openai": "openai", "anthropic": "anthropic"}


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """The fake OpenAI and Anthropic API, running."""
    with FakeAPI() as server:
        yield server


def check(report: SavingsReport, expected: dict[tuple[str, str], Expected]) -> None:
    """The report says, model by model and in total, what the calls made."""
    rows = {(m.provider, m.model): m for m in report.models}
    assert set(rows) == {(PROVIDER[sdk], model) for sdk, model in expected}
    for (sdk, model), want in expected.items():
        got = rows[(PROVIDER[sdk], model)]
        assert (got.hits, got.misses, got.calls) == (
            want.hits,
            want.misses,
            want.hits + want.misses,
        )
        assert [got.input_tokens_spent, got.output_tokens_spent] == want.spent
        assert [got.input_tokens_avoided, got.output_tokens_avoided] == want.avoided
    assert report.hits == sum(w.hits for w in expected.values())
    assert report.misses == sum(w.misses for w in expected.values())
    assert report.input_tokens_avoided == sum(w.avoided[0] for w in expected.values())
    assert report.output_tokens_spent == sum(w.spent[1] for w in expected.values())


def test_report_over_a_file_store(api: FakeAPI, tmp_path: Path) -> None:
    """Misses spend their tokens, hits avoid their source record's, by model."""
    store = FileExecutionStore(tmp_path / "records")
    expected = record_calls(store, api.url, CALLS)
    assert api.hits == 3  # the repeats never reached the server
    report = savings_report(store)
    check(report, expected)
    assert report.currency is None
    assert report.cost_avoided is None
    assert report.unpriced == ()
    store.close()


def test_costs_with_a_price_table(api: FakeAPI, tmp_path: Path) -> None:
    """Costs use the exact name or the longest prefix; unpriced models are listed."""
    store = FileExecutionStore(tmp_path / "records")
    expected = record_calls(store, api.url, CALLS)
    report = savings_report(store, PRICES)
    mini = expected[("openai", "gpt-4o-mini")]
    haiku = expected[("anthropic", "claude-3-5-haiku-latest")]
    rows = {m.model: m for m in report.models}
    assert rows["gpt-4o-mini"].cost_avoided == pytest.approx(
        (mini.avoided[0] * 0.15 + mini.avoided[1] * 0.6) / 1e6
    )
    assert rows["claude-3-5-haiku-latest"].cost_spent == pytest.approx(
        (haiku.spent[0] * 0.8 + haiku.spent[1] * 4) / 1e6
    )
    assert rows["gpt-4o"].cost_spent is None
    assert report.unpriced == ("gpt-4o",)
    assert report.currency == "USD"
    assert report.cost_avoided == pytest.approx(
        rows["gpt-4o-mini"].cost_avoided + rows["claude-3-5-haiku-latest"].cost_avoided
    )
    doc = report.to_json()
    assert doc["currency"] == "USD"
    assert doc["calls"] == len(CALLS)
    assert doc["inputTokens"] == {
        "spent": report.input_tokens_spent,
        "avoided": report.input_tokens_avoided,
    }
    assert doc["unpriced"] == ["gpt-4o"]
    assert [m["model"] for m in doc["models"]] == [
        "claude-3-5-haiku-latest",
        "gpt-4o",
        "gpt-4o-mini",
    ]
    store.close()


def test_report_over_postgres(api: FakeAPI, pg_dsn: str) -> None:
    """A PostgreSQL store gives the same report."""
    store = open_store(pg_dsn)
    try:
        expected = record_calls(store, api.url, CALLS)
        check(savings_report(store), expected)
    finally:
        store.close()


def test_records_without_usage_and_their_hits_do_not_count() -> None:
    """An agent's answer without usage, and hits on it, are not LLM calls."""
    store = MemoryExecutionStore()
    with IntentRouter(store=store, cache=ReplayCache()) as router:
        router.agent("plain", name="plain")(lambda env, ctx: {"answer": 42})
        for _ in range(3):
            router.route_intent({"intent": {"name": "plain"}})
    assert store.cache_hit_count() == 2
    report = savings_report(store)
    assert report.models == ()
    assert (report.calls, report.hits, report.misses) == (0, 0, 0)


def test_an_agents_answer_carrying_usage_counts() -> None:
    """Any answer whose payload carries a sound usage object is an LLM call."""
    store = MemoryExecutionStore()
    usage = {"provider": "mine", "model": "m1", "inputTokens": 7, "outputTokens": 2}
    broken = {"provider": "mine", "model": "m1", "inputTokens": -1}
    with IntentRouter(store=store, cache=ReplayCache()) as router:
        router.agent("llm", name="llm")(lambda env, ctx: {"usage": usage})
        router.agent("odd", name="odd")(lambda env, ctx: {"usage": broken})
        for _ in range(4):
            router.route_intent({"intent": {"name": "llm"}})
        router.route_intent({"intent": {"name": "odd"}})
    (row,) = savings_report(store).models
    assert (row.provider, row.model, row.hits, row.misses) == ("mine", "m1", 3, 1)
    assert (row.input_tokens_spent, row.input_tokens_avoided) == (7, 21)
    assert (row.output_tokens_spent, row.output_tokens_avoided) == (2, 6)


def test_ledger_reads_new_records_and_forgets_deleted_ones(
    api: FakeAPI, tmp_path: Path
) -> None:
    """A ledger counts records made after its first report, and drops deleted ones."""
    store = FileExecutionStore(tmp_path / "records")
    ledger = UsageLedger(store)
    record_calls(store, api.url, CALLS[:2])
    first = ledger.report()
    assert (first.hits, first.misses) == (1, 1)
    record_calls(store, api.url, CALLS[3:4])
    second = ledger.report()
    assert (second.hits, second.misses) == (1, 2)
    oldest = store.list()[-1].execution_id  # newest first: the gpt-4o-mini call
    store.delete(oldest)  # its hit no longer counts either
    third = ledger.report()
    assert [(m.model, m.hits, m.misses) for m in third.models] == [("gpt-4o", 0, 1)]
    store.close()
