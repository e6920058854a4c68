"""Fixtures of the store tests (the PostgreSQL server is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from recordkit import Store, finished, start

from intentusnet.record.keys import SigningKey


@pytest.fixture
def pg_store(pg_dsn: str) -> Iterator[object]:
    """A PostgresExecutionStore on a new database, closed after the test."""
    from intentusnet.store import PostgresExecutionStore

    with PostgresExecutionStore(pg_dsn) as store:
        yield store


@pytest.fixture
def key() -> SigningKey:
    """The key the store signs with."""
    return SigningKey.generate()


@pytest.fixture(params=["file", "memory", "postgres"])
def any_store(
    request: pytest.FixtureRequest, tmp_path: Path, key: SigningKey
) -> Iterator[Store]:
    """Each store implementation in turn, signing with ``key``."""
    from intentusnet.store import (
        FileExecutionStore,
        MemoryExecutionStore,
        PostgresExecutionStore,
    )

    if request.param == "file":
        with FileExecutionStore(tmp_path / "records", signing_key=key) as opened:
            yield opened
    elif request.param == "memory":
        yield MemoryExecutionStore(signing_key=key)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        with PostgresExecutionStore(dsn, signing_key=key) as opened:
            yield opened


@pytest.fixture
def signed_records(any_store: Store) -> Iterator[dict[str, str]]:
    """Three signed records, and one still being written (so not signed yet)."""
    live = start(any_store, "live")
    yield {
        "good": finished(any_store, "good"),
        "other": finished(any_store, "other"),
        "third": finished(any_store, "third"),
        "live": live.execution_id,
    }
    live.close()
