"""Fixtures of the explorer's tests: a sample store and the explorer over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from intentusnet.server.ui import create_ui_app
from intentusnet.store import FileExecutionStore

from .sample import make_store


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store with echo, fallback, failed, stepped and hostile records."""
    root = tmp_path_factory.mktemp("ui") / "records"
    return root, make_store(root)


@pytest.fixture
def ids(sample: tuple[Path, dict[str, str]]) -> dict[str, str]:
    """The sample's execution ids by role."""
    return sample[1]


@pytest.fixture
def client(sample: tuple[Path, dict[str, str]]) -> Iterator[TestClient]:
    """The explorer alone over the sample store, called from loopback."""
    store = FileExecutionStore(sample[0])
    with TestClient(create_ui_app(store), base_url="http://127.0.0.1") as client:
        yield client
    store.close()
