"""Queue slots and token buckets, as each store keeps them (store/*/queues.py)."""

from __future__ import annotations

import threading
import time

import pytest
from recordkit import Store

from intentusnet.store.queues import QueueStore


def test_every_store_shares_queues(any_store: Store) -> None:
    """The file, memory and PostgreSQL stores all keep queue slots and buckets."""
    assert isinstance(any_store, QueueStore)


def test_slots_are_counted_and_given_back(any_store: Store) -> None:
    """Of ``count`` slots each is taken once; a released one is free again."""
    assert isinstance(any_store, QueueStore)
    taken = [any_store.try_queue_slot("llm", 3) for _ in range(3)]
    assert all(slot is not None for slot in taken)
    assert any_store.try_queue_slot("llm", 3) is None
    assert any_store.try_queue_slot("llm\0tenant-a", 1) is not None  # another scope
    slot = taken[1]
    assert slot is not None
    slot.release()
    slot.release()  # idempotent: frees one slot, not two
    again = any_store.try_queue_slot("llm", 3)
    assert again is not None
    assert any_store.try_queue_slot("llm", 3) is None
    for held in [*taken, again]:
        if held is not None:
            held.release()
    assert [any_store.try_queue_slot("llm", 3) is not None for _ in range(4)] == [
        True,
        True,
        True,
        False,
    ]


def test_a_bucket_starts_full_then_refills_at_its_rate(any_store: Store) -> None:
    """``burst`` tokens at once, then the wait until one more is about 1/rate."""
    assert isinstance(any_store, QueueStore)
    waits = [any_store.take_queue_token("api", 20.0, 3) for _ in range(4)]
    assert waits[:3] == [0.0, 0.0, 0.0]
    assert 0 < waits[3] <= 1 / 20 + 1e-6
    time.sleep(waits[3] + 0.01)
    assert any_store.take_queue_token("api", 20.0, 3) == 0.0
    assert any_store.take_queue_token("other", 1.0, 1) == 0.0  # its own bucket


@pytest.mark.parametrize("garbage", [b"", b"not numbers", b"1.0"])
def test_a_damaged_bucket_file_reads_full(tmp_path, garbage: bytes) -> None:  # type: ignore[no-untyped-def]
    """A file bucket cut by a crash mid-write is a full bucket, not an error."""
    from intentusnet import FileExecutionStore

    with FileExecutionStore(tmp_path / "records") as store:
        assert store.take_queue_token("api", 1.0, 2) == 0.0
        [bucket] = (tmp_path / "records" / "queues").glob("*/bucket")
        bucket.write_bytes(garbage)
        assert [store.take_queue_token("api", 1.0, 2) for _ in range(2)] == [0.0, 0.0]
        assert store.take_queue_token("api", 1.0, 2) > 0


@pytest.mark.parametrize("kind", ["file", "postgres"])
def test_slots_taken_by_many_threads_are_all_given_back(
    kind: str, request: pytest.FixtureRequest, tmp_path
) -> None:  # type: ignore[no-untyped-def]
    """Threads racing for slots leave none held: another store takes them all after."""
    from intentusnet import FileExecutionStore, PostgresExecutionStore

    def opened():  # type: ignore[no-untyped-def]
        if kind == "file":
            return FileExecutionStore(tmp_path / "records")
        return PostgresExecutionStore(request.getfixturevalue("pg_dsn"))

    with opened() as racing, opened() as other:

        def race() -> None:
            for _ in range(100):
                slot = racing.try_queue_slot("llm", 4)
                if slot is not None:
                    slot.release()

        threads = [threading.Thread(target=race) for _ in range(6)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        taken = [other.try_queue_slot("llm", 4) for _ in range(5)]
        assert [slot is not None for slot in taken] == [True] * 4 + [False]
