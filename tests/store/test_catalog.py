"""The SQLite catalog: derived data, rebuilt from the files, never trusted blindly."""

from __future__ import annotations

import logging
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from hashlib import sha256
from pathlib import Path

import pytest
from recordkit import change_answer, finished, record_file, reseal, response, start

from intentusnet.errors import StoreError
from intentusnet.record.model import SCHEMA_VERSION, RecordStatus, ReplayableReason
from intentusnet.store import FileExecutionStore
from intentusnet.store.catalog import Catalog


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory, closed after the test."""
    with FileExecutionStore(tmp_path / "records") as opened:
        yield opened


def _catalog(store: FileExecutionStore) -> Path:
    return store.root / "catalog.sqlite3"


def _remove_catalog(store: FileExecutionStore) -> None:
    store.close()
    for path in store.root.glob("catalog.sqlite3*"):
        path.unlink()


def test_catalog_is_sqlite_in_wal_mode(store: FileExecutionStore) -> None:
    """The catalog is <root>/catalog.sqlite3 in WAL mode, one row per record."""
    finished(store)
    live = start(store, "still running")
    store._index.writes.flush()  # a batch: rows of records still open go to "live"
    with sqlite3.connect(_catalog(store)) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
        opened = db.execute("SELECT id FROM live").fetchall()
        assert (live.execution_id,) in opened
    db.close()
    live.complete(response(live.execution_id))
    store.close()  # writes the rows queued behind
    with sqlite3.connect(_catalog(store)) as db:
        assert db.execute("SELECT count(*) FROM records").fetchone() == (2,)
        assert db.execute("SELECT count(*) FROM live").fetchone() == (0,)
    db.close()


def test_deleted_catalog_is_restored_by_reindex(store: FileExecutionStore) -> None:
    """reindex() rebuilds every row from the files: a lost catalog loses nothing."""
    finished(store)
    failed = finished(store, "b", status="error")
    store.invalidate(failed, "wrong")
    start(store, "c").close()
    before = store.list()
    _remove_catalog(store)
    assert store.reindex() == 3
    assert store.list() == before


def test_missing_catalog_is_rebuilt_on_first_query(
    store: FileExecutionStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A store whose catalog vanished rebuilds it on the first query, and says so."""
    execution_id = finished(store)
    _remove_catalog(store)
    with caplog.at_level(logging.WARNING, logger="intentusnet.store"):
        assert [s.execution_id for s in store.list()] == [execution_id]
    assert "rebuilding it from the record files" in caplog.text


def test_corrupt_catalog_is_moved_aside_and_rebuilt(
    store: FileExecutionStore, caplog: pytest.LogCaptureFixture
) -> None:
    """Garbage in the catalog file does not stop the store; the files rebuild it."""
    execution_id = finished(store)
    _remove_catalog(store)
    _catalog(store).write_bytes(b"this is not a database" * 100)
    with FileExecutionStore(store.root) as reopened, caplog.at_level(logging.WARNING):
        assert [s.execution_id for s in reopened.list()] == [execution_id]
        second = finished(reopened, "after")
        assert reopened.stats().records == 2
        assert reopened.find_by_hash(reopened.load(second).header.envelope_hash)
    assert "is corrupt" in caplog.text
    assert list(store.root.glob("catalog.sqlite3.corrupt-*"))


