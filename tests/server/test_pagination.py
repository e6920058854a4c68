"""Cursor pagination over a store, without HTTP."""

from __future__ import annotations

import pytest

from intentusnet import IntentRouter, ListFilters
from intentusnet.errors import RequestInvalid
from intentusnet.server.pagination import Cursor, page
from intentusnet.store import MemoryExecutionStore


def _routed(router: IntentRouter, count: int) -> list[str]:
    ids = []
    for n in range(count):
        answer = router.route_intent({"intent": {"name": "echo"}, "payload": {"n": n}})
        assert answer.metadata.execution_id is not None
        ids.append(answer.metadata.execution_id)
    return ids


def test_pages_cover_the_store_once() -> None:
    """Walking pages of every size visits each record once, newest first."""
    store = MemoryExecutionStore()
    with IntentRouter(store=store) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {})
        ids = _routed(router, 10)
    for size in (1, 3, 10, 11):
        seen: list[str] = []
        cursor = None
        while True:
            items, cursor = page(store, ListFilters(limit=size), cursor)
            seen += [s.execution_id for s in items]
            if cursor is None:
                break
        assert seen == ids[::-1], size


def test_window_grows_when_records_arrive_between_pages() -> None:
    """Many new records between two pages do not make the next page short."""
    store = MemoryExecutionStore()
    with IntentRouter(store=store) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {})
        ids = _routed(router, 6)
        first, cursor = page(store, ListFilters(limit=2))
        _routed(router, 20)
        second, _ = page(store, ListFilters(limit=2), cursor)
    assert [s.execution_id for s in first + second] == ids[::-1][:4]


def test_cursor_round_trip_and_garbage() -> None:
    """A cursor decodes to itself; anything else is RequestInvalid."""
    cursor = Cursor("2026-11-22T07:00:00.000001Z", "exec-1", 7)
    assert Cursor.decode(cursor.encode()) == cursor
    for garbage in ("", "!!!", "bm90LWpzb24", "eyJjIjoxfQ"):
        with pytest.raises(RequestInvalid):
            Cursor.decode(garbage)
