"""The SQLite catalog: derived data, rebuilt from the files, never trusted blindly."""

from __future__ import annotations

import logging
import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from hashlib import sha256
from pathlib import Path

import orjson
import pytest
from recordkit import change_answer, finished, record_file, reseal, response, start

from intentusnet import ListFilters
from intentusnet.errors import StoreError
from intentusnet.record.model import SCHEMA_VERSION, RecordStatus, ReplayableReason
from intentusnet.store import FileExecutionStore
from intentusnet.store.file.catalog import Catalog


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
    store.close()
    row = Catalog(_catalog(store)).get(execution_id)
    assert row is not None
    store.invalidate(execution_id, "bad")
    store.close()
    # As another process that had not seen the invalidation would write it.
    stale = Catalog(_catalog(store))
    stale.upsert_many([row._replace(lines=row.lines + 1)])
    stale.close()
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
    catalog.upsert_many([row._replace(lines=1, status="in_progress")])
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


def test_catalog_that_lost_an_index_is_rebuilt(
    store: FileExecutionStore,
) -> None:
    """A catalog of this layout missing an index is damaged: rebuilt, answers right."""
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
    tests = str(Path(__file__).parents[2])
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
        other._index.writes.write = lambda *row: None  # its catalog update is lost
        other.invalidate(execution_id, "withdrawn")
    changed: list[tuple[str, str]] = []
    assert store.reindex(on_changed=lambda *found: changed.append(found)) == 1
    assert changed == []
    (summary,) = store.list()
    assert summary.replayable_reason is ReplayableReason.MANUALLY_INVALIDATED
    assert store.verify(execution_id).valid


def _assorted_store(root: Path) -> None:
    """Records of three intents: completed, failed, invalidated, incomplete."""
    from intentusnet import IntentRouter

    recorded = FileExecutionStore(root)
    with IntentRouter(store=recorded) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
        router.agent("other", name="other")(lambda env, ctx: {"n": 1})

        @router.agent("bad", name="bad")
        def bad(env: object, ctx: object) -> dict[str, object]:
            raise ValueError("no")

        for n in range(30):
            intent = ("echo", "other", "bad")[n % 3]
            router.route_intent({"intent": {"name": intent}, "payload": {"n": n}})
    recorded.close()
    with FileExecutionStore(root) as store:
        store.invalidate(store.list()[3].execution_id, "wrong")
        start(store, "unfinished").close()
    # Every connection is closed: the catalog file holds every row (no -wal).
    assert not (root / "catalog.sqlite3-wal").exists()


def _answers(root: Path) -> tuple[object, ...]:
    with FileExecutionStore(root) as store:
        stats = store.stats()
        return (
            [s.to_json() for s in store.list()],
            [s.to_json() for s in store.list(ListFilters(intent="echo"))],
            [s.to_json() for s in store.list(ListFilters(status="failed"))],
            (stats.records, stats.by_status, stats.by_intent),
        )


@pytest.mark.slow
def test_a_flipped_bit_anywhere_in_the_catalog_is_found(tmp_path: Path) -> None:
    """At many offsets of a real catalog: the right answers, or a StoreError."""
    root = tmp_path / "records"
    _assorted_store(root)
    expected = _answers(root)
    catalog = root / "catalog.sqlite3"
    sound = catalog.read_bytes()
    # Every 173rd byte: every page, the header and the schema included.
    offsets = range(0, len(sound), 173)
    outcomes: dict[str, int] = {}
    for offset in offsets:
        for path in root.glob("catalog.sqlite3*"):
            path.unlink()
        damaged = bytearray(sound)
        damaged[offset] ^= 1 << (offset % 8)
        catalog.write_bytes(bytes(damaged))
        try:
            got: object = _answers(root)
        except StoreError as exc:
            got = str(exc)
        if isinstance(got, str):  # refused: cleanly, and saying how to mend it
            assert "reindex" in got, (offset, got)
            outcomes["refused"] = outcomes.get("refused", 0) + 1
            continue
        assert got == expected, f"a bit flipped at offset {offset}"
        outcomes["right"] = outcomes.get("right", 0) + 1
    assert outcomes.get("right", 0) > len(offsets) // 2, outcomes


