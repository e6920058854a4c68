"""The explorer over long content in headless Chromium, at 1280, 1366 and 390 px.

A real store holds long intent names, long errors, parked executions and LLM
calls costing millionths of a dollar (``long_sample.py``); the pages must fit
the window all the same. One ``intentusnet ui --prices`` subprocess and one
browser serve the module; each page is measured in light and dark: the page
never scrolls sideways (``scrollWidth <= clientWidth``), and from 1280 px the
detail panel's box meets no timeline bar's. The screenshots go under the
test's temporary directory.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from livekit import UiProcess

from .chromium import TIMEOUT_MS, chromium_path, launched
from .long_sample import (
    CALL_COST,
    LONG_INTENT,
    PRICES,
    TWO_CALLS_COST,
    make_long_store,
)

pytestmark = pytest.mark.slow

LOOKS = [(width, scheme) for width in (1280, 1366, 390) for scheme in ("light", "dark")]

#: The page's width against the window's, and every bar's and the panel's box.
_MEASURE = """() => {
  const box = e => { const r = e.getBoundingClientRect();
    return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; };
  const panel = document.getElementById('panel');
  const timeline = document.getElementById('timeline');
  return {
    scroll: document.documentElement.scrollWidth,
    client: document.documentElement.clientWidth,
    bars: [...document.querySelectorAll('.timeline .bar, .timeline .marker')].map(box),
    timeline: timeline && box(timeline),
    panel: panel && !panel.hidden ? box(panel) : null,
  };
}"""


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    """``intentusnet ui --prices`` over the long sample, in a subprocess: (url, ids)."""
    chromium_path()  # before starting anything
    where = tmp_path_factory.mktemp("browser-long")
    ids = make_long_store(where / "records")
    prices = where / "prices.json"
    prices.write_bytes(orjson.dumps(PRICES))
    ui = UiProcess(where / "records", "--prices", str(prices))
    try:
        yield ui.url, ids
    finally:
        ui.stop()


@pytest.fixture(scope="module")
def browser(explorer: tuple[str, dict]) -> Iterator[Any]:
    """Headless Chromium, one for the module."""
    with launched() as chromium:
        yield chromium


def _open(browser: Any, url: str, width: int, scheme: str) -> tuple[Any, Any, list]:
    """A page at ``width`` px in ``scheme`` at ``url``; its script errors and 4xx."""
    context = browser.new_context(
        viewport={"width": width, "height": 900}, color_scheme=scheme
    )
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    problems: list[str] = []
    page.on("pageerror", lambda error: problems.append(str(error)))
    page.on(
        "response",
        lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None,
    )
    page.goto(url)
    page.wait_for_load_state("load")
    return context, page, problems


def _fits(page: Any, where: str) -> dict:
    """The page does not scroll sideways; return what was measured."""
    found: dict = page.evaluate(_MEASURE)
    assert found["scroll"] <= found["client"], (where, found["scroll"])
    return found


def _box(found: dict) -> dict:
    """A Playwright bounding box (x, y, width, height) as edges."""
    return {
        "left": found["x"],
        "right": found["x"] + found["width"],
        "top": found["y"],
        "bottom": found["y"] + found["height"],
    }


def _meets(a: dict, b: dict) -> bool:
    """Whether two boxes overlap (touching edges do not)."""
    return (
        a["left"] < b["right"]
        and b["left"] < a["right"]
        and a["top"] < b["bottom"]
        and b["top"] < a["bottom"]
    )


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_records_list_fits_long_content(
    browser: Any, explorer: tuple[str, dict], tmp_path: Path, width: int, scheme: str
) -> None:
    """No sideways scroll; long values cut, whole on focus; the id's end shown."""
    url, ids = explorer
    context, page, problems = _open(browser, f"{url}/ui", width, scheme)
    try:
        page.screenshot(
            path=str(tmp_path / f"long-records-{width}-{scheme}.png"), full_page=True
        )
        _fits(page, f"records at {width} px, {scheme}")
        for row in page.locator("table.records tbody tr").all():
            end = row.locator("a.short-id .id-end")
            status = row.locator("td.c-status .status")
            end_box = _box(end.bounding_box())
            status_box = _box(status.bounding_box())
            assert end.is_visible()
            assert not _meets(end_box, status_box), (width, end_box, status_box)
            link = _box(row.locator("a.short-id").bounding_box())
            assert end_box["right"] <= link["right"] + 0.5  # not cut off
        spent = page.locator(f'tr[data-id="{ids["spent"]}"]')
        assert spent.locator("td.cost").inner_text().startswith(TWO_CALLS_COST)
        assert "incl. 2 calls" in spent.locator("td.cost").inner_text() or width > 899
        if width == 390:
            return
        assert "incl. 2 calls" in spent.locator("td.tokens").inner_text()
        # the long intent is cut, whole in its title and shown whole on focus
        intent = spent.locator("td.c-intent a")
        assert intent.get_attribute("title").startswith(f"{LONG_INTENT}@1.0")
        assert intent.evaluate("a => a.scrollWidth > a.clientWidth")
        intent.focus()
        assert intent.evaluate("a => a.scrollWidth <= a.clientWidth")
        _fits(page, f"records at {width} px, {scheme}, the intent focused")
        error = page.locator(f'tr[data-id="{ids["failed"]}"] td.error-text span')
        assert error.evaluate("e => e.scrollHeight > e.clientHeight")  # clamped
        error.focus()
        assert error.evaluate("e => e.scrollHeight <= e.clientHeight")
        calls = page.locator("table.records tbody tr", has_text="http.request")
        assert calls.count() == 4
        assert {c.locator("td.cost").inner_text() for c in calls.all()} == {CALL_COST}
    finally:
        context.close()
    assert problems == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_detail_panel_beside_the_timeline(
    browser: Any, explorer: tuple[str, dict], tmp_path: Path, width: int, scheme: str
) -> None:
    """From 1280 px the open panel covers no bar; below, it is a sheet under them."""
    url, ids = explorer
    address = f"{url}/ui/executions/{ids['spent']}#step-1"
    context, page, problems = _open(browser, address, width, scheme)
    try:
        assert page.locator("#panel").is_visible()
        assert CALL_COST in page.locator("#panel").inner_text()
        page.screenshot(path=str(tmp_path / f"long-panel-{width}-{scheme}.png"))
        found = _fits(page, f"execution at {width} px, {scheme}")
        assert len(found["bars"]) >= 5
        panel = found["panel"]
        for bar in found["bars"]:
            assert not _meets(bar, panel), (width, bar, panel)
        if width >= 1280:  # beside: to the right of the timeline, at its height
            assert panel["left"] >= found["timeline"]["right"]
            assert panel["top"] < found["timeline"]["bottom"]
        else:  # a sheet under the timeline
            assert panel["top"] >= found["timeline"]["bottom"]
        page.keyboard.press("Escape")
        closed = _fits(page, f"execution at {width} px, {scheme}, closed")
        assert closed["panel"] is None
        # closed, the timeline takes the whole width again
        assert closed["timeline"]["right"] > found["timeline"]["right"] or width < 1280
    finally:
        context.close()
    assert problems == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_parked_execution_reads_as_parked(
    browser: Any, explorer: tuple[str, dict], tmp_path: Path, width: int, scheme: str
) -> None:
    """Its own colour, a parked badge and no replayable one, the reason said once."""
    url, ids = explorer
    address = f"{url}/ui/executions/{ids['parked']}"
    context, page, problems = _open(browser, address, width, scheme)
    try:
        page.screenshot(
            path=str(tmp_path / f"long-parked-{width}-{scheme}.png"), full_page=True
        )
        _fits(page, f"parked at {width} px, {scheme}")
        status = page.locator("#record-status")
        assert status.inner_text() == "needs_attention"
        colour = status.evaluate("e => getComputedStyle(e).color")
        others = page.evaluate(
            """() => ['ok', 'bad', 'warn', 'fg'].map(name => {
              const probe = document.createElement('span');
              probe.style.color = `var(--${name})`;
              document.body.append(probe);
              const colour = getComputedStyle(probe).color;
              probe.remove();
              return colour;
            })"""
        )
        assert colour not in others  # not completed's, failed's, running's, nor plain
        badges = page.locator("p.badges").inner_text()
        assert "parked" in badges
        assert "replayable" not in badges
        reason = page.locator("#parked-reason").inner_text()
        assert "side_effect_in_doubt" in reason
        message = "it may or may not have happened"
        assert message in reason
        # said once on the page as shown (closed JSON and the bars' details aside)
        assert page.locator("main").inner_text().count(message) == 1
    finally:
        context.close()
    assert problems == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_diff_of_long_runs_fits(
    browser: Any, explorer: tuple[str, dict], tmp_path: Path, width: int, scheme: str
) -> None:
    """Two runs with long intent and agent names side by side: no sideways scroll."""
    url, ids = explorer
    address = f"{url}/ui/diff?a={ids['unbroken']}&b={ids['spent']}"
    context, page, problems = _open(browser, address, width, scheme)
    try:
        page.screenshot(
            path=str(tmp_path / f"long-diff-{width}-{scheme}.png"), full_page=True
        )
        assert page.locator("#verdict").is_visible()
        _fits(page, f"diff at {width} px, {scheme}")
    finally:
        context.close()
    assert problems == []


