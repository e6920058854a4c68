"""The catalog never claims more than the files hold: cut and vanished record files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner
from recordkit import finished, record_file

from intentusnet import ListFilters
from intentusnet.cli import cli
from intentusnet.errors import RecordIntegrityError, ReplayNotAllowed
from intentusnet.record.model import RecordStatus, ReplayableReason
from intentusnet.replay import ReplayEngine
from intentusnet.store import FileExecutionStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory, closed after the test."""
    with FileExecutionStore(tmp_path / "records") as opened:
        yield opened


def _listed(store: FileExecutionStore) -> dict[str, tuple[bool, object]]:
    return {
        s.execution_id: (s.replayable, s.replayable_reason)
        for s in store.list(ListFilters())
    }


def test_a_record_cut_to_any_length_is_never_listed_or_served_as_whole(
    store: FileExecutionStore,
) -> None:
    """Every cut of a completed record's file, byte by byte, lists as damaged."""
    execution_id = finished(store, "cut me")
    other = finished(store, "keep me")
    path = record_file(store, execution_id)
    whole = path.read_bytes()
    assert _listed(store)[execution_id] == (True, None)
    for size in range(len(whole)):
        path.write_bytes(whole[:size])
        listed = _listed(store)
        assert listed[execution_id] == (False, ReplayableReason.INTEGRITY_FAILURE)
        assert listed[other] == (True, None)  # the other record is untouched
        assert not store.verify(execution_id).valid
        if size < whole.index(b"\n") + 1:  # no complete first line left
            with pytest.raises(RecordIntegrityError, match="lines were cut"):
                store.load(execution_id)
        else:
            record = store.load(execution_id)
            with pytest.raises(ReplayNotAllowed):
                ReplayEngine(record).replay()
    path.write_bytes(whole)
    assert _listed(store)[execution_id] == (True, None)


def test_a_record_cut_to_nothing_is_an_integrity_failure_in_the_cli(
    store: FileExecutionStore,
) -> None:
    """`replay` of a completed record cut to 0 bytes exits 6, not 3 (not found)."""
    execution_id = finished(store)
    store.close()  # its catalog rows written, as by a process that ended
    record_file(store, execution_id).write_bytes(b"")
    result = CliRunner().invoke(
        cli, ["--store", str(store.root), "replay", execution_id]
    )
    assert result.exit_code == 6, result.output
    assert "lines were cut" in result.output
    assert "prune" not in result.output  # never told to delete the evidence


def test_prune_keeps_a_cut_record_as_evidence(store: FileExecutionStore) -> None:
    """A completed record cut to 0 bytes is not a recording failure: prune keeps it."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    path.write_bytes(b"")
    store.reindex()
    statuses = {s.execution_id: s.status for s in store.list(ListFilters())}
    assert statuses[execution_id] is RecordStatus.COMPLETED
    store.prune(older_than=timedelta(days=30))  # recording failures go at any age
    assert path.exists()


def test_rows_without_files_are_unlisted_reported_by_verify_all_and_dropped(
    store: FileExecutionStore,
) -> None:
    """A file deleted outside the store: not listed, a failure of verify --all."""
    gone = [finished(store, f"gone {n}") for n in range(3)]
    kept = finished(store, "kept")
    for execution_id in gone:
        record_file(store, execution_id).unlink()
    assert set(_listed(store)) == {kept}
    verification = store.verify_all()
    failed = {r.execution_id: r.failures for r in verification if not r.valid}
    assert set(failed) == set(gone)
    assert all("no file" in problems[0] for problems in failed.values())
    assert verification.invalid == 3
    store.reindex()
    assert not [r for r in store.verify_all() if not r.valid]
    assert store.stats().records == 1


def test_verify_all_exits_6_for_a_row_without_its_file(
    store: FileExecutionStore,
) -> None:
    """`verify --all` names the record whose file vanished and exits 6."""
    execution_id = finished(store)
    finished(store, "other")
    record_file(store, execution_id).unlink()
    store.close()
    result = CliRunner().invoke(cli, ["--store", str(store.root), "verify", "--all"])
    assert result.exit_code == 6, result.output
    assert execution_id in result.output
    assert "no file" in result.output


def test_a_replaced_file_is_read_and_listed_by_what_it_holds(
    store: FileExecutionStore,
) -> None:
    """Another inode: the same lines list as before, an edited copy as damaged."""
    execution_id = finished(store, "replace me")
    path = record_file(store, execution_id)
    whole = path.read_bytes()
    os.link(path, path.with_suffix(".kept"))  # its inode number is not reused
    copy = path.with_suffix(".copy")
    copy.write_bytes(whole)
    copy.replace(path)  # the same bytes in a new file: nothing lost
    assert _listed(store)[execution_id] == (True, None)
    last = whole.rindex(b'"hash":"sha256:') + len('"hash":"sha256:')
    edited = (
        whole[:last]
        + (b"0" if whole[last : last + 1] != b"0" else b"1")
        + whole[last + 1 :]
    )
    copy.write_bytes(edited)  # same size, its last line's hash changed
    copy.replace(path)
    assert _listed(store)[execution_id] == (False, ReplayableReason.INTEGRITY_FAILURE)
