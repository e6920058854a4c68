"""FileExecutionStore(catalog_dir=...): the derived files kept out of the root."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from recordkit import finished, start

from intentusnet.store import FileExecutionStore
from intentusnet.store.file import scan


def files_under(root: Path) -> list[str]:
    """Every file and directory under ``root``, relative, in order."""
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


@pytest.mark.parametrize("processes", [1, 2])
def test_the_root_holds_only_record_files(
    tmp_path: Path, processes: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writing, listing, a live record and a reindex leave only records in the root."""
    monkeypatch.setattr(scan, "PARALLEL_FROM", 0)  # workers open the catalog too
    root, derived = tmp_path / "records", tmp_path / "cache" / "catalog"
    with FileExecutionStore(root, catalog_dir=derived) as store:
        done = finished(store, "one")
        live = start(store, "two")
        assert {s.execution_id for s in store.list()} == {done, live.execution_id}
        assert store.reindex(processes=processes) == 2
        live.close()
        records = sum(p.stat().st_size for p in root.glob("*/*.jsonl"))
        catalog = sum(p.stat().st_size for p in derived.glob("catalog.sqlite3*"))
        assert store.stats().bytes_on_disk == records + catalog  # counted there
    names = files_under(root)
    assert all(n.endswith(".jsonl") or len(n) == 2 for n in names), names
    assert len([n for n in names if n.endswith(".jsonl")]) == 2
    assert (derived / "catalog.sqlite3").is_file()
    assert (derived / "opened").is_dir()  # the logs of opened records went here


def test_a_new_catalog_dir_is_rebuilt_from_the_files_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A store with an empty catalog_dir lists what the files hold, with no warning."""
    root = tmp_path / "records"
    with FileExecutionStore(root) as store:
        made = {finished(store, "a"), finished(store, "b")}
    with caplog.at_level(logging.WARNING, logger="intentusnet.store"):
        with FileExecutionStore(root, catalog_dir=tmp_path / "fresh") as store:
            assert {s.execution_id for s in store.list()} == made
            found = store.load(sorted(made)[0]).header.envelope_hash
            assert store.find_by_hash(found)
        assert caplog.records == []
        (root / "catalog.sqlite3").unlink()  # the root's own catalog, lost
        with FileExecutionStore(root) as store:
            assert {s.execution_id for s in store.list()} == made
        assert "is new or was lost" in caplog.text  # that one still says so
    assert (tmp_path / "fresh" / "catalog.sqlite3").is_file()


def test_a_catalog_that_missed_records_is_not_noticed_until_reindex(
    tmp_path: Path,
) -> None:
    """As documented: one catalog_dir per store, or a new one; reindex mends it."""
    root, derived = tmp_path / "records", tmp_path / "catalog"
    with FileExecutionStore(root, catalog_dir=derived) as store:
        first = finished(store, "a")
        assert [s.execution_id for s in store.list()] == [first]
    with FileExecutionStore(root) as other:  # its catalog is in the root
        second = finished(other, "b")
    with FileExecutionStore(root, catalog_dir=derived) as store:
        assert [s.execution_id for s in store.list()] == [first]
        store.reindex()
        assert {s.execution_id for s in store.list()} == {first, second}


def test_reading_a_missing_store_makes_no_catalog_dir(tmp_path: Path) -> None:
    """A store that does not exist is read as empty; nothing is made anywhere."""
    derived = tmp_path / "catalog"
    with FileExecutionStore(tmp_path / "none", catalog_dir=derived) as store:
        assert store.list() == []
        assert store.stats().records == 0
    assert not derived.exists()
    assert not (tmp_path / "none").exists()
