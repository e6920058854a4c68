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
import shutil
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
#: (leaves before, leaves appended, files the append writes). 250 + 300:
#: bundles 000, 001 and 002.p/38, level-0 tiles 000, 001 and 002.p/38, level-1
#: tile 000.p/2, the checkpoint. 65,500 + 100 (a level-1 tile fills): bundles
#: 255 and 256.p/64, level-0 tiles 255 and 256.p/64, level-1 tile 000, level-2
#: tile 000.p/1, the checkpoint.
SMALL, LARGE = (250, 300, 8), (65_500, 100, 7)
KILLS = [
    pytest.param(
        scenario,
        where,
        nth,
        marks=[pytest.mark.slow] * (scenario is LARGE),
        id=f"{'large' if scenario is LARGE else 'small'}-{where}-{nth}",
    )
    for scenario in (SMALL, LARGE)
    for where in ("written", "before_rename", "after_rename")
    for nth in range(1, scenario[2] + 1)
]

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
    path: Path, key_file: Path, scenario: tuple[int, int, int], where: str, nth: int
) -> subprocess.Popen[str]:
    """Start the appending child, stopping at the ``nth`` event ``where``."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, str(path), str(key_file), str(scenario[0]),
         str(scenario[1]), where, str(nth), ORIGIN],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A signing key file the child loads."""
    private, _public = SigningKey.generate().save(tmp_path_factory.mktemp("keys"))
    return private


@pytest.fixture(scope="module")
def templates(
    tmp_path_factory: pytest.TempPathFactory, key_file: Path
) -> dict[int, Path]:
    """Logs of each scenario's first leaves, made once, copied by each test."""
    made: dict[int, Path] = {}
    for before, _batch, _writes in (SMALL, LARGE):
        path = tmp_path_factory.mktemp(f"log-{before}")
        key = SigningKey.load(key_file)
        TileLog(path, origin=ORIGIN, signing_key=key, durable=False).append(
            leaves(0, before)
        )
        made[before] = path
    return made


def a_log(
    path: Path, key_file: Path, templates: dict[int, Path], before: int
) -> TileLog:
    """The log with its first ``before`` leaves, at ``path``."""
    shutil.copytree(templates[before], path, dirs_exist_ok=True)
    return TileLog(path, origin=ORIGIN, signing_key=SigningKey.load(key_file))


@pytest.mark.parametrize("scenario", [SMALL, LARGE], ids=["small", "large"])
def test_the_seam_sees_every_write(
    tmp_path: Path, key_file: Path, templates, scenario: tuple[int, int, int]
) -> None:
    """Run to the end, the append renames exactly the files the kill points cover."""
    before, batch, writes = scenario
    a_log(tmp_path, key_file, templates, before)
    with run_child(tmp_path, key_file, scenario, "count", 0) as child:
        out, _ = child.communicate(timeout=60)
    assert child.returncode == 0
    assert out.split() == ["done", str(before + batch), str(writes)]


@pytest.mark.parametrize(("scenario", "where", "nth"), KILLS)
def test_a_killed_append_leaves_the_log_whole(
    tmp_path: Path,
    key_file: Path,
    templates: dict[int, Path],
    scenario: tuple[int, int, int],
    where: str,
    nth: int,
) -> None:
    """Killed at any write, the checkpoint and its tiles agree with the leaves."""
    oracle = aics_tlog()
    before, batch, writes = scenario
    log = a_log(tmp_path, key_file, templates, before)
    key = SigningKey.load(key_file)
    with run_child(tmp_path, key_file, scenario, where, nth) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "stopped\n"
        finally:
            child.send_signal(signal.SIGKILL)
            child.wait(timeout=60)
    assert child.returncode == -signal.SIGKILL

    head = log.tree_head(key.public_key)
    committed = where == "after_rename" and nth == writes
    assert head.size == (before + batch if committed else before)
    written = leaves(0, head.size)
    assert head.root == oracle.MerkleTree(written).root()
    oracle.audit_tiles(oracle.FileSystemTileReader(tmp_path), head.size, head.root)

    # The next append deletes the killed one's leftovers, then every file agrees.
    more = [b"after the kill"] * 3
    assert log.append(more) == head.size + 3
    assert disagreeing_files(tmp_path, written + more) == []
    assert list((tmp_path / ".tmp").iterdir()) == []
    assert log.root() == oracle.MerkleTree(written + more).root()
