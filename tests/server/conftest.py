"""Fixtures for the HTTP service's tests: a live server on loopback."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from livekit import ROUTE_KEY, LiveServer, echo_router, keyed_app, serving

from intentusnet import IntentRouter


@pytest.fixture
def store_root(tmp_path: Path) -> Path:
    """The store directory the live router records to."""
    return tmp_path / "records"


@pytest.fixture
def live_router(store_root: Path) -> Iterator[IntentRouter]:
    """The echo router, closed after the test."""
    with echo_router(store_root) as router:
        yield router


@pytest.fixture
def live(live_router: IntentRouter) -> Iterator[LiveServer]:
    """The router served on 127.0.0.1 with a route key and a read-only key."""
    with serving(keyed_app(live_router, max_body_bytes=64 * 1024)) as server:
        yield server


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    """An httpx client of the live server, sending the route key."""
    headers = {"Authorization": f"Bearer {ROUTE_KEY}"}
    with httpx.Client(base_url=live.url, headers=headers, trust_env=False) as client:
        yield client
