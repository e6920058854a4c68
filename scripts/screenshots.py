"""Regenerate the explorer's screenshots that docs/ui.md shows (docs/img/ui-*.png).

Run from the repository root (needs the ``server`` extra, Playwright and
Chromium, as the browser tests do)::

    python scripts/screenshots.py [--out docs/img] [--chromium /usr/bin/chromium]

Records the browser tests' sample stores (tests/server/ui/sample.py and
llm_sample.py) into a temporary directory, starts ``intentusnet ui --prices``
over it on a free loopback port, and photographs each page in headless
Chromium at 1280 px (and the list and the overview at 390 px, as on a phone).
Nothing outside ``--out`` is written.
"""

from __future__ import annotations

import argparse
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(_ROOT), str(_ROOT / "tests")]

from server.ui.llm_sample import make_llm_store, write_prices  # noqa: E402
from server.ui.sample import make_store  # noqa: E402


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _start(root: Path, prices: Path) -> tuple[subprocess.Popen[bytes], str]:
    """``intentusnet ui`` over ``root``; returns it and its URL once it answers."""
    port = _free_port()
    command = [sys.executable, "-m", "intentusnet.cli", "--store", str(root), "ui"]
    command += ["--port", str(port), "--prices", str(prices)]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url + "/healthz", timeout=1):
                return process, url
        except OSError:
            if process.poll() is not None:
                raise SystemExit("intentusnet ui stopped; see its output") from None
            time.sleep(0.1)
    process.terminate()
    raise SystemExit("intentusnet ui did not answer within 20 s")


def _shots(ids: dict[str, str]) -> list[tuple[str, str, int, str]]:
    """(file name, page, width, colour scheme) of each screenshot."""
    return [
        ("ui-records.png", "/ui", 1280, "light"),
        ("ui-records-phone.png", "/ui?intent=chat.answer", 390, "light"),
        ("ui-search.png", "/ui?intent=chat.answer&q=payload.tags%3Dvip", 1280, "light"),
        ("ui-execution.png", f"/ui/executions/{ids['steps']}", 1280, "light"),
        ("ui-panel.png", f"/ui/executions/{ids['spent']}#step-1", 1280, "light"),
        ("ui-fallback.png", f"/ui/executions/{ids['fallback']}", 1280, "light"),
        ("ui-execution-dark.png", f"/ui/executions/{ids['steps']}", 1280, "dark"),
        ("ui-diff.png", f"/ui/diff?a={ids['steps']}&b={ids['steps2']}", 1280, "light"),
        ("ui-overview.png", "/ui/overview", 1280, "light"),
        ("ui-overview-phone-dark.png", "/ui/overview", 390, "dark"),
    ]


def main() -> None:
    """Record the samples, serve them, photograph every page."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=_ROOT / "docs" / "img")
    parser.add_argument("--chromium", default=shutil.which("chromium"))
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="intentusnet-shots-") as tmp:
        root = Path(tmp) / "records"
        ids = {**make_store(root), **make_llm_store(root)}
        process, url = _start(root, write_prices(Path(tmp)))
        try:
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(
                    executable_path=args.chromium,
                    headless=True,
                    args=["--no-sandbox", "--disable-gpu"],
                )
                for name, path, width, scheme in _shots(ids):
                    context = browser.new_context(
                        viewport={"width": width, "height": 900},
                        color_scheme=scheme,
                    )
                    page = context.new_page()
                    page.goto(url + path)
                    # the list and the open panel are cut at the window's height;
                    # the rest in full
                    whole = name not in ("ui-records.png", "ui-panel.png")
                    page.screenshot(path=str(args.out / name), full_page=whole)
                    context.close()
                    print(args.out / name)
                browser.close()
        finally:
            process.terminate()
            process.wait(timeout=10)


if __name__ == "__main__":
    main()
