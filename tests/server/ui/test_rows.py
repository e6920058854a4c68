"""The records list's extra columns: tokens, cost and error text (server/ui/rows.py)."""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner
from fastapi.testclient import TestClient
from recordkit import edit, finished, record_file

from intentusnet import IntentRouter, PriceTable
from intentusnet.cli import cli
from intentusnet.server import create_app
from intentusnet.server.ui import create_ui_app
from intentusnet.server.ui.render import NONE
from intentusnet.server.ui.rows import money
from intentusnet.store import FileExecutionStore

from .llm_sample import COST, ERROR, PRICES, TOKENS


def _cells(html: str) -> dict[str, dict[str, str]]:
    """The tokens, cost and error cells (text and title) of each row, by id."""
    found = {}
    for execution_id, row in re.findall(
        r'<tr data-id="([^"]+)">(.*?)</tr>', html, re.S
    ):
        cells = re.findall(
            r'<td class="([^"]*)"(?: title="([^"]*)")?>(.*?)</td>', row, re.S
        )
        by_class = {
            name: (re.sub(r"<[^>]+>", "", text).strip(), title)
            for classes, title, text in cells
            for name in ("tokens", "cost", "error-text")
            if name in classes.split()
        }
        found[execution_id] = {
            "tokens": by_class["tokens"][0],
            "tokens_title": by_class["tokens"][1],
            "cost": by_class["cost"][0],
            "cost_title": by_class["cost"][1],
            "error": by_class["error-text"][0],
        }
    return found


def test_tokens_and_cost_of_the_calls_an_execution_made(
    llm_client: TestClient, llm_sample: tuple[Path, dict[str, str]]
) -> None:
    """A run's row adds up its live LLM calls' tokens and prices them."""
    ids = llm_sample[1]
    cells = _cells(llm_client.get("/ui?intent=chat.answer").text)
    spent = cells[ids["spent"]]
    assert spent["tokens"] == TOKENS
    assert spent["tokens_title"] == (
        "120,000 input + 20,000 output tokens in 2 LLM calls"
    )
    assert spent["cost"] == COST
    assert spent["cost_title"] == spent["tokens_title"]  # for narrow tables
    assert spent["error"] == NONE


def test_cache_hits_spend_nothing(
    llm_client: TestClient, llm_sample: tuple[Path, dict[str, str]]
) -> None:
    """A run whose calls the cache answered shows no tokens, and says why."""
    ids = llm_sample[1]
    cached = _cells(llm_client.get("/ui?intent=chat.answer").text)[ids["cached"]]
    assert cached["tokens"] == NONE
    assert cached["cost"] == NONE
    assert cached["tokens_title"] == "2 LLM calls served from the cache"


def test_a_model_without_a_price_is_not_guessed(
    llm_client: TestClient, llm_sample: tuple[Path, dict[str, str]]
) -> None:
    """Tokens of a model the table does not price are counted, their cost '?'."""
    ids = llm_sample[1]
    unpriced = _cells(llm_client.get("/ui?intent=chat.answer").text)[ids["unpriced"]]
    assert unpriced["tokens"] == TOKENS
    assert unpriced["cost"] == "?"
    assert unpriced["cost_title"] == (
        "120,000 input + 20,000 output tokens in 2 LLM calls; no price for o-9"
    )


def test_failed_run_shows_its_error_text(
    llm_client: TestClient, llm_sample: tuple[Path, dict[str, str]]
) -> None:
    """A failed run's row holds its error code and message."""
    ids = llm_sample[1]
    failed = _cells(llm_client.get("/ui?intent=chat.answer").text)[ids["failed"]]
    assert failed["error"].startswith(f"{ERROR}: ")
    assert "the model&#39;s answer did not parse" in failed["error"]


def test_an_llm_calls_own_record_carries_its_tokens(llm_client: TestClient) -> None:
    """The http.request record of one call shows that call's tokens."""
    cells = _cells(llm_client.get("/ui?intent=http.request").text)
    assert sorted(c["tokens"] for c in cells.values()) == [
        "110,000",
        "110,000",
        "30,000",
        "30,000",
    ]


def test_without_a_price_table_costs_are_blank(
    llm_sample: tuple[Path, dict[str, str]],
) -> None:
    """No --prices: tokens still shown, cost '-', and the page says how to price."""
    root, ids = llm_sample
    store = FileExecutionStore(root)
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        html = client.get("/ui?intent=chat.answer").text
    store.close()
    spent = _cells(html)[ids["spent"]]
    assert (spent["tokens"], spent["cost"]) == (TOKENS, NONE)
    assert "start the explorer with <code>--prices FILE</code>" in html


def test_serve_prices_its_explorer_too(
    llm_sample: tuple[Path, dict[str, str]],
) -> None:
    """``create_app(router, prices=...)`` (serve --prices) prices the /ui list."""
    root, ids = llm_sample
    router = IntentRouter(store=FileExecutionStore(root))
    app = create_app(router, prices=PriceTable.from_json(PRICES), close_router=True)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        html = client.get("/ui?intent=chat.answer").text
    assert _cells(html)[ids["spent"]]["cost"] == COST


def test_ids_are_shown_short_and_linked_whole(
    llm_client: TestClient, llm_sample: tuple[Path, dict[str, str]]
) -> None:
    """An id shows as its start and end; the link and its title hold all of it."""
    spent = llm_sample[1]["spent"]
    html = llm_client.get("/ui?intent=chat.answer").text
    link = (
        f'href="/ui/executions/{spent}" title="{spent}">{spent[:13]}…{spent[-4:]}</a>'
    )
    assert link in html


def test_a_damaged_record_says_so_in_its_row(tmp_path: Path) -> None:
    """A record failing verification keeps its row; its error cell says so."""
    store = FileExecutionStore(tmp_path / "r")
    good, bad = finished(store, "one"), finished(store, "two")
    edit(record_file(store, bad), 40)
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        cells = _cells(client.get("/ui").text)
    store.close()
    assert cells[good]["error"] == NONE
    assert cells[bad]["error"] == "the record fails verification: open it to see why"


def test_money_is_readable() -> None:
    """Costs under 1 keep four decimals; larger ones two, with separators."""
    assert money(0.03, "USD") == "0.0300 USD"
    assert money(1234.5, "EUR") == "1,234.50 EUR"


def test_ui_refuses_a_bad_price_table(tmp_path: Path) -> None:
    """``ui --prices`` with a broken file stops before serving: exit 2, named."""
    bad = tmp_path / "prices.json"
    bad.write_text('{"currency": "USD", "models": {"m": {"input": -1, "output": 0}}}')
    result = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "r"), "ui", "--prices", str(bad)]
    )
    assert result.exit_code == 2
    assert "models['m'].input" in result.output