def test_records_are_written_when_the_catalog_cannot_be(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An unusable catalog never fails recording; queries then say what to do."""
    root = tmp_path / "records"
    root.mkdir()
    _catalog_dir = root / "catalog.sqlite3"
    _catalog_dir.mkdir()  # a directory where the database should be
    with FileExecutionStore(root) as store, caplog.at_level(logging.WARNING):
        execution_id = finished(store)
        assert store.load(execution_id).header.status is RecordStatus.COMPLETED
        with pytest.raises(StoreError, match="reindex"):
            store.list()
    assert "record file is intact" in caplog.text


def test_reindex_marks_damaged_records_and_skips_unreadable_ones(
    store: FileExecutionStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A tampered record is indexed as integrity_failure; a newer format is skipped."""
    good = finished(store)
    bad = finished(store, "bad")
    path = record_file(store, bad)
    data = bytearray(path.read_bytes())
    data[-50] ^= 0x01
    path.write_bytes(bytes(data))
    future = store.root / _shard("exec-future") / "exec-future.jsonl"
    future.parent.mkdir(exist_ok=True)
    future.write_bytes(
        b'{"schemaVersion":%d,"executionId":"exec-future"}\n' % (SCHEMA_VERSION + 1)
    )
    with caplog.at_level(logging.WARNING):
        assert store.reindex() == 2
    by_id = {s.execution_id: s for s in store.list()}
    assert by_id[good].replayable
    assert by_id[bad].replayable_reason is ReplayableReason.INTEGRITY_FAILURE
    assert by_id[bad].status is RecordStatus.COMPLETED
    assert "not indexed" in caplog.text


def _shard(execution_id: str) -> str:
    return sha256(execution_id.encode()).hexdigest()[:2]


def test_stale_row_is_corrected_when_seen(store: FileExecutionStore) -> None:
    """A row claiming a record replayable that is not is fixed by find_by_hash."""
    execution_id = finished(store)
    env_hash = store.load(execution_id).header.envelope_hash
    store.invalidate(execution_id, "bad")
    with sqlite3.connect(_catalog(store)) as db:
        db.execute("UPDATE records SET replayable = 1, reason = NULL")
    db.close()
    assert store.find_by_hash(env_hash) is None
    (summary,) = store.list()
    assert summary.replayable_reason is ReplayableReason.MANUALLY_INVALIDATED


def test_older_row_never_replaces_newer(tmp_path: Path) -> None:
    """An upsert describing fewer lines than the row has is ignored."""
    with FileExecutionStore(tmp_path / "records") as store:
        execution_id = finished(store)
    catalog = Catalog(tmp_path / "records" / "catalog.sqlite3")
    row = catalog.get(execution_id)
    assert row is not None
    catalog.upsert(row._replace(lines=1, status="in_progress"))
    newer = catalog.get(execution_id)
    assert newer == row
    catalog.close()


def test_unfinished_rows_are_probed_for_their_owner(store: FileExecutionStore) -> None:
    """An open record lists as in_progress, the same record abandoned as incomplete."""
    writer = start(store)
    assert store.list()[0].status is RecordStatus.IN_PROGRESS
    writer.close()
    assert store.list()[0].status is RecordStatus.INCOMPLETE


def test_hash_lookup_uses_the_index(store: FileExecutionStore) -> None:
    """find_by_hash is answered from one index alone: no table rows, no sorting."""
    finished(store)
    with sqlite3.connect(_catalog(store)) as db:
        plan = db.execute(
            "EXPLAIN QUERY PLAN SELECT id FROM records WHERE envelope_hash = ? "
            "AND replayable = 1 ORDER BY created_us DESC, id DESC LIMIT 1",
            ("sha256:x",),
        ).fetchall()
    db.close()
    assert "COVERING INDEX records_by_hash_id" in str(plan)
    assert "TEMP B-TREE" not in str(plan)


def test_hash_index_without_id_is_replaced_in_place(
    store: FileExecutionStore,
) -> None:
    """A catalog with the hash index of before keeps its rows; the index is swapped."""
    execution_id = finished(store)
    store.close()
    with sqlite3.connect(_catalog(store)) as db:
        db.execute("DROP INDEX records_by_hash_id")
        db.execute(
            "CREATE INDEX records_by_hash ON records "
            "(envelope_hash, replayable, created_us)"
        )
    db.close()
    found = store.find_by_hash(store.load(execution_id).header.envelope_hash)
    assert found is not None
    assert found.execution_id == execution_id
    with sqlite3.connect(_catalog(store)) as db:
        names = {n for (n,) in db.execute("SELECT name FROM sqlite_master")}
    db.close()
    assert "records_by_hash_id" in names
    assert "records_by_hash" not in names


def test_catalog_of_another_layout_version_is_rebuilt(
    store: FileExecutionStore,
) -> None:
    """A catalog written by another layout version is dropped and rebuilt."""
    execution_id = finished(store)
    store.close()
    with sqlite3.connect(_catalog(store)) as db:
        db.execute("UPDATE meta SET value = '0' WHERE key = 'schema'")
    db.close()
    with FileExecutionStore(store.root) as reopened:
        assert [s.execution_id for s in reopened.list()] == [execution_id]


def test_completed_rows_written_behind_are_seen_at_once(tmp_path: Path) -> None:
    """A completed record is found and listed at once, here and by another reader."""
    with FileExecutionStore(tmp_path) as writer_side:
        execution_id = finished(writer_side)
        env_hash = writer_side.load(execution_id).header.envelope_hash
        with FileExecutionStore(tmp_path) as other_reader:
            hit = other_reader.find_by_hash(env_hash)
            assert hit is not None
            assert hit.execution_id == execution_id
            (seen,) = other_reader.list()
            assert seen.status is RecordStatus.COMPLETED
        (own,) = writer_side.list()
        assert own.status is RecordStatus.COMPLETED
        assert writer_side.find_by_hash(own.envelope_hash) is not None
    assert execution_id == own.execution_id


EXITING_WRITER = """
import sys
from intentusnet.store import FileExecutionStore
sys.path.insert(0, sys.argv[2])
from recordkit import finished

store = FileExecutionStore(sys.argv[1])
for n in range(5):
    finished(store, f"n{n}")
# no close(): rows still queued are written when the interpreter exits
"""


def test_rows_queued_at_exit_are_written(tmp_path: Path) -> None:
    """A process that exits without closing its store leaves a complete catalog."""
    tests = str(Path(__file__).parent.parent)
    subprocess.run(
        [sys.executable, "-c", EXITING_WRITER, str(tmp_path), tests], check=True
    )
    with sqlite3.connect(tmp_path / "catalog.sqlite3") as db:
        rows = db.execute("SELECT status, replayable FROM records").fetchall()
    db.close()
    assert rows == [("completed", 1)] * 5


def test_reindex_reports_a_record_edited_and_rehashed_since_it_was_indexed(
    store: FileExecutionStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A re-hashed edit passes the chain, but reindex names it and never accepts it."""
    good, edited = finished(store), finished(store, "edited")
    store.close()  # the catalog has both records' chain heads
    path = record_file(store, edited)
    path.write_bytes(reseal(path.read_bytes(), change_answer("forged")))
    assert store.load(edited).final_response["payload"] == {"echo": "forged"}
    changed: list[tuple[str, str]] = []
    with caplog.at_level(logging.WARNING, logger="intentusnet.store"):
        assert store.reindex(on_changed=lambda *found: changed.append(found)) == 2
    assert changed == [(edited, "line 6: its hash is not the one the catalog recorded")]
    assert f"record {edited} changed since the catalog saw it" in caplog.text
    by_id = {s.execution_id: s for s in store.list()}
    assert by_id[good].replayable
    assert by_id[edited].replayable_reason is ReplayableReason.INTEGRITY_FAILURE
    assert store.find_by_hash(store.load(edited).header.envelope_hash) is None
    assert not store.verify(edited).valid
    again: list[tuple[str, str]] = []
    store.reindex(on_changed=lambda *found: again.append(found))
    assert again == changed  # the catalog still remembers what it saw


def test_reindex_reports_lines_cut_from_the_end(store: FileExecutionStore) -> None:
    """A record cut back to an earlier, chain-valid state is reported, not accepted."""
    execution_id = finished(store)
    store.close()
    path = record_file(store, execution_id)
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    changed: list[tuple[str, str]] = []
    store.reindex(on_changed=lambda *found: changed.append(found))
    assert changed == [
        (
            execution_id,
            "line 6: missing; the catalog saw 6 lines but the file has 5 (lines "
            "were cut from its end)",
        )
    ]


def test_reindex_accepts_lines_appended_since_it_was_indexed(
    store: FileExecutionStore,
) -> None:
    """Records only grow: lines added after the catalog saw the record are fine."""
    execution_id = finished(store)
    store.close()
    with FileExecutionStore(store.root) as other:
        other._index.writes.write = lambda row: None  # its catalog update is lost
        other.invalidate(execution_id, "withdrawn")
    changed: list[tuple[str, str]] = []
    assert store.reindex(on_changed=lambda *found: changed.append(found)) == 1
    assert changed == []
    (summary,) = store.list()
    assert summary.replayable_reason is ReplayableReason.MANUALLY_INVALIDATED
    assert store.verify(execution_id).valid
