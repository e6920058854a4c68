"""The execution page's levers, clicked in headless Chromium under ``serve`` with keys.

Each button (resolve as happened and as not happened, resume, cancel, fork) is
clicked on a real page, signed in with a key that may route, and the store is read
afterwards; a read-only key gets the commands and no button. Executions are parked
as real ones are (``parks.py``: a child process killed inside the e-mail).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from livekit import READ_KEY, ROUTE_KEY, keyed_app, serving

from intentusnet import FileExecutionStore, IntentRouter, RecordStatus

from .chromium import TIMEOUT_MS, chromium_path, launched
from .parks import CALLS, ORDER, parked, router_of

pytestmark = pytest.mark.slow


class Shop:
    """The served router, its store's two parked executions and a completed one."""

    def __init__(self, root: Path) -> None:
        where = str(root)
        self.doubts = [parked(where, "side_effect_in_doubt") for _ in range(2)]
        self.router: IntentRouter = router_of(FileExecutionStore(root))
        done = self.router.route_intent(ORDER).metadata.execution_id
        assert done is not None
        self.completed = done

    def events(self, execution_id: str, kind: str) -> list[dict[str, Any]]:
        """The data of ``execution_id``'s events of type ``kind``."""
        record = self.router.store.load(execution_id)  # type: ignore[union-attr]
        return [dict(e.data) for e in record.events if e.type.value == kind]


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Shop]]:
    """The shop served with ROUTE_KEY and READ_KEY, in this process: (url, shop)."""
    chromium_path()  # skip (or fail in CI) before recording anything
    shop = Shop(tmp_path_factory.mktemp("operate") / "records")
    with shop.router, serving(keyed_app(shop.router, app_ref="shop:router")) as live:
        yield live.url, shop


@pytest.fixture(scope="module")
def browser(served: tuple[str, Shop]) -> Iterator[Any]:
    """Headless Chromium, one for the module."""
    with launched() as chromium:
        yield chromium


def _signed_in(browser: Any, url: str, key: str, target: str) -> Any:
    """A fresh page signed in with ``key`` at /ui/login, on ``target``."""
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    page.goto(url + target)
    page.wait_for_url("**/ui/login?next=*")
    page.get_by_label("API key").fill(key)
    with page.expect_navigation():
        page.get_by_role("button", name="Sign in").click()
    assert page.url == url + target, page.content()[-1500:]
    return page


def _click(page: Any, name: str) -> str:
    """Click the button ``name``; the execution id of the page it leads to."""
    with page.expect_navigation():
        page.get_by_role("button", name=name).click()
    assert "/ui/executions/" in page.url, page.content()
    return str(page.url.rsplit("/", 1)[1])


def test_resolve_as_happened_then_resume(
    browser: Any, served: tuple[str, Shop]
) -> None:
    """Step 2 happened (output typed), then Resume now: finished, no second e-mail."""
    url, shop = served
    parked_id = shop.doubts[0]
    page = _signed_in(browser, url, ROUTE_KEY, f"/ui/executions/{parked_id}")
    operate = page.locator("#operate")
    for command in (
        f"intentusnet resolve {parked_id} --step 2 --happened --output JSON",
        f"intentusnet resolve {parked_id} --step 2 --not-happened",
        f"intentusnet cancel {parked_id}",
        f"intentusnet fork {parked_id} --from STEP --app shop:router",
    ):
        assert operate.locator(f'[data-copy="{command}"]').count() == 1, command
    page.get_by_label("Its output").fill('"sent"')
    decision = _click(page, "Step 2 happened")

    [event] = shop.events(decision, "OPERATOR_DECISION")
    name = hashlib.sha256(ROUTE_KEY.encode()).hexdigest()[:12]
    assert (event["action"], event["step"], event["happened"]) == ("resolve", 2, True)
    assert (event["output"], event["via"], event["by"]) == (
        "sent",
        "ui",
        f"api-key:{name}",
    )
    assert page.locator("#lever-resume code").inner_text() == (
        f"intentusnet resume {decision} --app shop:router"
    )
    CALLS.clear()
    finished = _click(page, "Resume now")

    record = shop.router.store.load(finished)  # type: ignore[union-attr]
    assert record.header.status is RecordStatus.COMPLETED
    assert record.final_response["payload"] == {"total": 20, "mail": "sent"}  # type: ignore[index]
    assert CALLS["email"] == 0
    assert page.locator("#record-status").inner_text() == "completed"
    page.context.close()


def test_resolve_as_not_happened_then_cancel(
    browser: Any, served: tuple[str, Shop]
) -> None:
    """Step 2 did not happen, then Cancel: the chain closed cancelled, nothing ran."""
    url, shop = served
    parked_id = shop.doubts[1]
    page = _signed_in(browser, url, ROUTE_KEY, f"/ui/executions/{parked_id}")
    decision = _click(page, "Step 2 did not happen")
    [event] = shop.events(decision, "OPERATOR_DECISION")
    assert (event["step"], event["happened"]) == (2, False)
    assert "output" not in event

    CALLS.clear()
    closed = _click(page, "Cancel this execution")

    record = shop.router.store.load(closed)  # type: ignore[union-attr]
    assert record.header.status is RecordStatus.CANCELLED
    assert record.execution_id != decision
    [cancel] = shop.events(closed, "OPERATOR_DECISION")
    assert (cancel["action"], cancel["via"]) == ("cancel", "ui")
    assert sum(CALLS.values()) == 0
    assert page.locator("#operate form").count() == 1  # only the fork is left
    page.context.close()


def test_fork_from_a_step(browser: Any, served: tuple[str, Shop]) -> None:
    """Fork from fetch: a new execution, the fetch run again, the e-mail served."""
    url, shop = served
    page = _signed_in(browser, url, ROUTE_KEY, f"/ui/executions/{shop.completed}")
    page.get_by_role("textbox", name="From step").fill("fetch")
    CALLS.clear()
    forked = _click(page, "Fork with today's code")

    record = shop.router.store.load(forked)  # type: ignore[union-attr]
    assert record.replay_of == shop.completed
    assert record.header.status is RecordStatus.COMPLETED
    assert dict(CALLS) == {"fetch": 1}
    before = len(shop.router.store.list())  # type: ignore[union-attr]
    page.get_by_role("textbox", name="From step").fill("refund")
    with page.expect_navigation():
        page.get_by_role("button", name="Fork with today's code").click()
    assert "invalid_rerun_option" in page.content()  # refused, shown as a page
    assert len(shop.router.store.list()) == before  # type: ignore[union-attr]
    page.context.close()


def test_a_read_only_key_gets_commands_not_buttons(
    browser: Any, served: tuple[str, Shop]
) -> None:
    """With ro: the page shows the commands and no form; the form address refuses it."""
    url, shop = served
    target = f"/ui/executions/{shop.completed}"
    page = _signed_in(browser, url, READ_KEY, target)
    assert page.locator("#operate form").count() == 0
    assert page.locator("#operate-note").is_visible()
    command = f"intentusnet fork {shop.completed} --from STEP --app shop:router"
    assert page.locator(f'#operate [data-copy="{command}"]').count() == 1
    assert page.get_by_role("button", name="Fork with today's code").count() == 0
    answer = page.request.post(f"{url}/ui/executions/{shop.completed}/fork")
    assert answer.status == 403  # the form's address refuses the key too
    page.context.close()