@pytest.mark.parametrize(("width", "scheme"), [(390, "light"), (390, "dark")])
def test_reask_form_fits_a_phone(
    browser: Any, explorer: tuple[str, dict], tmp_path: Path, width: int, scheme: str
) -> None:
    """The re-ask page of a recorded call does not scroll sideways at 390 px."""
    url, ids = explorer
    address = f"{url}/ui/executions/{ids['spent']}/steps/1/reask"
    context, page, problems = _open(browser, address, width, scheme)
    try:
        page.screenshot(
            path=str(tmp_path / f"long-reask-{width}-{scheme}.png"), full_page=True
        )
        assert page.locator("form#reask textarea").is_visible()
        _fits(page, f"reask at {width} px, {scheme}")
    finally:
        context.close()
    assert problems == []


@pytest.mark.parametrize(("width", "scheme"), LOOKS)
def test_overview_fits_and_writes_tiny_costs(
    browser: Any, explorer: tuple[str, dict], tmp_path: Path, width: int, scheme: str
) -> None:
    """The overview fits and its spend of 4 calls at 5.85e-06 USD is not 0.0000."""
    url, _ = explorer
    context, page, problems = _open(browser, f"{url}/ui/overview", width, scheme)
    try:
        page.screenshot(
            path=str(tmp_path / f"long-overview-{width}-{scheme}.png"), full_page=True
        )
        _fits(page, f"overview at {width} px, {scheme}")
        assert page.locator("#spend").inner_text() == "0.000023 USD"
        assert page.locator("table.daily td.spend").first.inner_text() == (
            "0.000023 USD"
        )
    finally:
        context.close()
    assert problems == []
