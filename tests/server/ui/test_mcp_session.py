"""An MCP session record in the explorer: a bar per call, in a real browser.

The session is recorded by ``intentusnet mcp proxy`` between the official SDK's
client and the MCP test server; ``intentusnet ui`` serves it; Chromium opens
its page (see test_browser.py for how the browser is found).
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from livekit import UiProcess

from .chromium import TIMEOUT_MS, chromium_path, launched

pytest.importorskip("mcp")

from mcp import Client
from mcp.client.stdio import StdioServerParameters

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[3]
SERVER = ROOT / "tests" / "integrations" / "mcp" / "server.py"
LIMIT = 30.0


def _record(root: Path) -> None:
    """One session through the proxy: a call, a tool error, a side effect, progress."""
    args = ["-m", "intentusnet.cli", "mcp", "proxy", "--store", str(root)]
    params = StdioServerParameters(
        command=sys.executable,
        args=[*args, "--mode", "record", "--", sys.executable, str(SERVER)],
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )

    async def session() -> None:
        async with Client(params, read_timeout_seconds=LIMIT) as client:
            await client.list_tools()  # where destructiveHint is learned
            await client.call_tool("add", {"a": 2, "b": 3})
            await client.call_tool("fail", {"reason": "no"})
            await client.call_tool("delete", {"item": "report.pdf"})

            async def progress(done: float, total: float | None, text: str | None):
                pass

            await client.call_tool("steps", {"count": 2}, progress_callback=progress)

    asyncio.run(asyncio.wait_for(session(), LIMIT))


@pytest.fixture(scope="module")
def explorer(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``intentusnet ui`` over a store holding one recorded MCP session."""
    chromium_path()  # before starting anything
    root = tmp_path_factory.mktemp("mcp-ui") / "records"
    _record(root)
    ui = UiProcess(root)
    try:
        yield ui.url
    finally:
        ui.stop()


def test_an_mcp_session_is_a_bar_per_call(explorer: str) -> None:
    """Each call is a lane: its tool, its arguments, a visible bar, errors marked."""
    with launched() as chromium:
        page = chromium.new_page(viewport={"width": 1280, "height": 900})
        page.set_default_timeout(TIMEOUT_MS)
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto(explorer + "/ui?intent=mcp.session")
        page.locator("table.records tbody tr").first.locator("a.short-id").click()
        page.wait_for_url("**/ui/executions/exec-*")
        lanes = page.locator(".timeline .lane").filter(has=page.locator(".bar.step"))
        labels = [
            text.strip() for text in lanes.locator(".lane-label").all_inner_texts()
        ]
        calls = [label for label in labels if label.startswith("tools/call")]
        assert len(calls) == 4, labels
        assert 'tools/call add {"a":2,"b":3}' in calls
        delete = lanes.filter(has_text="tools/call delete")
        assert delete.locator(".side-effect").is_visible()
        failed = lanes.filter(has_text="tools/call fail")
        assert "error" in failed.locator(".lane-info").inner_text()
        assert failed.locator(".bar.outcome-error").count() == 1
        assert (
            sum(
                label == "progress" or label.startswith("progress ") for label in labels
            )
            == 2
        )
        bars = page.locator(".timeline .bar.step")
        for n in range(bars.count()):
            box = bars.nth(n).bounding_box()
            assert box is not None
            assert box["width"] >= 1
        shown = page.locator("p.error").all_inner_texts()
        assert any(
            "tools/call fail — tool error: Error executing tool fail" in text
            for text in shown
        )
        # a session needs no application to be replayed: no MODULE:ATTR
        commands = page.locator(".command code").all_inner_texts()
        assert "intentusnet mcp proxy --mode replay --listen 127.0.0.1:0" in commands
        assert not [c for c in commands if "MODULE:ATTR" in c]
        if os.environ.get("INTENTUSNET_SCREENSHOTS"):
            page.screenshot(
                path=str(Path(os.environ["INTENTUSNET_SCREENSHOTS"]) / "mcp.png"),
                full_page=True,
            )
        assert errors == []
