"""Shared fixtures."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from intentusnet import IntentRouter


@pytest.fixture
def router() -> Iterator[IntentRouter]:
    """A router with no agents and no store, closed after the test."""
    with IntentRouter() as r:
        yield r
