"""The explorer in a real browser: headless Chromium driven by Playwright.

``intentusnet ui`` runs as a real subprocess on a free loopback port; Debian's
``chromium`` is driven through ``executable_path`` (no browser download). In CI
(``CI=true``) a missing Chromium or Playwright fails these tests; elsewhere they
skip, saying what to install.

``INTENTUSNET_SCREENSHOTS=docs/img`` writes the screenshots docs/ui.md shows.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from livekit import UiProcess

from .chromium import TIMEOUT_MS, chromium_path, launched
from .sample import HOSTILE, make_store

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    """``intentusnet ui`` over the sample store, in a subprocess: (url, ids)."""
    executable = chromium_path()  # before starting anything
    del executable
    root = tmp_path_factory.mktemp("browser") / "records"
    ids = make_store(root)
    ui = UiProcess(root)
    try:
        yield ui.url, ids
    finally:
        ui.stop()


@pytest.fixture(scope="module")
def browser(explorer: tuple[str, dict]) -> Iterator[Any]:
    """Headless Chromium, one for the module."""
    with launched() as chromium:
        yield chromium


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    """A fresh page with bounded waits; the test fails on any script error."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    yield page
    context.close()
    assert errors == []


def test_list_filter_and_open_a_record(page: Any, explorer: tuple[str, dict]) -> None:
    """The list loads; filtering by status narrows it; a row opens its record."""
    url, ids = explorer
    page.goto(url + "/ui")
    assert page.locator("table.records tbody tr").count() >= len(ids)
    page.get_by_label("Status").select_option("failed")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**/ui?status=failed*")
    rows = page.locator("table.records tbody tr")
    assert rows.count() == 1
    rows.get_by_role("link", name=ids["failed"]).click()
    page.wait_for_url(f"**/ui/executions/{ids['failed']}")
    assert page.locator("#verified").inner_text().endswith("lines verified")


def test_timeline_has_a_bar_per_attempt(page: Any, explorer: tuple[str, dict]) -> None:
    """A fallback's page draws one visible bar per attempt, and the fallback."""
    url, ids = explorer
    page.goto(f"{url}/ui/executions/{ids['fallback']}")
    bars = page.locator(".timeline .bar.attempt")
    assert bars.count() == 2
    for n in range(2):
        box = bars.nth(n).bounding_box()
        assert box is not None
        assert box["width"] >= 1
    assert page.locator(".timeline .marker[title^=fallback]").count() == 1
    page.get_by_text("Traceback", exact=True).click()
    assert page.locator("pre.traceback").first.is_visible()


def test_diff_from_two_ticked_rows(page: Any, explorer: tuple[str, dict]) -> None:
    """Ticking two rows enables the diff button; the diff marks the deviation."""
    url, ids = explorer
    page.goto(url + "/ui?intent=crm.qualify")
    compare = page.get_by_role("button", name="Diff the two selected")
    assert compare.is_disabled()
    page.get_by_label(f"Compare {ids['steps']}").check()
    page.get_by_label(f"Compare {ids['steps2']}").check()
    assert compare.is_enabled()
    compare.click()
    page.wait_for_url("**/ui/diff?*")
    assert page.locator("#deviation").is_visible()
    assert "crm.lookup" in page.locator("#verdict").inner_text()


def test_script_payload_does_not_run(page: Any, explorer: tuple[str, dict]) -> None:
    """A payload of script and onerror markup shows as text and runs nothing."""
    url, ids = explorer
    page.goto(f"{url}/ui/executions/{ids['hostile']}")
    page.wait_for_load_state("load")
    assert page.evaluate("window.__pwned") is None
    assert (
        "<script>window.__pwned = true</script>"
        in page.locator("pre").first.inner_text()
    )
    assert page.locator("main img").count() == 0
    # shown as the JSON string it is, quotes escaped, every character intact
    assert json.dumps(HOSTILE) in page.locator("pre").first.inner_text()


def test_keyboard_reaches_the_content(page: Any, explorer: tuple[str, dict]) -> None:
    """Tab first reaches the skip link; every form control has a label."""
    url, _ = explorer
    page.goto(url + "/ui")
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    unlabelled = page.evaluate(
        """[...document.querySelectorAll('input:not([type=hidden]), select')]
           .filter(e => !e.labels.length && !e.getAttribute('aria-label')).length"""
    )
    assert unlabelled == 0


def test_api_docs_render_offline(browser: Any, tmp_path: Path) -> None:
    """/docs draws every operation from the service's own assets, nothing remote."""
    from livekit import echo_router, serving

    from intentusnet.server import create_app

    with (
        echo_router(tmp_path / "records") as router,
        serving(create_app(router)) as live,
    ):
        context = browser.new_context()
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        requested: list[str] = []
        page.on("request", lambda request: requested.append(request.url))
        page.goto(live.url + "/docs")
        page.locator(".opblock").first.wait_for()
        assert page.locator(".opblock").count() >= 7
        context.close()
    assert requested
    assert all(url.startswith(live.url) for url in requested), requested


def test_signatures_checked_with_trusted_keys(
    browser: Any, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Under ``ui --key``, a signed record shows verified, a resealed one invalid."""
    from .test_pages import signed_store

    where = tmp_path_factory.mktemp("signed")
    key, ids = signed_store(where / "records")
    _, public = key.save(where / "keys")
    ui = UiProcess(where / "records", "--key", str(public))
    context = browser.new_context()
    try:
        page = context.new_page()
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(f"{ui.url}/ui/executions/{ids['good']}")
        good = page.locator("#signature")
        assert good.inner_text() == f"signed by key {key.key_id}, verified"
        assert good.get_attribute("data-state") == "signed-valid"
        page.goto(f"{ui.url}/ui/executions/{ids['forged']}")
        assert page.locator("#signature").inner_text() == "signature invalid"
        detail = page.locator("#signature-detail")
        assert detail.is_visible()
        assert key.key_id in detail.inner_text()
    finally:
        context.close()
        ui.stop()


def test_screenshots(page: Any, explorer: tuple[str, dict], tmp_path: Path) -> None:
    """Every page renders to a screenshot (into $INTENTUSNET_SCREENSHOTS if set)."""
    url, ids = explorer
    where = Path(os.environ.get("INTENTUSNET_SCREENSHOTS") or tmp_path)
    where.mkdir(parents=True, exist_ok=True)
    shots = {
        "records": "/ui",
        "execution": f"/ui/executions/{ids['steps']}",
        "fallback": f"/ui/executions/{ids['fallback']}",
        "diff": f"/ui/diff?a={ids['steps']}&b={ids['steps2']}",
        "overview": "/ui/overview",
    }
    for name, path in shots.items():
        page.goto(url + path)
        page.screenshot(path=str(where / f"ui-{name}.png"), full_page=True)
    page.emulate_media(color_scheme="dark")
    page.goto(url + shots["execution"])
    page.screenshot(path=str(where / "ui-execution-dark.png"), full_page=True)
    assert len(list(where.glob("ui-*.png"))) >= len(shots) + 1
