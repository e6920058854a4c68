"""Shared fixtures: a router, and a real PostgreSQL server for the session."""

from __future__ import annotations

import itertools
from collections.abc import Iterator

import pytest
from pgkit import PgServer, postgres_server

from intentusnet import IntentRouter

_numbers = itertools.count()


@pytest.fixture
def router() -> Iterator[IntentRouter]:
    """A router with no agents and no store, closed after the test."""
    with IntentRouter() as r:
        yield r


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    """A throwaway PostgreSQL server, started once, stopped after the session."""
    with postgres_server() as server:
        yield server


@pytest.fixture
def pg_dsn(pg_server: PgServer) -> str:
    """The URL of a new, empty database on the test server."""
    import psycopg

    name = f"t{next(_numbers)}"
    with psycopg.connect(pg_server.dsn(), autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return pg_server.dsn(name)
