"""The transparency log in PostgreSQL: the same tiles as rows, one appender at a time.

Against a real server (tests/pgkit.py). Rows are dumped to a folder and checked
by ``aics-tlog`` as the file store's tiles are (tests/tlogkit.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import orjson
import psycopg
import pytest
from click.testing import CliRunner
from recordkit import finished
from tlogkit import disagreeing_files

from intentusnet.cli import cli as main
from intentusnet.errors import LogError
from intentusnet.record.keys import SigningKey
from intentusnet.store import PostgresExecutionStore
from intentusnet.store.postgres.connection import Connection
from intentusnet.store.postgres.translog import (
    PostgresTileLog,
    record_states,
    store_log,
)
from intentusnet.tlog.audit import audit_log, log_origin
from intentusnet.tlog.cadence import LogCadence
from intentusnet.tlog.leaf import LogLeaf
from intentusnet.tlog.log import TileLog

ROOT = Path(__file__).resolve().parents[3]
FAST = LogCadence(seconds=0.02, leaves=256)


def dump(dsn: str, origin: str, to: Path) -> Path:
    """The log's rows written out as the files they stand for."""
    with psycopg.connect(dsn) as conn:
        rows = conn.execute(
            "SELECT path, data FROM intentusnet_log_tiles WHERE origin = %s", [origin]
        ).fetchall()
    for path, data in rows:
        (to / path).parent.mkdir(parents=True, exist_ok=True)
        (to / path).write_bytes(bytes(data))
    return to


@pytest.fixture
def db(pg_dsn: str) -> Iterator[Connection]:
    """A connection of the log's own to the test's database, closed after it."""
    made = Connection(pg_dsn, "flush", 1)
    yield made
    made.close()


def leaves_of(count: int, start: int = 0) -> list[bytes]:
    """``count`` distinct leaves."""
    return [f"leaf {i}\n".encode() for i in range(start, start + count)]


def test_the_rows_are_the_files_byte_for_byte(
    pg_dsn: str, db: Connection, tmp_path: Path
) -> None:
    """The same leaves appended on files and in rows give the same bytes per path.

    Three appends (250, 300, 1): every tile, bundle and the checkpoint; reading,
    proofs and the right-edge check work on the rows as on the files.
    """
    key = SigningKey.generate()
    origin = "example.com/pg"
    files = TileLog(tmp_path / "files", origin=origin, signing_key=key)
    rows = PostgresTileLog(db, origin, key)
    leaves = leaves_of(551)
    for part in (leaves[:250], leaves[250:550], leaves[550:]):
        assert rows.append(part) == files.append(part)
    dumped = dump(pg_dsn, origin, tmp_path / "dumped")
    on_disk = {
        p.relative_to(tmp_path / "files").as_posix(): p.read_bytes()
        for p in (tmp_path / "files").rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }
    in_rows = {
        p.relative_to(dumped).as_posix(): p.read_bytes()
        for p in dumped.rglob("*")
        if p.is_file()
    }
    assert in_rows == on_disk
    assert disagreeing_files(dumped, leaves) == []
    assert rows.prove_inclusion(300) == files.prove_inclusion(300)
    assert rows.prove_consistency(250) == files.prove_consistency(250)
    assert rows.tree_head(key.public_key) == files.tree_head(key.public_key)
    assert rows.leaf(549) == leaves[549]


def test_a_signed_store_logs_each_close_and_the_commands_work(
    pg_dsn: str, db: Connection, tmp_path: Path
) -> None:
    """Closes and an invalidation are leaves; log verify, prove, backfill on the URL.

    The audit finds nothing; a deleted record is `deleted` (13); a record closed
    while the log was off is `hidden` (10) until `log backfill`; a proof of a
    record verifies offline.
    """
    key = SigningKey.generate()
    private, public = key.save(tmp_path / "keys")
    store = PostgresExecutionStore(pg_dsn, signing_key=key, log_cadence=FAST)
    ids = [finished(store, f"hello {i}") for i in range(5)]
    store.invalidate(ids[0], "wrong")
    store.close()
    log = store_log(db, key.key_id)
    parsed = [LogLeaf.from_bytes(leaf) for leaf in log.leaves()]
    # One leaf a close and one more for the invalidation, at a new chain head.
    # Leaves a pending scan finds come in the order the records were created
    # (docs/log.md), so the invalidation's may come before a later close's.
    assert sorted(leaf.execution_id for leaf in parsed) == sorted([*ids, ids[0]])
    assert len({leaf.chain_head for leaf in parsed if leaf.execution_id == ids[0]}) == 2
    runner = CliRunner()

    def run(*args: str) -> tuple[int, str]:
        result = runner.invoke(main, ["--store", pg_dsn, *args])
        return result.exit_code, result.stdout

    state = str(tmp_path / "state")
    verify = ("log", "verify", "--key", str(public), "--state", state, "--grace", "0")
    code, out = run(*verify, "--json")
    assert (code, orjson.loads(out)["findings"]) == (0, [])
    code, _ = run("log", "prove", ids[2], "--out", str(tmp_path / "p"))
    assert code == 0
    code, out = run("log", "verify-proof", str(tmp_path / "p"), "--key", str(public))
    assert (code, ids[2] in out) == (0, True)
    unlogged = PostgresExecutionStore(pg_dsn, signing_key=key, log_cadence=None)
    quiet = finished(unlogged, "not logged")
    unlogged.close()
    code, out = run(*verify, "--json")
    findings = orjson.loads(out)["findings"]
    assert (code, [(f["name"], f["executionId"]) for f in findings]) == (
        10,
        [("hidden", quiet)],
    )
    result = runner.invoke(
        main, ["--store", pg_dsn, "--signing-key", str(private), "log", "backfill"]
    )
    assert result.exit_code == 0, result.output
    assert "Appended 1 leaves; the log holds 7." in result.stdout
    again = runner.invoke(
        main, ["--store", pg_dsn, "--signing-key", str(private), "log", "backfill"]
    )
    assert "Appended 0 leaves" in again.stdout
    deleting = PostgresExecutionStore(pg_dsn)
    deleting.delete(ids[3])
    deleting.close()
    code, out = run(*verify, "--json")
    findings = orjson.loads(out)["findings"]
    assert (code, [(f["name"], f["executionId"]) for f in findings]) == (
        13,
        [("deleted", ids[3])],
    )


