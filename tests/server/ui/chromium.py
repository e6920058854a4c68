"""Headless Chromium for the explorer's browser tests (Debian's, through Playwright)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

_BROWSERS = ("chromium", "chromium-browser")
#: Every wait of a browser test is bounded by this.
TIMEOUT_MS = 15_000


def chromium_path() -> str:
    """Chromium's path, or fail (CI) or skip (elsewhere) saying what is missing."""
    found = next((p for name in _BROWSERS if (p := shutil.which(name))), None)
    missing = []
    if found is None:
        missing.append("Chromium (apt-get install chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing.append("Playwright (pip install playwright)")
    if missing:
        reason = "browser tests need " + " and ".join(missing)
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + "; CI must run them", pytrace=False)
        pytest.skip(reason)
    assert found is not None
    return found


@contextmanager
def launched() -> Iterator[Any]:
    """Headless Chromium, closed on leaving."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=chromium_path(),
            headless=True,
            # root in a container has no user namespaces for the sandbox
            args=["--no-sandbox", "--disable-gpu"],
            timeout=TIMEOUT_MS,
        )
        try:
            yield chromium
        finally:
            chromium.close()
