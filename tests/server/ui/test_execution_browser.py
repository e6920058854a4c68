"""The execution and diff pages in headless Chromium, at phone and desktop width.

One ``intentusnet ui`` subprocess and one browser serve the module (see
test_browser.py for how Chromium is found). The layout is measured, not only
loaded: no horizontal overflow, every timeline bar drawn with a width, each bar
as long as the time its label says, ids on one line. Screenshots of each page,
at 390 and 1280 px, light and dark, go under the test's temporary directory.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from livekit import UiProcess

from intentusnet import FileExecutionStore, IntentRouter

from .chromium import TIMEOUT_MS, chromium_path, launched
from .sample import make_store, record_llm_calls

pytestmark = pytest.mark.slow

WIDTHS = (390, 1280)
SCHEMES = ("light", "dark")

#: Measured in the page: overflow, bars, the bars' lengths against their labels.
_LAYOUT = """() => {
  const bars = [...document.querySelectorAll('.timeline .bar')];
  const drawn = bars.map(bar => {
    const track = bar.parentElement.getBoundingClientRect().width;
    return {width: bar.getBoundingClientRect().width, track,
            percent: parseFloat(bar.style.width)};
  });
  const ids = [...document.querySelectorAll('.id')].filter(e => e.offsetParent)
    .map(e => e.getBoundingClientRect().height
              / parseFloat(getComputedStyle(e).fontSize));
  return {scroll: document.scrollingElement.scrollWidth, inner: innerWidth, drawn, ids};
}"""


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, dict]]:
    """``intentusnet ui`` over the sample store and two LLM calls: (url, ids)."""
    chromium_path()  # before starting anything
    root = tmp_path_factory.mktemp("execution") / "records"
    ids = make_store(root)
    ids.update({f"llm-{k}": v for k, v in record_llm_calls(root).items()})
    ids["root"] = str(root)
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


def _page(browser: Any, width: int, scheme: str = "light") -> tuple[Any, Any, list]:
    """A page at ``width`` px in ``scheme``; its list of script errors and 4xx/5xx."""
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
    return context, page, problems


def test_layout_at_phone_and_desktop_width(
    browser: Any, explorer: tuple[str, dict], tmp_path: Path
) -> None:
    """No overflow, every bar drawn to its label's length, ids on one line, no 404."""
    url, ids = explorer
    pages = {
        "execution": f"/ui/executions/{ids['steps']}",
        "fallback": f"/ui/executions/{ids['fallback']}",
        "diff": f"/ui/diff?a={ids['steps']}&b={ids['steps2']}",
        "diff-fallback": f"/ui/diff?a={ids['fallback']}&b={ids['failed']}",
    }
    shots = 0
    for width in WIDTHS:
        for scheme in SCHEMES:
            context, page, problems = _page(browser, width, scheme)
            for name, path in pages.items():
                if scheme == "dark" and name not in ("execution", "diff"):
                    continue  # the scheme changes colours, not the layout
                shots += 1
                page.goto(url + path)
                page.wait_for_load_state("load")
                where = f"{name} at {width} px, {scheme}"
                page.screenshot(
                    path=str(tmp_path / f"ui-{name}-{width}-{scheme}.png"),
                    full_page=True,
                )
                found = page.evaluate(_LAYOUT)
                assert found["scroll"] <= found["inner"], where
                assert all(h < 2 for h in found["ids"]), (where, found["ids"])
                if name.startswith("diff"):
                    continue
                assert found["drawn"], where
                for bar in found["drawn"]:
                    assert bar["track"] > 50, (where, bar)
                    assert bar["width"] > 0, (where, bar)
                    # drawn as long as its label says (a sliver below 0.4 %)
                    expected = max(bar["percent"], 0.4) / 100 * bar["track"]
                    assert abs(bar["width"] - expected) <= 2.5, (where, bar)
            context.close()
            assert problems == [], (width, scheme)
    assert len(list(tmp_path.glob("ui-*.png"))) == shots == len(pages) * 2 + 4


