"""The records list and the overview in headless Chromium, at phone and desktop width.

One ``intentusnet ui --prices FILE`` subprocess and one browser for the module;
each page is measured at 390 and 1280 px, light and dark: nothing wider than
the window, the columns that matter shown with their values. Screenshots go
under the test's temporary directory (``scripts/screenshots.py`` makes those
docs/ui.md shows).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from livekit import UiProcess

from .chromium import TIMEOUT_MS, chromium_path, launched
from .llm_sample import COST, TOKENS, make_llm_store, write_prices

pytestmark = pytest.mark.slow

# a phone, a small laptop (the middle layout), a desktop
_LOOKS = [
    (390, "light"),
    (390, "dark"),
    (1024, "light"),
    (1280, "light"),
    (1280, "dark"),
]
_BACKGROUND = {"light": "rgb(255, 255, 255)", "dark": "rgb(17, 20, 24)"}


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    """``intentusnet ui --prices`` over the LLM sample, in a subprocess: (url, ids)."""
    chromium_path()  # before starting anything
    where = tmp_path_factory.mktemp("browser-records")
    ids = make_llm_store(where / "records", padding=3)
    ui = UiProcess(where / "records", "--prices", str(write_prices(where)))
    try:
        yield ui.url, ids
    finally:
        ui.stop()


@pytest.fixture(scope="module")
def browser(explorer: tuple[str, dict]) -> Iterator[Any]:
    """Headless Chromium, one for the module."""
    with launched() as chromium:
        yield chromium


def _open(browser: Any, url: str, width: int, scheme: str) -> tuple[Any, Any]:
    """A page at ``width`` px in ``scheme``, at ``url``: (context, page)."""
    context = browser.new_context(
        viewport={"width": width, "height": 900}, color_scheme=scheme
    )
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.goto(url)
    page.wait_for_load_state("load")
    assert errors == []
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert background == _BACKGROUND[scheme]  # the scheme asked for is drawn
    return context, page


def _fits(page: Any) -> None:
    """Nothing is wider than the window: the page never scrolls sideways."""
    wide = page.evaluate(
        "[document.documentElement.scrollWidth, document.body.scrollWidth, "
        "window.innerWidth]"
    )
    assert max(wide[:2]) <= wide[2], wide
    # and no table spills out of the page's column
    spill = page.evaluate(
        """(() => {
          const main = document.querySelector('main');
          const edge = main.getBoundingClientRect().right
            - parseFloat(getComputedStyle(main).paddingRight);
          return [...main.querySelectorAll('table')]
            .map(t => t.getBoundingClientRect().right - edge)
            .filter(over => over > 0.5);
        })()"""
    )
    assert spill == []


def _visible_headers(page: Any) -> list[str]:
    return [
        h.inner_text().strip()
        for h in page.locator("table.records thead th").all()
        if h.is_visible()
    ]


@pytest.mark.parametrize(("width", "scheme"), _LOOKS)
def test_records_list_fits_and_shows_costs(
    browser: Any, explorer: tuple[str, dict], tmp_path: Path, width: int, scheme: str
) -> None:
    """The list fits the window; the cost and the error text show their values."""
    url, ids = explorer
    context, page = _open(browser, f"{url}/ui", width, scheme)
    try:
        _fits(page)
        headers = _visible_headers(page)
        assert {"Execution", "Status", "Cost"} <= set(headers)
        if width == 390:  # the error goes on a line of its own, under its row
            assert not {"Created (UTC)", "Agent", "Tokens", "Error"} & set(headers)
        else:  # by priority: replay < 1440, agent < 1320, duration < 1180 px ...
            assert {"Intent", "Tokens", "Error"} <= set(headers)
            assert "Replay" not in headers
            assert "Agent" not in headers
            assert ("Duration" in headers) is (width >= 1180)
            assert ("Created (UTC)" in headers) is (width >= 1060)
        # the run's row gathers its calls' figures and says so (each call is
        # counted on its own row); where the tokens are dropped, the cost says it
        spent = page.locator(f'tr[data-id="{ids["spent"]}"]')
        if width > 390:
            assert spent.locator("td.cost").inner_text() == COST
            assert spent.locator("td.tokens").inner_text() == f"{TOKENS}\nincl. 2 calls"
        else:
            assert spent.locator("td.cost").inner_text() == f"{COST}\nincl. 2 calls"
        failed = page.locator(f'tr[data-id="{ids["failed"]}"] td.error-text')
        assert failed.inner_text().startswith("AGENT_ERROR: ")
        link = spent.locator("a.mono")
        assert link.evaluate("a => a.getClientRects().length") == 1  # one line
        box = link.bounding_box()
        assert box is not None
        assert box["height"] < 24
        page.screenshot(path=str(tmp_path / f"records-{width}-{scheme}.png"))
    finally:
        context.close()


@pytest.mark.parametrize(("width", "scheme"), _LOOKS)
def test_overview_fits_and_shows_the_figures(
    browser: Any, explorer: tuple[str, dict], tmp_path: Path, width: int, scheme: str
) -> None:
    """The overview fits the window and shows error rate, p95 and spend."""
    url, _ = explorer
    context, page = _open(browser, f"{url}/ui/overview", width, scheme)
    try:
        _fits(page)
        assert page.locator("#executions").inner_text() == "11"
        assert page.locator("#error-rate").inner_text() == "9.1%"
        assert page.locator("#p95").is_visible()
        assert page.locator("#spend").inner_text() == "0.030 USD +?"
        rows = page.locator("table.daily tbody tr")
        assert rows.count() == 1  # one day with records, no empty days
        assert rows.first.locator("td.spend").is_visible()
        page.screenshot(
            path=str(tmp_path / f"overview-{width}-{scheme}.png"), full_page=True
        )
    finally:
        context.close()


def test_search_by_payload_value_from_the_form(
    browser: Any, explorer: tuple[str, dict]
) -> None:
    """Typing an intent and payload.PATH=VALUE lists the one run that holds it."""
    url, ids = explorer
    context, page = _open(browser, f"{url}/ui", 390, "light")
    try:
        page.get_by_label("Intent").fill("chat.answer")
        page.get_by_label("Search").fill("payload.customer.email=ada@example.com")
        page.get_by_role("button", name="Filter").click()
        page.wait_for_url("**/ui?*q=payload.customer.email*")
        rows = page.locator("table.records tbody tr")
        assert rows.count() == 1
        assert rows.first.get_attribute("data-id") == ids["spent"]
        assert (
            "Read 4 records of intent chat.answer"
            in page.locator("#scan-note").inner_text()
        )
        _fits(page)
    finally:
        context.close()
