"""Logs of opened records: listed at once, committed in batches, never left behind."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from recordkit import finished, response, start

from intentusnet.record.model import RecordStatus
from intentusnet.store import FileExecutionStore
from intentusnet.store.file import opened
from intentusnet.store.file.opened import LOG_DIR, OpenedLog, parse_rows, row_line


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory, closed after the test."""
    with FileExecutionStore(tmp_path / "records") as opened:
        yield opened


def _rows(root: Path, table: str) -> list[str]:
    with sqlite3.connect(root / "catalog.sqlite3") as db:
        found = [i for (i,) in db.execute(f"SELECT id FROM {table}")]
    db.close()
    return found


def _logs(root: Path) -> list[str]:
    directory = root / LOG_DIR
    return sorted(p.name for p in directory.iterdir()) if directory.exists() else []


def test_opened_record_is_listed_by_another_reader_before_any_commit(
    store: FileExecutionStore,
) -> None:
    """A new record is one log line, not a commit; other readers list it at once."""
    writer = start(store)
    assert _rows(store.root, "live") == []
    assert _rows(store.root, "records") == []
    assert len(_logs(store.root)) == 1
    with FileExecutionStore(store.root) as other:
        (seen,) = other.list()
        assert (seen.execution_id, seen.status) == (
            writer.execution_id,
            RecordStatus.IN_PROGRESS,
        )
        assert other.stats().by_status == {"in_progress": 1}
    assert _rows(store.root, "live") == [writer.execution_id]  # copied in
    writer.complete(response(writer.execution_id))
    (own,) = store.list()
    assert own.status is RecordStatus.COMPLETED
    assert _rows(store.root, "live") == []


def test_a_batch_commits_logged_rows_and_a_large_log_is_replaced(
    store: FileExecutionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A batch puts rows of open records in "live"; a large log is then replaced."""
    done = finished(store)
    still_open = start(store)
    (first,) = _logs(store.root)
    store._index.writes.flush()
    assert _rows(store.root, "records") == [done]
    assert _rows(store.root, "live") == [still_open.execution_id]
    assert _logs(store.root) == [first]  # small: kept, no file made per batch
    monkeypatch.setattr(opened, "RENEW_BYTES", 1)
    finished(store, "again")
    store._index.writes.flush()
    (second,) = _logs(store.root)
    assert second != first
    still_open.close()


def test_closing_the_store_deletes_its_log(store: FileExecutionStore) -> None:
    """close() commits every row and removes the log; open records stay listed."""
    done = finished(store)
    still_open = start(store)
    store.close()
    assert _logs(store.root) == []
    assert _rows(store.root, "records") == [done]
    assert _rows(store.root, "live") == [still_open.execution_id]
    with FileExecutionStore(store.root) as other:
        statuses = {s.execution_id: s.status for s in other.list()}
    assert statuses == {
        done: RecordStatus.COMPLETED,
        still_open.execution_id: RecordStatus.IN_PROGRESS,
    }
    still_open.close()


def test_log_of_a_writer_that_is_gone_is_copied_then_deleted(
    store: FileExecutionStore,
) -> None:
    """A log nobody holds is read whole, its rows committed, the file deleted."""
    done = finished(store)
    abandoned = start(store)
    abandoned.close()
    # As if the process had been killed: the log keeps its rows, the lock is gone.
    store._index.writes._log.release()
    store._index.writes._opened.clear()
    store._index.writes._pending.clear()
    assert len(_logs(store.root)) == 1
    with FileExecutionStore(store.root) as other:
        statuses = {s.execution_id: s.status for s in other.list()}
        assert _logs(store.root) == []
    assert statuses == {
        done: RecordStatus.COMPLETED,
        abandoned.execution_id: RecordStatus.INCOMPLETE,
    }


def test_without_a_usable_log_the_row_is_committed_at_once(
    store: FileExecutionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """If the log cannot be written, opening a record commits its row directly."""

    def refuse(self: OpenedLog, row: object) -> None:
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(OpenedLog, "append", refuse)
    writer = start(store)
    assert _rows(store.root, "live") == [writer.execution_id]
    writer.complete(response(writer.execution_id))
    (seen,) = store.list()
    assert seen.status is RecordStatus.COMPLETED


def test_a_torn_or_damaged_log_line_is_skipped(store: FileExecutionStore) -> None:
    """Only complete, well-formed lines count as rows."""
    writer = start(store)
    row = store._index.writes._opened[writer.execution_id]
    line = row_line(row)
    assert parse_rows(line + b"[1, 2]\n" + b"not json\n" + line[:10]) == [row]
    writer.close()


WRITER = textwrap.dedent(
    """
    import sys
    from intentusnet.store import FileExecutionStore
    sys.path.insert(0, sys.argv[2])
    from recordkit import finished, start

    with FileExecutionStore(sys.argv[1]) as store:
        for n in range(int(sys.argv[3])):
            finished(store, f"{sys.argv[4]}-{n}")
            if n % 10 == 0:
                start(store, f"{sys.argv[4]}-open-{n}").close()  # left incomplete
    """
)


def test_reading_while_processes_write_sees_each_record_once(tmp_path: Path) -> None:
    """Listings taken while three processes write never repeat or lose a record."""
    root = tmp_path / "shared"
    tests = str(Path(__file__).parents[2])
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), tests, "100", f"p{p}"]
        )
        for p in range(3)
    ]
    seen_most = 0
    with FileExecutionStore(root) as reader:
        while any(child.poll() is None for child in children):
            if not root.exists():
                time.sleep(0.005)
                continue
            ids = [s.execution_id for s in reader.list()]
            assert len(ids) == len(set(ids))
            assert len(ids) >= seen_most  # records are never unlisted
            seen_most = len(ids)
        assert [child.wait() for child in children] == [0, 0, 0]
        summaries = reader.list()
        statuses = [s.status for s in summaries]
        assert statuses.count(RecordStatus.COMPLETED) == 300
        assert statuses.count(RecordStatus.INCOMPLETE) == 30
        assert reader.stats().records == 330
    assert _logs(root) == []


def test_a_forked_child_keeps_its_own_log(store: FileExecutionStore) -> None:
    """After fork, the child logs to a log of its own; the parent's is untouched."""
    parents = start(store)
    (parent_log,) = _logs(store.root)
    pid = os.fork()
    if pid == 0:  # the child: record one execution, then vanish without cleanup
        try:
            finished(store, "from the child")
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    assert parent_log in _logs(store.root)
    with FileExecutionStore(store.root) as other:
        found = {s.execution_id: s.status for s in other.list()}
        children = [i for i in found if i != parents.execution_id]
        (child_id,) = children
        assert other.load(child_id).header.owner["pid"] == pid  # type: ignore[index]
    assert found == {
        parents.execution_id: RecordStatus.IN_PROGRESS,
        child_id: RecordStatus.COMPLETED,
    }
    assert _logs(store.root) == [parent_log]  # the child's, copied and deleted
    parents.close()
