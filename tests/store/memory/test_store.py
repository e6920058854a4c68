"""Memory and PostgreSQL stores behave as FileExecutionStore does (the contract)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from recordkit import Store, finished, response, start

from intentusnet import ListFilters
from intentusnet.errors import RecordExists, RecordNotFound, StoreError
from intentusnet.record.model import RecordStatus, ReplayableReason


@pytest.fixture(params=["file", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    """Each store implementation in turn."""
    from intentusnet.store import (
        FileExecutionStore,
        MemoryExecutionStore,
        PostgresExecutionStore,
    )

    if request.param == "file":
        yield FileExecutionStore(tmp_path)
    elif request.param == "memory":
        yield MemoryExecutionStore()
    else:
        with PostgresExecutionStore(request.getfixturevalue("pg_dsn")) as opened:
            yield opened


def test_both_stores_derive_the_same_states(store: Store) -> None:
    """Completed, failed, in progress and incomplete records read the same."""
    done = finished(store)
    failed = finished(store, "b", status="error")
    live = start(store, "c")
    gone = start(store, "d")
    gone.close()
    statuses = {s.execution_id: s.status for s in store.list()}
    assert statuses == {
        done: RecordStatus.COMPLETED,
        failed: RecordStatus.FAILED,
        live.execution_id: RecordStatus.IN_PROGRESS,
        gone.execution_id: RecordStatus.INCOMPLETE,
    }
    live.close()


def test_both_stores_find_invalidate_prune_and_delete(store: Store) -> None:
    """The store operations the CLI uses behave alike."""
    old, new = finished(store, "same"), finished(store, "same")
    env_hash = store.load(old).header.envelope_hash
    found = store.find_by_hash(env_hash)
    assert found is not None
    assert found.execution_id == new
    store.invalidate(new, "stale")
    reason = store.load(new).header.replayable_reason
    assert reason is ReplayableReason.MANUALLY_INVALIDATED
    assert store.verify(new).valid
    assert store.stats().records == 2
    store.delete(old)
    with pytest.raises(RecordNotFound):
        store.load(old)
    assert store.prune(timedelta(0)) == [new]
    assert list(store.iter_ids()) == []


def test_both_stores_refuse_rewrites_and_live_invalidation(store: Store) -> None:
    """An existing id cannot be opened again; a live record cannot be invalidated."""
    writer = start(store, execution_id="fixed")
    with pytest.raises(RecordExists):
        start(store, execution_id="fixed")
    with pytest.raises(StoreError, match="still being written"):
        store.invalidate("fixed", "early")
    writer.complete(response("fixed"))
    assert store.load("fixed").header.status is RecordStatus.COMPLETED


def test_invalidating_twice_changes_nothing(store: Store) -> None:
    """The second invalidation appends nothing: the record keeps its first reason."""
    execution_id = finished(store)
    store.invalidate(execution_id, "stale")
    before = store.raw(execution_id)
    store.invalidate(execution_id, "stale again")
    assert store.raw(execution_id) == before
    record = store.load(execution_id)
    invalidated = [e for e in record.events if e.type.value == "INVALIDATED"]
    assert [e.data["reason"] for e in invalidated] == ["stale"]
    assert record.header.replayable_reason is ReplayableReason.MANUALLY_INVALIDATED
    assert store.verify(execution_id).valid


@pytest.mark.parametrize("new_id", ["-rf", "--store", "-"])
def test_a_new_record_id_may_not_begin_with_a_hyphen(store: Store, new_id: str) -> None:
    """Such an id would read as an option on the command line: refused, untouched."""
    from intentusnet.errors import InvalidExecutionId

    with pytest.raises(InvalidExecutionId, match="hyphen"):
        start(store, execution_id=new_id)
    assert store.list() == []
    writer = start(store, execution_id="a-b-")  # a hyphen inside is fine
    writer.close()
    assert [s.execution_id for s in store.list()] == ["a-b-"]


def test_every_store_lists_by_time_replayability_id_and_hash(store: Store) -> None:
    """until, replayable, id_prefix and envelope_hash are answered alike."""

    def ids(**filters: object) -> list[str]:
        return [s.execution_id for s in store.list(ListFilters(**filters))]  # type: ignore[arg-type]

    a = finished(store, "same")
    b = finished(store, "other")
    c = finished(store, "same")
    store.invalidate(c, "wrong answer")
    live = start(store, "x", execution_id="zz-live-1")
    assert ids(replayable=True) == [b, a]
    assert ids(replayable=False) == ["zz-live-1", c]
    assert ids(replayable=False, status="completed") == [c]
    created = {s.execution_id: s.created_utc for s in store.list()}
    until = datetime.fromisoformat(created[b])
    assert ids(until=until) == [a]  # exclusive
    assert ids(until=until + timedelta(microseconds=1)) == [b, a]
    assert ids(since=until, until=datetime.fromisoformat(created[c])) == [b]
    same = store.load(a).header.envelope_hash
    assert ids(envelope_hash=same) == [c, a]
    assert ids(envelope_hash=same, replayable=True, limit=5) == [a]
    assert ids(id_prefix="zz-") == ["zz-live-1"]
    assert ids(id_prefix=a[:-1]) == [a]
    assert ids(id_prefix=a[-8:]) == []  # the start of an id, not any part
    assert ids(id_prefix="exec-", limit=2) == [c, b]
    live.close()
    assert ids(replayable=False, status="incomplete") == ["zz-live-1"]
    with pytest.raises(ValueError, match="cannot start an execution id"):
        store.list(ListFilters(id_prefix="a/b"))
    with pytest.raises(ValueError, match="not an envelope hash"):
        store.list(ListFilters(envelope_hash=same.upper()))
