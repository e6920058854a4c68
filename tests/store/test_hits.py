"""The cache-hit journal: sealed lines per day, read newest first, pruned by day."""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from intentusnet import Hit, IntentRouter
from intentusnet.store import FileExecutionStore, MemoryExecutionStore
from intentusnet.store.hits import HITS_DIR, parse_hits


def note(store, source: str = "exec-1", intent: str = "echo", **extra) -> str:
    return store.record_cache_hit(Hit(source, "sha256:" + "ab" * 32, intent, **extra))


@pytest.fixture(params=["file", "memory"])
def store(request, tmp_path: Path):
    """Both stores keep hits the same way."""
    if request.param == "memory":
        return MemoryExecutionStore()
    return FileExecutionStore(tmp_path / "records")


def test_hits_round_trip_newest_first(store):
    """Hits come back with every field, newest first."""
    first = note(store, "exec-a", request_id="req-1", namespace="ns")
    second = note(store, "exec-b", intent="other")
    hits = store.cache_hits()
    assert [h.hit_id for h in hits] == [second, first]
    assert hits[1].source_execution_id == "exec-a"
    assert hits[1].request_id == "req-1"
    assert hits[1].namespace == "ns"
    assert hits[1].to_json()["kind"] == "cache_hit"
    assert store.cache_hit_count() == 2


def test_filters_and_limit(store):
    """intent, since and limit narrow the hits."""
    for n in range(3):
        note(store, f"exec-{n}", intent="a" if n else "b")
    assert len(store.cache_hits(intent="a")) == 2
    assert len(store.cache_hits(limit=1)) == 1
    future = datetime.now(UTC) + timedelta(days=1)
    assert store.cache_hits(since=future) == []
    assert len(store.cache_hits(since=datetime.now(UTC) - timedelta(hours=1))) == 3


def test_file_journal_is_one_file_per_day(tmp_path):
    """Many hits add lines to one day file (mode 0600), not files."""
    store = FileExecutionStore(tmp_path / "records")
    for _ in range(50):
        note(store)
    (day,) = (store.root / HITS_DIR).iterdir()
    assert day.stat().st_mode & 0o777 == 0o600
    assert day.read_bytes().count(b"\n") == 50
    assert store.stats().bytes_on_disk >= day.stat().st_size
    store.close()


def test_edited_line_is_left_out(tmp_path, caplog):
    """A line whose bytes were changed fails its hash and is skipped, logged."""
    store = FileExecutionStore(tmp_path / "records")
    note(store, "exec-a")
    note(store, "exec-b")
    (day,) = (store.root / HITS_DIR).iterdir()
    day.write_bytes(day.read_bytes().replace(b"exec-a", b"exec-z"))
    with caplog.at_level(logging.WARNING, logger="intentusnet.store"):
        hits = store.cache_hits()
    assert [h.source_execution_id for h in hits] == ["exec-b"]
    assert "damaged or edited" in caplog.text


def test_torn_last_line_is_ignored():
    """A partly written last line (a crash) is not a hit and not an error."""
    store = MemoryExecutionStore()
    note(store)
    data = bytes(store._hits) + b'{"v":1,"type":"CACHE_'
    assert len(list(parse_hits(data))) == 1


def test_prune_deletes_whole_old_days(tmp_path):
    """prune drops day files that end before the cutoff, keeps today's."""
    store = FileExecutionStore(tmp_path / "records")
    note(store)
    (today,) = (store.root / HITS_DIR).iterdir()
    old = today.with_name("2001-01-01.jsonl")
    old.write_bytes(today.read_bytes())
    assert store.cache_hit_count() == 2
    store.prune(timedelta(days=1))
    assert not old.exists()
    assert store.cache_hit_count() == 1


def test_memory_prune_keeps_recent_hits():
    """The memory store's prune keeps hits younger than the cutoff."""
    store = MemoryExecutionStore()
    note(store)
    store.prune(timedelta(days=1))
    assert store.cache_hit_count() == 1
    store.prune(timedelta(microseconds=1))
    assert store.cache_hit_count() == 0


def test_change_probe_sees_every_change(tmp_path):
    """The probe changes on append (invalidate) and answers None once deleted."""
    store = FileExecutionStore(tmp_path / "records")
    with IntentRouter(store=store) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"ok": True})
        response = router.route_intent({"intent": {"name": "echo"}})
    execution_id = response.metadata.execution_id
    assert execution_id is not None
    probe = store.change_probe(execution_id)
    before = probe()
    assert before is not None
    assert probe() == before
    store.invalidate(execution_id, "test")
    assert probe() not in (None, before)
    store.delete(execution_id)
    assert probe() is None
