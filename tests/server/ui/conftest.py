"""Fixtures of the explorer's tests: a sample store and the explorer over it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from intentusnet import PriceTable
from intentusnet.server.ui import create_ui_app
from intentusnet.store import FileExecutionStore

from .llm_sample import PRICES, make_llm_store
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


@pytest.fixture(scope="session")
def llm_sample(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """A store of agents calling an LLM API (see llm_sample.py): root and ids."""
    where = tmp_path_factory.mktemp("llm")
    return where / "records", make_llm_store(where / "records", padding=3)


@pytest.fixture
def llm_client(llm_sample: tuple[Path, dict[str, str]]) -> Iterator[TestClient]:
    """The explorer over the LLM sample, with its price table."""
    store = FileExecutionStore(llm_sample[0])
    app = create_ui_app(store, prices=PriceTable.from_json(PRICES))
    with TestClient(app, base_url="http://127.0.0.1") as client:
        yield client
    store.close()
