"""An appending process killed with SIGKILL at each write of an append.

The child appends a batch to a real log on disk; a profile hook
(``sys.setprofile``) stops it at one exact point of ``TileLog``'s file writes
(a temporary file written, a rename about to happen, a rename done) and says
so; the parent kills it with SIGKILL. Nothing is replaced: the kill lands
where a machine could lose the process. Then the checkpoint, and every tile
and bundle it covers, must agree with the leaves, and the next append must
clean up and go on.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tlogkit import aics_tlog, disagreeing_files

from intentusnet.record.keys import SigningKey
from intentusnet.tlog.log import TileLog

ROOT = Path(__file__).resolve().parents[2]
ORIGIN = "example.com/crash"
BEFORE, BATCH = 250, 300
#: The files one append of 300 leaves to 250 writes: bundles 000, 001 and
#: 002.p/38, level-0 tiles 000, 001 and 002.p/38, level-1 tile 000.p/2, and
#: the checkpoint last.
WRITES = 8

CHILD = textwrap.dedent(
    """
    import os, sys, time
    from intentusnet.record.keys import SigningKey
    from intentusnet.tlog.log import TileLog

    path, key_file, first, count, where, nth, origin = sys.argv[1:8]
    event, call = {
        "written": ("c_return", os.write),
        "before_rename": ("c_call", os.replace),
        "after_rename": ("c_return", os.replace),
        "count": ("c_call", os.replace),
    }[where]
    seen = 0

    def stop(frame, what, arg):
        global seen
        if (
            what == event
            and arg is call
            and frame.f_globals.get("__name__") == "intentusnet.tlog.log"
        ):
            seen += 1
            if seen == int(nth):
                print("stopped", flush=True)
                time.sleep(120)  # until killed

    log = TileLog(path, origin=origin, signing_key=SigningKey.load(key_file))
    leaves = [f"leaf {i}".encode() for i in range(int(first), int(first) + int(count))]
    sys.setprofile(stop)
    size = log.append(leaves)
    sys.setprofile(None)
    print("done", size, seen, flush=True)
    """
)


def leaves(first: int, count: int) -> list[bytes]:
    """The leaves the child appends: ``leaf <i>``."""
    return [f"leaf {i}".encode() for i in range(first, first + count)]


def run_child(
    path: Path, key_file: Path, where: str, nth: int
) -> subprocess.Popen[str]:
    """Start the appending child, stopping at the ``nth`` event ``where``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(key_file), str(BEFORE),
         str(BATCH), where, str(nth), ORIGIN],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A signing key file the child loads."""
    private, _public = SigningKey.generate().save(tmp_path_factory.mktemp("keys"))
    return private


def a_log(path: Path, key_file: Path) -> TileLog:
    """The log with its first 250 leaves."""
    log = TileLog(path, origin=ORIGIN, signing_key=SigningKey.load(key_file))
    log.append(leaves(0, BEFORE))
    return log


def test_the_seam_sees_every_write(tmp_path: Path, key_file: Path) -> None:
    """Run to the end, the append renames exactly the files the kill points cover."""
    a_log(tmp_path, key_file)
    with run_child(tmp_path, key_file, "count", 0) as child:
        out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    assert out.split() == ["done", str(BEFORE + BATCH), str(WRITES)]


@pytest.mark.parametrize("nth", range(1, WRITES + 1))
@pytest.mark.parametrize("where", ["written", "before_rename", "after_rename"])
def test_a_killed_append_leaves_the_log_whole(
    tmp_path: Path, key_file: Path, where: str, nth: int
) -> None:
    """Killed at any write, the checkpoint and its tiles agree with the leaves."""
    oracle = aics_tlog()
    log = a_log(tmp_path, key_file)
    key = SigningKey.load(key_file)
    with run_child(tmp_path, key_file, where, nth) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "stopped\n"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL

    head = log.tree_head(key.public_key)
    committed = where == "after_rename" and nth == WRITES
    assert head.size == (BEFORE + BATCH if committed else BEFORE)
    written = leaves(0, head.size)
    assert head.root == oracle.MerkleTree(written).root()
    oracle.audit_tiles(oracle.FileSystemTileReader(tmp_path), head.size, head.root)

    # The next append deletes the killed one's leftovers, then every file agrees.
    more = [b"after the kill"] * 3
    assert log.append(more) == head.size + 3
    assert disagreeing_files(tmp_path, written + more) == []
    assert list((tmp_path / ".tmp").iterdir()) == []
    assert log.root() == oracle.MerkleTree(written + more).root()
