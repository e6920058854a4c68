"""The records list's extra columns: tokens, cost and error text (server/ui/rows.py)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from click.testing import CliRunner
from fastapi.testclient import TestClient
from recordkit import edit, finished, record_file

from intentusnet import IntentRouter, PriceTable
from intentusnet.cli import cli
from intentusnet.integrations.httpx import RecordingTransport
from intentusnet.server import create_app
from intentusnet.server.ui import create_ui_app
from intentusnet.server.ui.render import NONE, money
from intentusnet.server.ui.rows import row_usage
from intentusnet.store import FileExecutionStore

from .llm_sample import COST, ERROR, PRICES, TOKENS, fake_api
from .long_sample import CALL_COST, TWO_CALLS_COST, make_long_store
from .long_sample import PRICES as LONG_PRICES


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
            name: (re.sub(r"<[^>]+>", "", text).strip(), title, classes.split())
            for classes, title, text in cells
            for name in ("tokens", "cost", "error-text")
            if name in classes.split()
        }
        tokens, tokens_title, tokens_classes = by_class["tokens"]
        marker = re.search(r'<small class="calls">(.*?)</small>', row)
        found[execution_id] = {
            "tokens": tokens.split("incl.")[0].strip(),
            "tokens_title": tokens_title,
            "cost": by_class["cost"][0].split("incl.")[0].strip(),
            "cost_title": by_class["cost"][1],
            "error": by_class["error-text"][0],
            "included": marker.group(1) if marker else "",
            "gathered": "gathered" in tokens_classes,
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
    assert spent["included"] == "incl. 2 calls"
    assert spent["gathered"]
    assert spent["tokens_title"] == (
        "120,000 input + 20,000 output tokens in the 2 LLM calls it made, "
        "each counted on its own row (http.request)"
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
        "120,000 input + 20,000 output tokens in the 2 LLM calls it made, "
        "each counted on its own row (http.request); no price for o-9"
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
    """The http.request record of one call shows that call's tokens, as counted."""
    cells = _cells(llm_client.get("/ui?intent=http.request").text)
    assert sorted(c["tokens"] for c in cells.values()) == [
        "110,000",
        "110,000",
        "30,000",
        "30,000",
    ]
    assert not any(c["gathered"] or c["included"] for c in cells.values())
    assert {c["tokens_title"] for c in cells.values()} == {
        "100,000 input + 10,000 output tokens in this LLM call",
        "20,000 input + 10,000 output tokens in this LLM call",
    }


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
        f'href="/ui/executions/{spent}" title="{spent}" aria-label="{spent}">'
        '<span class="id-start">'
        f'{spent[:-4]}</span><span class="id-end">{spent[-4:]}</span></a>'
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


def test_money_keeps_two_significant_digits() -> None:
    """Below 1: two significant digits, never 0.0000; from 1 up: two decimals."""
    assert money(5.85e-06, "USD") == "0.0000059 USD"  # half up, as written
    assert money(0.03, "USD") == "0.030 USD"
    assert money(0.5, "USD") == "0.50 USD"
    assert money(0.00096, "USD") == "0.00096 USD"
    assert money(0.0999, "USD") == "0.100 USD"  # rounded up a digit
    assert money(0.996, "USD") == "1.00 USD"
    assert money(0.0, "USD") == "0.00 USD"
    assert money(1234.5, "EUR") == "1,234.50 EUR"
    assert money(2.0, "EUR") == "2.00 EUR"


def test_list_overview_and_panel_write_money_alike(tmp_path: Path) -> None:
    """A 5.85e-06 USD call reads 0.0000059 USD in the list, overview and panel."""
    root = tmp_path / "records"
    ids = make_long_store(root)
    store = FileExecutionStore(root)
    app = create_ui_app(store, prices=PriceTable.from_json(LONG_PRICES))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        cells = _cells(client.get("/ui").text)
        overview = client.get("/ui/overview").text
        page = client.get(f"/ui/executions/{ids['spent']}").text
    store.close()
    calls = [c for c in cells.values() if c["tokens"] == "39"]
    assert len(calls) == 4
    assert {c["cost"] for c in calls} == {CALL_COST}
    assert cells[ids["spent"]]["cost"] == TWO_CALLS_COST
    # 4 calls of 5.85e-06 USD: 2.34e-05
    assert re.search(r'<dd id="spend"[^>]*>0\.000023 USD</dd>', overview)
    assert page.count(f"<dt>Cost</dt><dd>{CALL_COST}</dd>") == 2  # each step's panel


def _one_call_store(root: Path) -> str:
    """An agent that makes one LLM call of 5,000 + 1,000 tokens; its id."""
    store = FileExecutionStore(root)
    transport = RecordingTransport(
        store, mode="record", wrapped=httpx.MockTransport(fake_api)
    )
    http = httpx.Client(transport=transport)

    def ask(env, ctx):  # type: ignore[no-untyped-def]
        body = {"model": "gpt-4o-mini", "messages": [{"content": "5000/1000"}]}
        http.post("http://llm.test/v1/chat/completions", json=body)
        return {"ok": True}

    with IntentRouter(store=store) as router:
        router.agent("ask", name="asker")(ask)
        found = router.route_intent({"intent": {"name": "ask"}})
    http.close()
    transport.close()
    store.close()
    return str(found.metadata.execution_id)


def test_each_llm_call_is_counted_once(tmp_path: Path) -> None:
    """One 6,000-token call: the list counts 6,000, as the overview, not 12,000."""
    agent = _one_call_store(tmp_path / "records")
    store = FileExecutionStore(tmp_path / "records")
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        cells = _cells(client.get("/ui").text)
        overview = client.get("/ui/overview").text
    store.close()
    assert len(cells) == 2  # the agent's record and its call's http.request
    counted = [
        int(c["tokens"].replace(",", "")) for c in cells.values() if not c["gathered"]
    ]
    assert sum(counted) == 6_000
    assert re.search(r'<dd id="tokens"[^>]*>6,000</dd>', overview)
    # the agent's row shows its call's total, marked as gathered from that row
    assert cells[agent]["tokens"] == "6,000"
    assert cells[agent]["gathered"]
    assert cells[agent]["included"] == "incl. 1 call"


def test_row_usage_tells_own_calls_from_made_calls(tmp_path: Path) -> None:
    """row_usage: the call record's usage is its own; the agent's are its calls."""
    agent = _one_call_store(tmp_path / "records")
    store = FileExecutionStore(tmp_path / "records")
    record = store.load(agent)
    usage = row_usage(store, record)
    [call_id] = [s.execution_id for s in store.list() if s.execution_id != agent]
    call = row_usage(store, store.load(call_id))
    store.close()
    assert usage.own is None
    assert [(c.input_tokens, c.output_tokens) for c in usage.calls] == [(5000, 1000)]
    assert call.own is not None
    assert (call.own.input_tokens, call.own.output_tokens) == (5000, 1000)
    assert call.calls == []
    assert usage.hits == call.hits == 0


def test_ui_refuses_a_bad_price_table(tmp_path: Path) -> None:
    """``ui --prices`` with a broken file stops before serving: exit 2, named."""
    bad = tmp_path / "prices.json"
    bad.write_text('{"currency": "USD", "models": {"m": {"input": -1, "output": 0}}}')
    result = CliRunner().invoke(
        cli, ["--store", str(tmp_path / "r"), "ui", "--prices", str(bad)]
    )
    assert result.exit_code == 2
    assert "models['m'].input" in result.output
