"""Fixtures of the store tests (the PostgreSQL server is in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def pg_store(pg_dsn: str) -> Iterator[object]:
    """A PostgresExecutionStore on a new database, closed after the test."""
    from intentusnet.store import PostgresExecutionStore

    with PostgresExecutionStore(pg_dsn) as store:
        yield store