WRITER = textwrap.dedent(
    """
    import os, sys
    from intentusnet.record.keys import SigningKey
    from intentusnet.store import PostgresExecutionStore
    from intentusnet.tlog.cadence import LogCadence
    sys.path.insert(0, sys.argv[4])
    from recordkit import finished

    dsn, key_file, count, seconds = sys.argv[1:4] + sys.argv[5:6]
    store = PostgresExecutionStore(
        dsn, signing_key=SigningKey.load(key_file),
        log_cadence=LogCadence(float(seconds), 1 if seconds == "0" else 1000),
    )
    print("ready", flush=True)
    sys.stdin.readline()
    for i in range(int(count)):
        finished(store, f"writer {i}")
    if seconds != "0":  # killed with its leaves queued
        os.kill(os.getpid(), 9)
    store.close()
    """
)


def child_env() -> dict[str, str]:
    """The environment of a child: this checkout first on the path."""
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path}


def test_two_processes_appending_at_once_never_fork_the_log(
    pg_dsn: str, db: Connection, tmp_path: Path
) -> None:
    """Two routers closing 40 records each, a batch per leaf: one log of 80 leaves.

    Each record is a leaf once; the rows agree with the leaves (aics-tlog); the
    audit, against every record, finds nothing.
    """
    key = SigningKey.generate()
    private, _ = key.save(tmp_path / "keys")
    kit = str(ROOT / "tests")
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, pg_dsn, str(private), "40", kit, "0"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=child_env(),
        )
        for _ in range(2)
    ]
    for child in children:
        assert child.stdout is not None
        assert child.stdout.readline() == b"ready\n"
    for child in children:  # both go at once
        assert child.stdin is not None
        child.stdin.write(b"go\n")
        child.stdin.close()
    for child in children:
        assert child.wait(timeout=120) == 0
        assert child.stdout is not None
        child.stdout.close()
    log = store_log(db, key.key_id)
    leaves = list(log.leaves())
    ids = [LogLeaf.from_bytes(leaf).execution_id for leaf in leaves]
    assert len(ids) == len(set(ids)) == 80
    dumped = dump(pg_dsn, log_origin(key.key_id), tmp_path / "dumped")
    assert disagreeing_files(dumped, leaves) == []
    store = PostgresExecutionStore(pg_dsn)
    audit = audit_log(
        log, key.public_key, records=record_states(db, store.load, key.public_key)
    )
    store.close()
    assert (audit.findings, audit.leaves, audit.records) == ([], 80, 80)


KILLED = textwrap.dedent(
    """
    import sys, time
    from intentusnet.record.keys import SigningKey
    from intentusnet.store.postgres.connection import Connection
    from intentusnet.store.postgres.translog import PostgresTileLog
    from intentusnet.tlog.leaf import LogLeaf

    dsn, key_file, origin, where, nth = sys.argv[1:6]
    key = SigningKey.load(key_file)
    log = PostgresTileLog(Connection(dsn, "flush", 1), origin, key)
    seen = 0

    def hook(frame, event, arg):
        global seen
        code = frame.f_code
        if event == "call" and code.co_name == where and "postgres" in code.co_filename:
            seen += 1
            if seen == int(nth):
                sys.setprofile(None)
                print("at", flush=True)
                time.sleep(60)

    sys.setprofile(hook)
    made = [LogLeaf(f"e-{i}", f"sha256:{i:064x}", None) for i in range(250, 550)]
    log.append([leaf.to_bytes() for leaf in made])
    sys.setprofile(None)
    print("done", flush=True)
    """
)
#: Where the appender is stopped and killed: before each of its 8 row writes (3
#: bundles, 3 level-0 tiles, 1 level-1 tile, the checkpoint), and after the last
#: one, before its commit (indexing the leaves).
KILL_POINTS = [("_write", n) for n in range(1, 9)] + [("_leaf_rows", 1)]