def test_detail_panel_by_click_keyboard_and_link(
    browser: Any, explorer: tuple[str, dict]
) -> None:
    """A bar's detail opens by click, by Enter, and on load from #step-N or ?span=."""
    url, ids = explorer
    context, page, problems = _page(browser, 390)
    page.goto(f"{url}/ui/executions/{ids['steps']}")
    panel = page.locator("#panel")
    assert panel.is_hidden()
    page.locator("#lane-step-1 .track").click()
    assert panel.is_visible()
    assert panel.locator(".panel-title").inner_text() == "crm.lookup"
    assert '"a@x.io"' in panel.inner_text()  # its arguments, as recorded
    assert page.url.endswith("#step-1")
    page.keyboard.press("Escape")
    assert panel.is_hidden()
    # keyboard: the name is a button; Enter opens, focus moves in, Esc gives it back
    name = page.locator("#lane-attempt-1 button.span-open")
    name.focus()
    page.keyboard.press("Enter")
    assert panel.is_visible()
    assert page.evaluate("document.activeElement.className") == "panel-title"
    assert "Input (the payload)" in panel.inner_text()
    page.keyboard.press("Escape")
    assert panel.is_hidden()
    assert page.evaluate("document.activeElement.dataset.span") == "attempt-1"
    # deep links, on load
    page.goto(f"{url}/ui/executions/{ids['fallback']}#attempt-1")
    assert panel.is_visible()
    assert "ConnectionError" in panel.inner_text()
    page.goto(f"{url}/ui/executions/{ids['llm-hit']}?span=step-1")
    assert panel.is_visible()
    text = panel.inner_text()
    assert "model-a" in text
    assert "nothing: answered from a record, not the API" in text
    reask = panel.get_by_role("link", name="Re-ask this call")
    assert (
        reask.get_attribute("href") == f"/ui/executions/{ids['llm-hit']}/steps/1/reask"
    )
    context.close()
    assert problems == []


def test_diff_marks_the_changed_path(browser: Any, explorer: tuple[str, dict]) -> None:
    """The deviation comes first, its changed field marked, visible at both widths."""
    url, ids = explorer
    for width in WIDTHS:
        context, page, problems = _page(browser, width)
        page.goto(f"{url}/ui/diff?a={ids['steps']}&b={ids['steps2']}")
        first = page.locator(".diff-entry").first
        assert first.get_attribute("id") == "deviation"
        changed = first.locator("tr.changed")
        assert changed.count() == 1
        assert changed.is_visible()
        assert '"email": "a@x.io"' in changed.inner_text()
        assert '"email": "b@x.io"' in changed.inner_text()
        assert changed.bounding_box()["y"] < 900  # above the fold
        sides = changed.locator("td")
        a, b = sides.nth(0).bounding_box(), sides.nth(1).bounding_box()
        if width == 1280:  # side by side, equal widths
            assert abs(a["width"] - b["width"]) < 1
            assert a["y"] == b["y"]
        else:  # stacked: B below A
            assert b["y"] > a["y"]
        context.close()
        assert problems == []


def test_running_execution_updates_in_place(
    browser: Any, explorer: tuple[str, dict]
) -> None:
    """A running execution's page follows it in place, then redraws whole at its end."""
    url, ids = explorer
    store = FileExecutionStore(ids["root"])
    started, release = threading.Event(), threading.Event()
    found: dict[str, str] = {}

    def job(env, ctx):  # type: ignore[no-untyped-def]
        ctx.step("before", {"n": 1}, lambda n: n)
        found["id"] = ctx.execution_id
        started.set()
        release.wait(10)  # bounded: a failing test still ends
        ctx.step("after", {"n": 2}, lambda n: n)
        return {"done": True}

    with IntentRouter(store=store) as router:
        router.agent("live.job", name="job")(job)
        runner = threading.Thread(
            target=router.route_intent, args=({"intent": {"name": "live.job"}},)
        )
        runner.start()
        try:
            assert started.wait(10)
            context, page, problems = _page(browser, 1280)
            page.goto(f"{url}/ui/executions/{found['id']}")
            assert page.locator("#record-status").inner_text() == "in_progress"
            assert page.locator("#lane-step-2").count() == 0
            assert "execution_incomplete" in page.locator("p.badges").inner_text()
            page.evaluate("window.__same_page = true")
            release.set()
            page.locator("#lane-step-2").wait_for()
            # ended: the page is drawn again whole, not only its timeline
            page.wait_for_function("window.__same_page === undefined")
            page.wait_for_load_state("load")
            assert page.locator("#record-status").inner_text() == "completed"
            badges = page.locator("p.badges").inner_text()
            assert "replayable" in badges
            assert "not replayable" not in badges
            assert "execution_incomplete" not in page.locator("main").inner_text()
            assert page.locator("#timeline-section[data-live]").count() == 0
            note = page.locator("#live-note")
            assert "ended (completed) while you watched" in note.inner_text()
            page.reload()  # said once: a later load is a plain page
            assert page.locator("#live-note").is_hidden()
            context.close()
        finally:
            release.set()
            runner.join(10)
    store.close()
    assert problems == []