def test_a_damaged_status_is_rebuilt_not_a_key_error(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`records list` over a catalog whose status text took a flipped bit."""
    from click.testing import CliRunner

    from intentusnet.cli import cli

    root = tmp_path / "records"
    _assorted_store(root)
    listing = ["--store", str(root), "records", "list", "--no-hits"]
    expected = CliRunner().invoke(cli, listing)
    assert expected.exit_code == 0
    catalog = root / "catalog.sqlite3"
    sound = catalog.read_bytes()
    # Each "completed" in the file: in rows of the table, its indexes, counts.
    found = [n for n in range(len(sound)) if sound.startswith(b"completed", n)]
    assert len(found) > 10
    for offset in found:
        for path in root.glob("catalog.sqlite3*"):
            path.unlink()
        damaged = bytearray(sound)
        damaged[offset + 3] ^= 0x04  # "completed" -> "comtleted"
        catalog.write_bytes(bytes(damaged))
        with caplog.at_level(logging.WARNING, logger="intentusnet.store"):
            got = CliRunner().invoke(cli, listing, catch_exceptions=False)
        assert got.exit_code == 0, got.output
        assert got.stdout == expected.stdout
    assert "the catalog is damaged: a row does not match its checksum" in caplog.text


def _catalog_state(root: Path) -> tuple[bytes, int, list[str]]:
    """The catalog file's bytes and mtime, and the store's top-level names."""
    catalog = root / "catalog.sqlite3"
    return (
        catalog.read_bytes(),
        catalog.stat().st_mtime_ns,
        sorted(p.name for p in root.iterdir()),
    )


def _reading_commands(root: Path) -> list[tuple[list[str], int]]:
    """Every reading command over the assorted store, with its exit code."""
    with FileExecutionStore(root) as store:
        listed = store.list()
    completed = next(s.execution_id for s in listed if s.status.value == "completed")
    failed = next(s.execution_id for s in listed if s.status.value == "failed")
    return [
        (["records", "list"], 0),
        (["records", "list", "--json", "--intent", "echo"], 0),
        (["records", "list", "--status", "incomplete"], 0),
        (["records", "show", completed], 0),
        (["inspect", completed], 0),
        (["replay", completed], 0),
        (["verify", completed], 0),
        (["verify", "--all"], 0),
        (["stats"], 0),
        (["stats", "--json"], 0),
        (["debug", failed], 0),
        (["diff", completed, failed], 0),
    ]


def test_reading_commands_never_write_the_catalog(tmp_path: Path) -> None:
    """Once it agrees with the files, no reading command writes the catalog."""
    from click.testing import CliRunner

    from intentusnet.cli import cli

    root = tmp_path / "records"
    _assorted_store(root)
    before = _catalog_state(root)
    for argv, code in _reading_commands(root):
        result = CliRunner().invoke(cli, ["--store", str(root), *argv])
        assert result.exit_code == code, (argv, result.output)
        assert _catalog_state(root) == before, argv
    with FileExecutionStore(root) as store:
        summary = store.list()[0]
        store.find_by_hash(summary.envelope_hash)
        store.stats()
        store.verify(summary.execution_id)
    assert _catalog_state(root) == before


def _unprivileged(where: Path) -> list[str] | None:
    """A command prefix running a process that file permissions bind.

    ``[]`` when this process is bound by them already; for root, a prefix that
    drops every capability (still uid 0, so the interpreter stays reachable),
    or runs as ``nobody``; ``None`` when neither can read ``where`` and be
    refused a write there.
    """
    if os.geteuid() != 0:
        return []
    import shutil

    setpriv = shutil.which("setpriv")
    candidates = []
    if setpriv is not None:
        candidates.append([setpriv, "--inh-caps=-all", "--bounding-set=-all"])
        candidates.append([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"])
    probe = where / "probe"
    probe.write_text("")
    probe.chmod(0o444)
    # Exit 0: it runs, reads the file, and may not write it.
    check = (
        f"import sys\nopen({str(probe)!r}).read()\n"
        f"try:\n    open({str(probe)!r}, 'a')\n"
        "except PermissionError:\n    sys.exit(0)\nsys.exit(4)\n"
    )
    try:
        for prefix in candidates:
            done = subprocess.run(
                [*prefix, sys.executable, "-c", check], capture_output=True
            )
            if done.returncode == 0:
                return prefix
    finally:
        probe.unlink()
    return None


def _make_read_only(root: Path, writable: bool = False) -> None:
    for path in [root, *root.rglob("*")]:
        if path.is_dir():
            path.chmod(0o755 if writable else 0o555)
        else:
            path.chmod(0o644 if writable else 0o444)


@pytest.fixture
def read_only_store(tmp_path: Path) -> Iterator[tuple[Path, list[str]]]:
    """The assorted store, made read-only, and how to run a process bound by it."""
    tmp_path.chmod(0o755)
    prefix = _unprivileged(tmp_path)
    if prefix is None:
        pytest.skip(
            "running as root, and neither dropping capabilities (setpriv) nor "
            "running as nobody works here: file permissions would not bind"
        )
    root = tmp_path / "records"
    _assorted_store(root)
    _make_read_only(root)
    yield root, prefix
    _make_read_only(root, writable=True)


def _cli(prefix: list[str], root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    checkout = str(Path(__file__).resolve().parents[3])
    return subprocess.run(
        [*prefix, sys.executable, "-m", "intentusnet.cli", "--store", str(root), *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": checkout, "NO_COLOR": "1"},
        cwd="/",
        timeout=60,
    )


def test_a_read_only_store_is_read_and_never_written(
    read_only_store: tuple[Path, list[str]],
) -> None:
    """Without write permission every reading command works; reindex says why not."""
    root, prefix = read_only_store
    with FileExecutionStore(root) as store:
        expected = [s.execution_id for s in store.list()]
    before = _catalog_state(root)
    for argv, code in _reading_commands(root):
        done = _cli(prefix, root, *argv)
        assert done.returncode == code, (argv, done.stderr)
        assert "unable to open database file" not in done.stderr, argv
        assert done.stderr.count("WARNING") == 0, (argv, done.stderr)
    listed = orjson.loads(_cli(prefix, root, "records", "list", "--json").stdout)
    assert [row["executionId"] for row in listed] == expected
    assert _catalog_state(root) == before
    refused = _cli(prefix, root, "reindex")
    assert refused.returncode == 1
    assert "may not write the store" in refused.stderr
    assert "unable to open database file" not in refused.stderr
    assert _catalog_state(root) == before


def test_a_read_only_store_without_a_usable_catalog_is_read_from_its_files(
    read_only_store: tuple[Path, list[str]],
) -> None:
    """A lost or damaged catalog that may not be rebuilt: answers from the files."""
    root, prefix = read_only_store
    with FileExecutionStore(root) as store:
        expected = [s.to_json() for s in store.list()]
    _make_read_only(root, writable=True)
    catalog = root / "catalog.sqlite3"
    damaged = bytearray(catalog.read_bytes())
    damaged[0] ^= 0x01  # no longer "SQLite format 3"
    for state in (bytes(damaged), None):  # damaged, then gone
        if state is None:
            catalog.unlink()
        else:
            catalog.write_bytes(state)
        _make_read_only(root)
        done = _cli(prefix, root, "records", "list", "--json")
        assert done.returncode == 0, done.stderr
        assert orjson.loads(done.stdout) == expected
        assert "answering from the record files" in done.stderr
        stats = _cli(prefix, root, "stats", "--json")
        assert stats.returncode == 0, stats.stderr
        assert orjson.loads(stats.stdout)["records"] == len(expected)
        _make_read_only(root, writable=True)


def test_a_read_only_reader_sees_what_a_writer_has_not_checkpointed(
    read_only_store: tuple[Path, list[str]],
) -> None:
    """Rows still in another process's write-ahead log are listed, never lost."""
    root, prefix = read_only_store
    if not prefix:
        pytest.skip("needs a writer allowed what the reader is not (run as root)")
    # A connection held open keeps the log from being checkpointed when the
    # writer closes (and the writer's log of opened records goes with it).
    catalog = root / "catalog.sqlite3"
    hold = sqlite3.connect(catalog)
    hold.execute("SELECT count(*) FROM meta").fetchone()
    writer = FileExecutionStore(root)  # this process may write anyway (root)
    try:
        new = finished(writer, "written while a reader reads")
        writer.close()  # its row is committed: in the catalog's -wal file
        assert Path(f"{catalog}-wal").stat().st_size > 0
        assert not list((root / "opened").glob("*.rows"))
        listed = _cli(prefix, root, "records", "list", "--json")
        assert listed.returncode == 0, listed.stderr
        assert new in [row["executionId"] for row in orjson.loads(listed.stdout)]
        # Its log unreadable to the reader: the answer comes from the files.
        for name in ("catalog.sqlite3-shm", "catalog.sqlite3-wal"):
            (root / name).chmod(0o000)
        prefix_nobody = prefix  # uid 0 without capabilities: mode 000 binds it
        again = _cli(prefix_nobody, root, "records", "list", "--json")
        assert again.returncode == 0, again.stderr
        assert new in [row["executionId"] for row in orjson.loads(again.stdout)]
    finally:
        for name in ("catalog.sqlite3-shm", "catalog.sqlite3-wal"):
            if (root / name).exists():
                (root / name).chmod(0o644)
        writer.close()
        hold.close()


_KILLED_REINDEX = """
import os, signal, sys
from intentusnet.store import FileExecutionStore

def killed(done):
    os.kill(os.getpid(), signal.SIGKILL)  # after the first rows were read

FileExecutionStore(sys.argv[1]).reindex(on_progress=killed)
"""


def test_reindex_killed_midway_leaves_the_catalog_as_it_was(
    store: FileExecutionStore, caplog: pytest.LogCaptureFixture
) -> None:
    """A reindex killed by SIGKILL midway leaves the catalog whole, and no scratch."""
    ids = {finished(store, f"r{n}") for n in range(40)}
    before = store.list()
    store.close()
    files = sorted(path.name for path in store.root.iterdir())
    killed = subprocess.run(
        [sys.executable, "-c", _KILLED_REINDEX, str(store.root)], check=False
    )
    assert killed.returncode == -9
    with caplog.at_level(logging.WARNING), FileExecutionStore(store.root) as again:
        assert again.list() == before
        assert {s.execution_id for s in before} == ids
        assert again.stats().records == 40
    assert "rebuilding" not in caplog.text  # still complete: not rebuilt
    assert sorted(path.name for path in store.root.iterdir()) == files


def test_reindex_keeps_what_other_writers_write_while_it_runs(
    store: FileExecutionStore,
) -> None:
    """Rows written during a reindex survive it: a new record, one completed since."""
    for n in range(30):
        finished(store, f"r{n}")
    live = start(store, "completed during the reindex")
    made: list[str] = []

    def meanwhile(done: int) -> None:
        if not made:
            with FileExecutionStore(store.root) as other:
                made.append(finished(other, "made during the reindex"))
            live.complete(response(live.execution_id))
            store._index.writes.flush()

    assert store.reindex(on_progress=meanwhile) >= 31
    with sqlite3.connect(_catalog(store)) as db:
        rows = dict(db.execute("SELECT id, status FROM records").fetchall())
    db.close()
    assert rows[made[0]] == rows[live.execution_id] == "completed"
    assert len(rows) == 32
    assert store.stats().by_status == {"completed": 32}
