"""The detail panel's content and the whole-execution timeline, from real records."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from intentusnet import FileExecutionStore, IntentRouter, Redactor
from intentusnet.cache.prices import PriceTable
from intentusnet.server.ui import create_ui_app
from intentusnet.server.ui.spans import details
from intentusnet.server.ui.timeline import draw

from .sample import record_llm_calls

SECRET = "123-45-6789"


@pytest.fixture(scope="module")
def llm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store with one LLM call made live and the same call answered by the cache."""
    root = tmp_path_factory.mktemp("llm") / "records"
    return root, record_llm_calls(root)


@pytest.fixture
def store(llm: tuple[Path, dict[str, str]]) -> Iterator[FileExecutionStore]:
    """The LLM store, opened for the test."""
    opened = FileExecutionStore(llm[0])
    yield opened
    opened.close()


def _parent_of(store: FileExecutionStore):  # type: ignore[no-untyped-def]
    return lambda execution_id: store.load(execution_id).header.parent_execution_id


def test_llm_call_detail(store: FileExecutionStore, llm: tuple[Path, dict]) -> None:
    """An LLM step shows its model and tokens, priced; a cache hit costs nothing."""
    prices = PriceTable.from_json(
        {"currency": "USD", "models": {"model-*": {"input": 1.0, "output": 2.0}}}
    )
    found = {}
    for role in ("live", "hit"):
        record = store.load(llm[1][role])
        spans = details(record, draw(record), _parent_of(store), prices)
        [call] = [span.llm for span in spans if span.llm is not None]
        found[role] = call
    live, hit = found["live"], found["hit"]
    assert (live.provider, live.model) == ("openai", "model-a")
    assert (live.input_tokens, live.output_tokens) == (2, 4)
    assert live.cost == "0.000010 USD"  # 1e-05: two significant digits
    assert not live.cached
    assert hit.cached
    assert (hit.input_tokens, hit.output_tokens) == (2, 4)


def test_reask_link_only_for_llm_calls(
    store: FileExecutionStore, llm: tuple[Path, dict]
) -> None:
    """The page links an LLM step to its re-ask page, and no other step."""
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/ui/executions/{llm[1]['live']}").text
        plain = client.get(f"/ui/executions/{llm[1]['tool']}").text
    assert f"/ui/executions/{llm[1]['live']}/steps/1/reask" in page
    assert "Re-ask this call" in page
    assert "Re-ask this call" not in plain


def test_attempt_detail_keeps_both_measures(
    store: FileExecutionStore, llm: tuple[Path, dict]
) -> None:
    """An attempt's detail has its input, output, and its agent's own measure."""
    record = store.load(llm[1]["tool"])
    [attempt] = [
        span
        for span in details(record, draw(record), _parent_of(store))
        if span.bar.kind == "attempt"
    ]
    facts = dict(attempt.facts)
    assert facts["Agent"] == "tool"
    assert facts["Duration"] == f"{attempt.bar.duration_ms:.3f} ms"
    assert facts["Agent's own measure"].endswith(" ms")
    titles = [title for title, _ in attempt.sections]
    assert titles == ["Input (the payload)", "Output"]


def test_redacted_values_stay_redacted(tmp_path: Path) -> None:
    """A step's redacted argument shows as its marker in the panel, never the value."""
    store = FileExecutionStore(tmp_path / "records")
    redactor = Redactor(b"0123456789abcdef", args=["ssn"])
    with IntentRouter(store=store, redactor=redactor) as router:
        router.agent("kyc", name="kyc")(
            lambda env, ctx: {"ok": ctx.step("check", {"ssn": SECRET}, lambda ssn: 1)}
        )
        execution_id = router.route_intent({"intent": {"name": "kyc"}}).metadata
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/ui/executions/{execution_id.execution_id}").text
    store.close()
    assert SECRET not in page
    assert "[redacted:hmac-sha256:" in page


def test_timeline_accounts_for_the_whole_call(
    store: FileExecutionStore, llm: tuple[Path, dict]
) -> None:
    """The axis runs from the call's start to the final line; phases fill the ends."""
    record = store.load(llm[1]["tool"])
    timeline = draw(record)
    opened = timeline.opened_ms
    assert opened is not None
    assert opened > 0
    first, last = timeline.bars[0], timeline.bars[-1]
    assert (first.span, first.start_ms, first.end_ms) == ("phase-open", 0.0, opened)
    final = record.events[-1]
    assert last.span == "phase-answer"
    assert last.end_ms == pytest.approx(opened + final.at_ms, abs=0.002)
    assert timeline.total_ms == pytest.approx(last.end_ms, abs=0.002)
    # the response's own duration falls inside the axis, as a marker
    [ready] = [m for m in timeline.markers if m.label.startswith("answer ready")]
    assert ready.at_ms == record.header.duration_ms
    assert 0 < ready.at_ms <= timeline.total_ms
    for bar in timeline.bars:
        assert bar.end_ms is not None
        assert bar.duration_ms is not None
        assert bar.duration_ms == pytest.approx(bar.end_ms - bar.start_ms, abs=0.002)
        drawn = bar.duration_ms / timeline.total_ms * 100
        assert bar.width == pytest.approx(max(drawn, 0.4), abs=0.01)


def test_live_endpoint(store: FileExecutionStore, llm: tuple[Path, dict]) -> None:
    """The live endpoint answers a record's state and its redrawn timeline."""
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        answer = client.get(f"/ui/executions/{llm[1]['tool']}/live").json()
        missing = client.get("/ui/executions/exec-nope/live")
    assert answer["status"] == "completed"
    assert answer["running"] is False
    assert 'id="lane-attempt-1"' in answer["timeline"]
    assert "<template" in answer["timeline"]
    assert missing.status_code == 404
    assert missing.json()["code"] == "record_not_found"


def test_commands_name_the_app(
    store: FileExecutionStore, llm: tuple[Path, dict]
) -> None:
    """Given the application's MODULE:ATTR, the page's commands name it."""
    app = create_ui_app(store, app_ref="shop.agents:router")
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(f"/ui/executions/{llm[1]['tool']}").text
    assert f"intentusnet rerun {llm[1]['tool']} --app shop.agents:router" in page
    assert "MODULE:ATTR" not in page


def test_page_prices_llm_calls(
    store: FileExecutionStore, llm: tuple[Path, dict]
) -> None:
    """Given a price table, a call's detail on the page says what it cost."""
    prices = PriceTable.from_json(
        {"currency": "EUR", "models": {"model-a": {"input": 1.0, "output": 2.0}}}
    )
    app = create_ui_app(store, prices=prices)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(f"/ui/executions/{llm[1]['live']}").text
    assert "<dt>Cost</dt><dd>0.000010 EUR</dd>" in page


def test_invalidation_reason_shown(tmp_path: Path) -> None:
    """An invalidated record's page says why, beside not replayable."""
    store = FileExecutionStore(tmp_path / "records")
    with IntentRouter(store=store) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"ok": True})
        answer = router.route_intent({"intent": {"name": "echo"}})
    execution_id = answer.metadata.execution_id
    store.invalidate(execution_id, "model answered from a stale index")
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        page = client.get(f"/ui/executions/{execution_id}").text
    store.close()
    assert "manually_invalidated" in page
    assert (
        '<span id="invalidated-reason">model answered from a stale index</span>' in page
    )
