"""Whole-store work shard by shard: reindex and verify_all, here or in workers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from recordkit import edit, finished, line_offsets, record_file

from intentusnet import ListFilters
from intentusnet.record.model import RecordStatus
from intentusnet.store import FileExecutionStore
from intentusnet.store.file import scan
from intentusnet.store.file.layout import relative_path


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A store of 40 records, one tampered with and one file without a header."""
    with FileExecutionStore(tmp_path / "records") as opened:
        ids = [finished(opened, f"n{n}") for n in range(40)]
        path = record_file(opened, ids[7])
        edit(path, line_offsets(path)[2] + 40)
        headerless = opened.root / relative_path("exec-headerless")
        headerless.parent.mkdir(exist_ok=True)
        headerless.write_bytes(b"")
        yield opened


@pytest.mark.parametrize("processes", [1, 2])
def test_verify_all_tallies_every_record_and_yields_the_notable(
    store: FileExecutionStore, processes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Same answer in this process and in two workers: failures and notes only."""
    monkeypatch.setattr(scan, "PARALLEL_FROM", 0)  # workers even for 41 files
    done: list[int] = []
    run = store.verify_all(processes=processes, on_progress=done.append)
    shown = {report.execution_id: report for report in run}
    assert (run.records, run.invalid, run.recording_failures) == (41, 1, 1)
    assert run.events_verified == run.events_total - 1
    assert len(shown) == 2
    assert shown["exec-headerless"].recording_failure
    (tampered,) = [r for r in shown.values() if not r.valid]
    assert tampered.failures[0].startswith("line 3:")
    assert done[-1] == 41
    every = list(store.verify_all(each=True, processes=processes))
    assert len(every) == 41


@pytest.mark.parametrize("processes", [1, 2])
def test_reindex_rebuilds_the_same_catalog_here_or_in_workers(
    store: FileExecutionStore, processes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deleted catalog comes back with every file, in this process or in two."""
    monkeypatch.setattr(scan, "PARALLEL_FROM", 0)
    before = sorted((s.execution_id, s.status) for s in store.list())
    store.close()
    for path in store.root.glob("catalog.sqlite3*"):
        path.unlink()
    assert store.reindex(processes=processes) == 41
    after = sorted((s.execution_id, s.status) for s in store.list())
    # the file made behind the store's back is found too
    headerless = ("exec-headerless", RecordStatus.RECORDING_FAILURE)
    assert after == sorted([*before, headerless])
    assert store.stats().records == 41


def test_reindex_drops_rows_of_deleted_files(store: FileExecutionStore) -> None:
    """Rows whose file went away without the store knowing are dropped."""
    victim = store.list(ListFilters(status="completed"))[0].execution_id
    record_file(store, victim).unlink()
    assert store.reindex() == 40
    assert victim not in {s.execution_id for s in store.list()}
    assert store.stats().records == 40
