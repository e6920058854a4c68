"""A recording process killed with SIGKILL while it opens a record.

The child opens a record with the real store; a profile hook (``sys.setprofile``)
stops it at one exact system call inside the store's file creation and says so;
the parent then kills it with SIGKILL. Nothing of the store or the file system
is replaced: the kill lands where an operator's machine could be killed.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from intentusnet import ListFilters, RecordStatus, ReplayableReason
from intentusnet.cli import cli
from intentusnet.errors import RecordNotFound
from intentusnet.replay import ReplayEngine
from intentusnet.store import FileExecutionStore
from intentusnet.store.file.layout import relative_path

CHILD = textwrap.dedent(
    """
    import os, sys, time
    from intentusnet.hashing import compute_hash
    from intentusnet.store import FileExecutionStore
    sys.path.insert(0, sys.argv[2])
    from recordkit import envelope

    root, _, stop_at, execution_id, durability = sys.argv[1:6]
    # Where to stop inside store/file/files.create: before the file is created,
    # after it is created but before its header is written, or after the header.
    event, call = {
        "before_file": ("c_call", os.open),
        "before_header": ("c_call", os.write),
        "after_header": ("c_return", os.write),
    }[stop_at]

    def stop(frame, what, arg):
        if (
            what == event
            and arg is call
            and frame.f_code.co_name == "create"
            and frame.f_globals["__name__"] == "intentusnet.store.file.files"
        ):
            print("stopped", flush=True)
            time.sleep(120)  # until killed

    store = FileExecutionStore(root, durability=durability)
    wire = envelope("crash")
    sys.setprofile(stop)
    store.open(wire, envelope_hash=compute_hash(wire), execution_id=execution_id)
    sys.setprofile(None)
    print("not stopped", flush=True)
    """
)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory, closed after the test."""
    with FileExecutionStore(tmp_path / "records") as opened:
        yield opened


def _killed_at(
    store: FileExecutionStore, stop_at: str, durability: str = "flush"
) -> str:
    """Run a child that opens a record, stop it at ``stop_at``, SIGKILL it."""
    execution_id = f"crash-{stop_at.replace('_', '-')}"
    tests = str(Path(__file__).parents[2])
    arguments = (stop_at, execution_id, durability)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(store.root), tests, *arguments],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "stopped\n"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    assert child.returncode == -signal.SIGKILL
    return execution_id


def _verify_all(root: Path) -> tuple[int, list[str]]:
    result = CliRunner().invoke(cli, ["--store", str(root), "verify", "--all"])
    return result.exit_code, result.stdout.splitlines()


def test_killed_before_the_header_is_a_listed_prunable_recording_failure(
    store: FileExecutionStore,
) -> None:
    """A 0-byte file left by a kill: listed, a note in verify (exit 0), pruned."""
    execution_id = _killed_at(store, "before_header")
    path = store.root / relative_path(execution_id)
    assert path.read_bytes() == b""
    (seen,) = store.list()
    assert (seen.execution_id, seen.status) == (
        execution_id,
        RecordStatus.RECORDING_FAILURE,
    )
    assert seen.intent_name == "echo"  # what the catalog knew before the file
    assert seen.replayable_reason is ReplayableReason.RECORDING_FAILURE
    assert [
        s.execution_id for s in store.list(ListFilters(status="recording_failure"))
    ] == [execution_id]
    assert store.stats().by_status == {"recording_failure": 1}
    report = store.verify(execution_id)
    assert (report.valid, report.recording_failure, report.failures) == (
        True,
        True,
        (),
    )
    code, lines = _verify_all(store.root)
    assert code == 0
    assert lines[0].endswith("- RECORDING FAILURE")
    assert lines[-1].startswith("Total: 1 records (0 invalid, 1 recording failures)")
    with pytest.raises(RecordNotFound, match="no complete first line"):
        store.load(execution_id)
    assert store.prune(timedelta(days=30)) == [execution_id]  # whatever its age
    assert not path.exists()
    assert store.list() == []
    assert store.stats().records == 0


@pytest.mark.parametrize("durability", ["flush", "fsync"])
def test_killed_after_the_header_is_listed_at_once_and_force_replayable(
    store: FileExecutionStore, durability: str
) -> None:
    """A record whose process died right after its header: incomplete, at once."""
    execution_id = _killed_at(store, "after_header", durability)
    (seen,) = store.list()  # no reindex
    assert (seen.execution_id, seen.status) == (execution_id, RecordStatus.INCOMPLETE)
    assert store.stats().by_status == {"incomplete": 1}
    with FileExecutionStore(store.root) as other:  # another reader alike
        assert [s.status for s in other.list()] == [RecordStatus.INCOMPLETE]
    assert store.verify(execution_id).valid
    code, lines = _verify_all(store.root)
    assert (code, lines[-1][-7:]) == (0, "- VALID")
    forced = ReplayEngine(store.load(execution_id)).replay(force=True)
    assert (forced.forced, forced.partial, forced.payload) == (True, True, None)
    assert store.prune(timedelta(days=30)) == []  # an ordinary young record


def test_killed_before_the_file_leaves_nothing_listed(
    store: FileExecutionStore,
) -> None:
    """A kill between the catalog row and the file: nothing listed, id reusable."""
    execution_id = _killed_at(store, "before_file")
    assert store.list() == []
    assert store.stats().records == 0
    code, lines = _verify_all(store.root)
    assert (code, lines) == (0, [lines[0]])
    assert lines[0].startswith("Total: 0 records")
    assert not store.exists(execution_id)
    result = CliRunner().invoke(
        cli, ["--store", str(store.root), "records", "list", "--json"]
    )
    assert orjson.loads(result.stdout) == []


COMPLETE_THEN_DIE = textwrap.dedent(
    """
    import os, signal, sys
    sys.path.insert(0, sys.argv[2])
    from recordkit import finished
    from intentusnet.store import FileExecutionStore

    store = FileExecutionStore(sys.argv[1])
    print(finished(store, "completed, then killed"), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # before anything else is written
    """
)


def test_state_filters_list_records_by_what_their_files_say(
    store: FileExecutionStore,
) -> None:
    """replayable= and status= list a killed writer's records by their files."""
    cut_short = _killed_at(store, "after_header")
    tests = str(Path(__file__).parents[2])
    child = subprocess.run(
        [sys.executable, "-c", COMPLETE_THEN_DIE, str(store.root), tests],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    completed = child.stdout.strip()

    def ids(**filters: object) -> list[str]:
        return [s.execution_id for s in store.list(ListFilters(**filters))]  # type: ignore[arg-type]

    assert ids(replayable=True) == [completed]
    assert ids(replayable=False) == [cut_short]
    assert ids(status="completed", replayable=True) == [completed]
    assert ids(status="incomplete", replayable=False) == [cut_short]
    assert ids(status="in_progress") == []