@pytest.mark.slow
def test_a_sequencer_killed_mid_append_leaves_no_row_of_it(
    pg_dsn: str, db: Connection, tmp_path: Path
) -> None:
    """SIGKILL at each write of a 300-leaf append: the log stays at 250, consistent.

    After each kill no row disagrees with the 250 leaves (none past them either),
    and the checkpoint is the one before; a last appender then appends the 300.
    """
    key = SigningKey.generate()
    private, _ = key.save(tmp_path / "keys")
    origin = log_origin(key.key_id)  # the audit checks the log's own origin
    log = PostgresTileLog(db, origin, key)
    leaves = [
        LogLeaf(f"e-{i}", f"sha256:{i:064x}", None).to_bytes() for i in range(550)
    ]
    log.append(leaves[:250])
    before = log.checkpoint_note()
    for where, nth in [*KILL_POINTS, ("none", 1)]:
        child = subprocess.Popen(
            [
                sys.executable,
                "-c",
                KILLED,
                pg_dsn,
                str(private),
                origin,
                where,
                str(nth),
            ],
            stdout=subprocess.PIPE,
            env=child_env(),
        )
        assert child.stdout is not None
        said = child.stdout.readline()
        if where == "none":
            assert said == b"done\n"
            assert child.wait(timeout=60) == 0
        else:
            assert said == b"at\n", (where, nth)
            child.kill()
            assert child.wait(timeout=60) == -9
        child.stdout.close()
        folder = dump(pg_dsn, origin, tmp_path / f"{where}-{nth}")
        size = 550 if where == "none" else 250
        assert disagreeing_files(folder, leaves[:size]) == [], (where, nth)
        assert log.size == size
        if size == 250:
            assert log.checkpoint_note() == before
        assert audit_log(log, key.public_key).findings == []


def test_a_log_without_its_key_refuses_to_append(pg_dsn: str, db: Connection) -> None:
    """A PostgreSQL log opened without the signing key refuses to append, precisely."""
    log = PostgresTileLog(db, "example.com/o")
    with pytest.raises(LogError, match="origin and signing key"):
        log.append([b"x"])


def test_leaves_queued_by_a_killed_router_are_appended_by_the_next(
    pg_dsn: str, db: Connection, tmp_path: Path
) -> None:
    """A router killed (SIGKILL) with 5 leaves queued: the next one's scan logs them."""
    key = SigningKey.generate()
    private, _ = key.save(tmp_path / "keys")
    argv = [pg_dsn, str(private), "5", str(ROOT / "tests"), "600"]
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=child_env(),
    )
    out, _ = child.communicate(b"go\n", timeout=60)
    assert (child.returncode, out) == (-9, b"ready\n")
    log = store_log(db, key.key_id)
    # Its first scan may have logged some before the kill; the rest were queued.
    store = PostgresExecutionStore(pg_dsn, signing_key=key, log_cadence=FAST)
    last = finished(store, "next")
    store.close()
    ids = [LogLeaf.from_bytes(leaf).execution_id for leaf in log.leaves()]
    assert len(ids) == len(set(ids)) == 6
    assert last in ids


def test_deletions_by_the_store_are_logged_and_not_reported(
    pg_dsn: str, db: Connection
) -> None:
    """delete() and prune() with the key log deletion leaves first: no finding.

    A record deleted by a store without the key (no deletion leaf) is `deleted`.
    """
    key = SigningKey.generate()
    store = PostgresExecutionStore(pg_dsn, signing_key=key, log_cadence=FAST)
    ids = [finished(store, f"r {i}") for i in range(4)]
    store.delete(ids[0])
    assert sorted(store.prune(timedelta(0))) == sorted(ids[1:])
    log = store_log(db, key.key_id)
    deleted = [LogLeaf.from_bytes(leaf) for leaf in log.leaves()]
    assert sorted(leaf.execution_id for leaf in deleted if leaf.deleted) == sorted(ids)

    def findings() -> list[tuple[str, str | None]]:
        audit = audit_log(
            log, key.public_key, records=record_states(db, store.load, key.public_key)
        )
        return [(f.name, f.execution_id) for f in audit.findings]

    assert findings() == []
    by_hand = finished(store, "by hand")
    store.close()
    keyless = PostgresExecutionStore(pg_dsn)
    keyless.delete(by_hand)
    keyless.close()
    assert findings() == [("deleted", by_hand)]
    store.close()
