"""The overview's figures: errors, latency, spend by day (server/ui/overview.py)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from recordkit import finished

from intentusnet import MemoryExecutionStore, PriceTable
from intentusnet.record.model import RecordStatus, RecordSummary
from intentusnet.server.ui import create_ui_app
from intentusnet.server.ui.overview import add_up, percentile
from intentusnet.server.ui.render import NONE
from intentusnet.store import FileExecutionStore
from intentusnet.store.usage import RecordedUsage

from .llm_sample import PRICES

_TODAY = datetime(2026, 3, 10, 12, tzinfo=UTC)


def _row(
    n: int,
    days_ago: int = 0,
    status: str = "completed",
    duration_ms: float | None = 1.0,
) -> RecordSummary:
    """A listed record ``n``, created ``days_ago`` days before _TODAY."""
    created = (_TODAY - timedelta(days=days_ago)).isoformat().replace("+00:00", "Z")
    return RecordSummary(
        f"exec-{n}",
        created,
        "intent",
        "1.0",
        "sha256:" + "0" * 64,
        RecordStatus(status),
        True,
        None,
        "agent",
        duration_ms,
    )


def _figure(html: str, name: str) -> str:
    found = re.search(rf'<dd id="{name}"[^>]*>(.*?)</dd>', html, re.S)
    assert found is not None, name
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", found.group(1))).strip()


def test_overview_figures_of_the_llm_sample(llm_client: TestClient) -> None:
    """Executions, error rate, tokens and spend of the sample, as the page shows."""
    html = llm_client.get("/ui/overview").text
    # 3 fillers, 4 runs, the 4 LLM calls they made live (2 runs were served)
    assert _figure(html, "executions") == "11"
    assert _figure(html, "error-rate") == "9.1%"  # 1 failed of 11
    assert _figure(html, "tokens") == "280,000"
    assert _figure(html, "spend") == "0.030 USD +?"  # o-9 has no price
    assert "+? stands for the calls of o-9" in html
    assert _figure(html, "hits") == "4 (26.7%)"
    assert len(re.findall(r"<tr data-day=", html)) == 1


def test_only_days_with_data_get_a_row() -> None:
    """Records 0, 3 and 9 days ago: three rows, newest first, none between."""
    rows = [_row(1), _row(2, 3), _row(3, 9), _row(4, 9)]
    figures = add_up(_TODAY.date(), rows, ["2026-03-07"], {}, None)
    assert [d.label for d in figures.days] == ["2026-03-10", "2026-03-07", "2026-03-01"]
    assert [d.executions for d in figures.days] == [1, 1, 2]
    assert [d.hits for d in figures.days] == [0, 1, 0]
    assert figures.total.executions == 4
    assert not figures.truncated


def test_latency_percentiles_and_errors() -> None:
    """p50/p95/p99 by nearest rank over finished runs; failures count as errors."""
    rows = [_row(n, duration_ms=float(n)) for n in range(1, 101)]
    rows += [_row(101, status="failed", duration_ms=5000.0)]
    rows += [_row(102, status="in_progress", duration_ms=None)]
    figures = add_up(_TODAY.date(), rows, [], {}, None)
    assert figures.total.latency() == (50.0, 95.0, 99.0)
    assert figures.total.errors == 1
    assert figures.total.running == 1
    assert figures.total.error_rate == pytest.approx(1 / 101)


def test_spend_is_priced_per_day() -> None:
    """Usage the ledger knows is added to its record's day and priced."""
    usage = {
        "exec-1": RecordedUsage("openai", "gpt-4o-mini", 1_000_000, 0),
        "exec-2": RecordedUsage("openai", "gpt-4o-mini", 0, 1_000_000),
        "exec-3": RecordedUsage("openai", "o-9", 5, 5),
    }
    rows = [_row(1), _row(2, 1), _row(3, 1)]
    figures = add_up(_TODAY.date(), rows, [], usage, PriceTable.from_json(PRICES))
    assert [d.cost for d in figures.days] == pytest.approx([0.15, 0.60])
    assert [d.unpriced for d in figures.days] == [set(), {"o-9"}]
    assert figures.total.cost == pytest.approx(0.75)
    assert figures.total.calls == 3
    assert figures.total.input_tokens == 1_000_005


def test_percentile_by_nearest_rank() -> None:
    """The smallest value at least that share of values do not exceed."""
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.99) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.95) == 4.0


def test_a_store_without_a_usage_index_shows_no_spend() -> None:
    """Over the memory store the page says why it shows no tokens or spend."""
    store = MemoryExecutionStore()
    finished(store)
    app = create_ui_app(store, prices=PriceTable.from_json(PRICES))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        html = client.get("/ui/overview").text
    assert _figure(html, "executions") == "1"
    assert (_figure(html, "tokens"), _figure(html, "spend")) == (NONE, NONE)
    assert "this store keeps no index of LLM usage" in html


def test_overview_page_over_an_empty_store(tmp_path: Path) -> None:
    """No records: the page says so instead of drawing empty rows."""
    store = FileExecutionStore(tmp_path / "r")
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        html = client.get("/ui/overview").text
    store.close()
    assert "No records or cache hits in the last 30 days." in html
    assert _figure(html, "p95") == NONE
