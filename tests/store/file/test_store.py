"""FileExecutionStore: layout, ids, durability, crashes and concurrent writers."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from hashlib import sha256
from pathlib import Path

import pytest
from recordkit import (
    attempt_end,
    disk_fills_mid_write,
    envelope,
    finished,
    record_file,
    response,
    start,
)

from intentusnet import ListFilters
from intentusnet.errors import (
    InvalidExecutionId,
    RecordExists,
    RecordIntegrityError,
    RecordNotFound,
    ReplayNotAllowed,
    StoreError,
)
from intentusnet.record.model import EventType, RecordStatus, ReplayableReason
from intentusnet.replay import ReplayEngine
from intentusnet.store import FileExecutionStore

HOSTILE_IDS = ["../x", "/etc/passwd", "", "a/b", ".hidden", "a\x00b", "x" * 129]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory, closed after the test."""
    with FileExecutionStore(tmp_path / "records") as opened:
        yield opened


def test_record_lives_at_shard_of_its_id_hash(store: FileExecutionStore) -> None:
    """A record is <root>/<2 hex of sha256(id)>/<id>.jsonl."""
    execution_id = finished(store)
    shard = sha256(execution_id.encode()).hexdigest()[:2]
    assert (store.root / shard / f"{execution_id}.jsonl").is_file()
    assert list(store.iter_ids()) == [execution_id]


def test_files_are_0600_and_directories_0700_whatever_the_umask(
    tmp_path: Path,
) -> None:
    """Records hold prompts and answers: only their owner may read them."""
    old = os.umask(0)
    try:
        with FileExecutionStore(tmp_path / "deep" / "records") as store:
            execution_id = finished(store)
            path = record_file(store, execution_id)
    finally:
        os.umask(old)

    def mode(p: Path) -> int:
        return stat.S_IMODE(p.stat().st_mode)

    assert mode(path) == 0o600
    assert mode(path.parent) == 0o700
    assert mode(store.root) == 0o700
    assert mode(store.root.parent) == 0o700
    catalog_files = list(store.root.glob("catalog.sqlite3*"))
    assert catalog_files
    assert {mode(p) for p in catalog_files} == {0o600}


@pytest.mark.parametrize("bad", HOSTILE_IDS)
def test_hostile_ids_are_refused_before_touching_the_disk(
    store: FileExecutionStore, bad: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ids that could name another path raise InvalidExecutionId, no file access."""

    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError(f"file system touched: {args}")

    for name in ("open", "stat", "lstat", "unlink", "mkdir", "scandir", "listdir"):
        monkeypatch.setattr(os, name, forbidden)
    calls = [
        lambda: store.open(envelope(), envelope_hash="sha256:0", execution_id=bad),
        lambda: store.load(bad),
        lambda: store.exists(bad),
        lambda: store.delete(bad),
        lambda: store.invalidate(bad, "x"),
        lambda: store.verify(bad),
        lambda: ReplayEngine.from_store(store, bad),
    ]
    for call in calls:
        with pytest.raises(InvalidExecutionId, match="invalid execution id"):
            call()
    monkeypatch.undo()
    assert not store.root.exists()


def test_allowed_user_ids_are_used_as_given(store: FileExecutionStore) -> None:
    """An id of letters, digits, '_', '.', '-' up to 128 characters is accepted."""
    for given in ("order-42", "a.b_c-D", "x" * 128):
        writer = start(store, execution_id=given)
        writer.complete(response(given))
        assert store.load(given).header.execution_id == given


def test_an_id_is_never_written_twice(store: FileExecutionStore) -> None:
    """Opening an existing id raises RecordExists and leaves the record as it was."""
    writer = start(store, execution_id="once")
    writer.complete(response("once"))
    before = record_file(store, "once").read_bytes()
    with pytest.raises(RecordExists, match="never rewritten"):
        store.open(envelope(), envelope_hash="sha256:0", execution_id="once")
    assert record_file(store, "once").read_bytes() == before


def test_missing_record_raises_record_not_found(store: FileExecutionStore) -> None:
    """Loading, verifying or deleting an unknown id raises RecordNotFound."""
    assert not store.exists("nobody")
    for call in (store.load, store.verify, store.delete):
        with pytest.raises(RecordNotFound, match="no record nobody"):
            call("nobody")


def test_each_event_is_on_disk_when_append_returns(store: FileExecutionStore) -> None:
    """With durability flush, another reader sees every appended line at once."""
    writer = start(store)
    path = record_file(store, writer.execution_id)
    for attempt in range(2, 5):
        writer.append(
            EventType.AGENT_ATTEMPT_START, {"agent": "echo", "attempt": attempt}
        )
        assert path.read_bytes().count(b"\n") == 3 + attempt
    writer.close()


def test_fsync_durability_syncs_record_and_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """fsync mode syncs the file and its directory on open, the file on complete."""
    synced: list[str] = []
    real = os.fsync

    def spy(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", spy)
    with FileExecutionStore(tmp_path / "records", durability="fsync") as store:
        writer = start(store)
        path = str(record_file(store, writer.execution_id))
        assert synced.count(path) == 1
        assert str(Path(path).parent) in synced
        writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"echo": 1}))
        assert synced.count(path) == 1
        writer.complete(response(writer.execution_id))
        assert synced.count(path) == 2


def test_unknown_durability_is_refused(tmp_path: Path) -> None:
    """A durability other than flush or fsync raises ValueError naming both."""
    with pytest.raises(ValueError, match="'flush' or 'fsync'"):
        FileExecutionStore(tmp_path, durability="sometimes")


def test_root_defaults_to_environment_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without a root, INTENTUSNET_STORE names the store directory."""
    monkeypatch.setenv("INTENTUSNET_STORE", str(tmp_path / "from-env"))
    assert FileExecutionStore().root == tmp_path / "from-env"
    monkeypatch.delenv("INTENTUSNET_STORE")
    assert FileExecutionStore().root == Path(".intentusnet/records")


@pytest.mark.parametrize(
    "url",
    ["postgresql://app:s3cret@db.internal/records", "POSTGRES://app:s3cret@db/x"],
)
def test_a_url_is_refused_pointing_at_open_store(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A URL root, given or from INTENTUSNET_STORE, is a ValueError, not a folder."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("INTENTUSNET_STORE", url)
    with pytest.raises(
        ValueError, match=r"^INTENTUSNET_STORE names a PostgreSQL"
    ) as env:
        FileExecutionStore()
    with pytest.raises(ValueError, match=r"^the root names a PostgreSQL") as given:
        FileExecutionStore(url)
    for message in (str(env.value), str(given.value)):
        assert "use intentusnet.open_store()" in message
        assert "app@db" in message
        assert "s3cret" not in message
    assert list(tmp_path.iterdir()) == []  # no directory named "postgresql:"


def test_writer_refuses_misuse_without_damaging_the_record(
    store: FileExecutionStore,
) -> None:
    """Bad data, a direct FINAL_RESPONSE, a write after complete: record stays whole."""
    writer = start(store)
    with pytest.raises(StoreError, match="not JSON"):
        writer.append(EventType.STEP_START, {"when": datetime.now})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="complete"):
        writer.append(EventType.FINAL_RESPONSE, {"response": {}})
    with pytest.raises(ValueError, match="NOT_A_TYPE"):
        writer.append("NOT_A_TYPE", {})
    writer.complete(response(writer.execution_id))
    with pytest.raises(StoreError, match="closed"):
        writer.append(EventType.STEP_START, {})
    writer.close()  # idempotent
    assert store.verify(writer.execution_id).valid
    assert store.load(writer.execution_id).header.status is RecordStatus.COMPLETED


def test_failed_write_is_undone_and_the_chain_continues(
    store: FileExecutionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write cut short (disk full) is rolled back; later appends still chain."""
    writer = start(store)
    disk_fills_mid_write(monkeypatch)
    with pytest.raises(StoreError, match="No space left"):
        writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"echo": 1}))
    monkeypatch.undo()
    writer.append(EventType.RECORDING_FAILURE, {"error": "disk was full"})
    writer.complete(response(writer.execution_id))
    record = store.load(writer.execution_id)
    assert store.verify(writer.execution_id).valid
    assert record.header.replayable_reason is ReplayableReason.RECORDING_FAILURE


def test_invalidate_appends_and_never_rewrites(store: FileExecutionStore) -> None:
    """Invalidation leaves every earlier byte as it was and adds one line."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    before = path.read_bytes()
    store.invalidate(execution_id, "answer went stale")
    after = path.read_bytes()
    assert after.startswith(before)
    assert after.count(b"\n") == before.count(b"\n") + 1
    assert store.verify(execution_id).valid


def test_invalidate_refuses_a_record_still_being_written(
    store: FileExecutionStore,
) -> None:
    """A live writer's record cannot be invalidated under its feet."""
    writer = start(store)
    with pytest.raises(StoreError, match="still being written"):
        store.invalidate(writer.execution_id, "too early")
    writer.close()
    store.invalidate(writer.execution_id, "now")
    assert store.load(writer.execution_id).events[-1].type is EventType.INVALIDATED


def test_invalidate_drops_a_torn_tail_first(store: FileExecutionStore) -> None:
    """After a crash mid-line, invalidation cuts the torn piece and keeps the chain."""
    writer = start(store)
    writer.close()
    path = record_file(store, writer.execution_id)
    path.write_bytes(path.read_bytes() + b'{"seq":4,"type":"AGENT_AT')
    store.invalidate(writer.execution_id, "crashed run")
    record = store.load(writer.execution_id)
    assert not record.torn_tail
    assert [e.type for e in record.events][-2:] == [
        EventType.AGENT_ATTEMPT_START,
        EventType.INVALIDATED,
    ]


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the records the file store checks in full, in order."""
    import intentusnet.store.file.store as file_module

    seen: list[str] = []
    parse = file_module.parse_record

    def counted(data: bytes, execution_id: str, owner_alive: object) -> object:
        seen.append(execution_id)
        return parse(data, execution_id, owner_alive)  # type: ignore[arg-type]

    monkeypatch.setattr(file_module, "parse_record", counted)
    return seen


def test_a_record_loaded_again_from_the_same_bytes_is_not_checked_again(
    store: FileExecutionStore, checks: list[str]
) -> None:
    """From its third load on, an unchanged finished record is parsed, not checked."""
    execution_id = finished(store)
    first = store.load(execution_id)
    store.load(execution_id)  # the second load keeps what the checks found
    assert checks == [execution_id, execution_id]
    again = store.load(execution_id)
    assert checks == [execution_id, execution_id]
    assert again == first
    assert again is not first
    assert again.final_response is not first.final_response
    store.invalidate(execution_id, "answer went stale")
    third = store.load(execution_id)
    assert checks == [execution_id] * 3
    assert third.header.replayable_reason is ReplayableReason.MANUALLY_INVALIDATED


def test_a_byte_edited_in_place_after_a_load_is_caught_on_the_next(
    store: FileExecutionStore,
) -> None:
    """The same size, the same inode, one byte changed: the next load refuses it."""
    execution_id = finished(store)
    store.load(execution_id)
    path = record_file(store, execution_id)
    data = path.read_bytes()
    at = data.index(b'"agent":"') + len(b'"agent":"')
    with path.open("r+b") as f:  # in place: no new inode, no new size
        f.seek(at)
        f.write(b"X")
    with pytest.raises(RecordIntegrityError, match="hash mismatch"):
        store.load(execution_id)


def test_records_kept_for_loading_again_are_bounded(
    store: FileExecutionStore, checks: list[str]
) -> None:
    """After many other records are kept, the first is checked afresh."""
    from intentusnet.store.file.loaded import LOADED_MAX

    ids = [finished(store) for _ in range(LOADED_MAX + 1)]
    for execution_id in ids:
        store.load(execution_id)
        store.load(execution_id)
    assert len(checks) == 2 * len(ids)
    store.load(ids[-1])
    assert len(checks) == 2 * len(ids)
    store.load(ids[0])
    assert checks[-1] == ids[0]
    assert len(checks) == 2 * len(ids) + 1


def test_a_large_record_is_not_kept_for_loading_again(
    store: FileExecutionStore, checks: list[str]
) -> None:
    """A record of megabytes is checked on every load: memory stays bounded."""
    from intentusnet.store.file.loaded import LOADED_MAX_BYTES

    execution_id = finished(store, "x" * (LOADED_MAX_BYTES // 4))
    first = store.load(execution_id)
    store.load(execution_id)
    assert store.load(execution_id) == first
    assert checks == [execution_id] * 3


def test_delete_removes_file_and_catalog_row(store: FileExecutionStore) -> None:
    """A deleted record is gone from the disk, the listing and hash lookups."""
    execution_id = finished(store)
    env_hash = store.load(execution_id).header.envelope_hash
    store.delete(execution_id)
    assert not store.exists(execution_id)
    assert store.list() == []
    assert store.find_by_hash(env_hash) is None
    with pytest.raises(RecordNotFound):
        store.delete(execution_id)


def test_prune_deletes_old_finished_records_and_keeps_live_ones(
    store: FileExecutionStore,
) -> None:
    """prune() removes records older than the cut-off, never one being written."""
    done = [finished(store, f"n{n}") for n in range(3)]
    live = start(store)
    assert store.prune(timedelta(days=1)) == []
    planned = store.prune(timedelta(0), dry_run=True)
    assert sorted(planned) == sorted(done)
    assert all(store.exists(i) for i in done)
    assert sorted(store.prune(timedelta(0))) == sorted(done)
    assert list(store.iter_ids()) == [live.execution_id]
    live.close()


def test_list_filters_and_orders_newest_first(store: FileExecutionStore) -> None:
    """list() filters by intent, status and time, newest first, up to a limit."""
    first = finished(store, "a")
    failed = finished(store, "b", status="error")
    open_writer = start(store, "c")
    assert [s.execution_id for s in store.list()] == [
        open_writer.execution_id,
        failed,
        first,
    ]

    def ids(**filters: object) -> list[str]:
        return [s.execution_id for s in store.list(ListFilters(**filters))]  # type: ignore[arg-type]

    assert ids(status="failed") == [failed]
    assert ids(status="in_progress") == [open_writer.execution_id]
    assert ids(status="incomplete") == []
    assert len(ids(limit=2)) == 2
    assert ids(intent="other") == []
    assert ids(since=datetime.now(UTC) + timedelta(seconds=5)) == []
    assert len(ids(since=datetime.now(UTC) - timedelta(minutes=5))) == 3
    open_writer.close()
    assert ids(status="incomplete") == [open_writer.execution_id]
    with pytest.raises(ValueError, match="'completed', 'failed'"):
        store.list(ListFilters(status="done"))


def test_find_by_hash_returns_newest_replayable_match(
    store: FileExecutionStore,
) -> None:
    """The newest replayable record with the hash is found, loaded and verified."""
    old, new = finished(store, "same"), finished(store, "same")
    env_hash = store.load(old).header.envelope_hash
    found = store.find_by_hash(env_hash)
    assert found is not None
    assert found.execution_id == new
    store.invalidate(new, "bad answer")
    found = store.find_by_hash(env_hash)
    assert found is not None
    assert found.execution_id == old
    newest_any = store.find_by_hash(env_hash, replayable_only=False)
    assert newest_any is not None
    assert newest_any.execution_id == new
    assert store.find_by_hash("sha256:" + "0" * 64) is None


def test_find_by_hash_skips_a_record_damaged_since_indexing(
    store: FileExecutionStore,
) -> None:
    """A tampered newest match is passed over, never returned."""
    old, new = finished(store, "same"), finished(store, "same")
    path = record_file(store, new)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    found = store.find_by_hash(store.load(old).header.envelope_hash)
    assert found is not None
    assert found.execution_id == old


def test_stats_counts_by_status_and_intent(store: FileExecutionStore) -> None:
    """stats() counts records per status and intent and sums their bytes."""
    finished(store)
    finished(store, status="error")
    start(store).close()
    stats = store.stats()
    assert stats.records == 3
    assert stats.by_status == {"completed": 1, "failed": 1, "incomplete": 1}
    assert stats.by_intent == {"echo": 3}
    assert stats.bytes_on_disk > sum(
        record_file(store, i).stat().st_size for i in store.iter_ids()
    )


def test_verify_finds_whole_lines_cut_from_the_end(store: FileExecutionStore) -> None:
    """Removing the final line is caught by comparing with the catalog."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:-1]))
    assert store.load(execution_id).header.status is RecordStatus.INCOMPLETE
    report = store.verify(execution_id)
    assert not report.valid
    assert "cut from its end" in report.failures[-1]


CHILD = textwrap.dedent(
    """
    import json, sys, time
    from intentusnet.hashing import compute_hash
    from intentusnet.record.model import EventType
    from intentusnet.store import FileExecutionStore
    sys.path.insert(0, sys.argv[2])
    from recordkit import attempt_end, finished, start

    store = FileExecutionStore(sys.argv[1])
    done = finished(store, "answered before the crash")  # its catalog row is queued
    writer = start(store)  # INTENT_RECEIVED, ROUTER_DECISION, AGENT_ATTEMPT_START
    writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"draft": "half done"}))
    writer.append(EventType.FALLBACK_TRIGGERED, {"from": "echo", "to": "b"})
    writer.append(EventType.AGENT_ATTEMPT_START, {"agent": "b", "attempt": 1})
    record = store.load(writer.execution_id)
    print(json.dumps([done, writer.execution_id, record.header.chain_head]), flush=True)
    time.sleep(120)  # inside the second agent, until killed
    """
)


def test_sigkill_mid_record_leaves_an_incomplete_record_losing_nothing(
    store: FileExecutionStore,
) -> None:
    """A writer killed with SIGKILL leaves every appended event; replay refuses it."""
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            CHILD,
            str(store.root),
            str(Path(__file__).parents[2]),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        done, execution_id, chain_head = json.loads(child.stdout.readline())
        assert store.load(execution_id).header.status is RecordStatus.IN_PROGRESS
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
        if child.stdout is not None:
            child.stdout.close()
    record = store.load(execution_id)
    assert record.header.status is RecordStatus.INCOMPLETE
    assert record.header.chain_head == chain_head
    assert len(record.events) == 6
    assert store.verify(execution_id).valid
    # its queued row was lost: a status filter finds it all the same
    assert [
        s.execution_id for s in store.list(ListFilters(status="completed", limit=1))
    ] == [done]
    assert [(s.execution_id, s.status) for s in store.list()] == [
        (execution_id, RecordStatus.INCOMPLETE),
        (done, RecordStatus.COMPLETED),  # its queued row was lost; the file knows
    ]
    assert store.find_by_hash(store.load(done).header.envelope_hash) is not None
    engine = ReplayEngine(record)
    with pytest.raises(ReplayNotAllowed, match="execution_incomplete"):
        engine.replay()
    forced = engine.replay(force=True)
    assert forced.partial
    assert forced.forced
    assert forced.payload == {"draft": "half done"}
    assert any("never finished" in w for w in forced.warnings)


WRITER = textwrap.dedent(
    """
    import sys
    from intentusnet.store import FileExecutionStore
    sys.path.insert(0, sys.argv[2])
    from recordkit import finished

    with FileExecutionStore(sys.argv[1]) as store:
        for n in range(int(sys.argv[3])):
            finished(store, f"{sys.argv[4]}-{n}")
    """
)


def test_four_processes_writing_at_once_lose_and_corrupt_nothing(
    tmp_path: Path,
) -> None:
    """4 processes x 250 records into one new store: 1000 sound records, 1000 rows."""
    root = tmp_path / "shared"
    tests = str(Path(__file__).parents[2])
    children = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, str(root), tests, "250", f"p{p}"]
        )
        for p in range(4)
    ]
    assert [child.wait() for child in children] == [0, 0, 0, 0]
    with FileExecutionStore(root) as store:
        ids = list(store.iter_ids())
        assert len(ids) == 1000
        for execution_id in ids:
            assert store.load(execution_id).header.status is RecordStatus.COMPLETED
        assert store.stats().records == 1000
        assert len(store.list()) == 1000
    with sqlite3.connect(root / "catalog.sqlite3") as db:
        assert db.execute("SELECT count(*) FROM records").fetchone() == (1000,)
    db.close()
    leftovers = {
        p.name for p in root.rglob("*") if p.is_file() and not p.name.endswith(".jsonl")
    }
    assert leftovers <= {
        "catalog.sqlite3",
        "catalog.sqlite3-wal",
        "catalog.sqlite3-shm",
    }


def test_appends_from_many_threads_keep_one_chain(store: FileExecutionStore) -> None:
    """Events appended from several threads at once form one unbroken chain."""
    writer = start(store)

    def append_many(thread: int) -> None:
        for n in range(50):
            writer.append(EventType.STEP_START, {"thread": thread, "n": n})

    threads = [threading.Thread(target=append_many, args=(t,)) for t in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    writer.complete(response(writer.execution_id))
    record = store.load(writer.execution_id)
    assert len(record.events) == 3 + 8 * 50 + 1
    assert store.verify(writer.execution_id).valid


def test_reading_a_record_needs_no_catalog(tmp_path: Path) -> None:
    """load() and close() import no sqlite3 and make no catalog."""
    root = tmp_path / "records"
    with FileExecutionStore(root) as writing:
        execution_id = finished(writing)
    for catalog in root.glob("catalog.sqlite3*"):
        catalog.unlink()
    probe = textwrap.dedent(
        f"""
        import sys
        from intentusnet.store import FileExecutionStore
        store = FileExecutionStore({str(root)!r})
        assert store.load({execution_id!r}).execution_id == {execution_id!r}
        store.close()
        lazy = ("sqlite3", "intentusnet.store.file.index", "intentusnet.store.hits")
        loaded = [name for name in lazy if name in sys.modules]
        assert not loaded, loaded
        """
    )
    subprocess.run([sys.executable, "-c", probe], check=True, cwd=Path.cwd())
    assert not list(root.glob("catalog.sqlite3*"))


def test_threads_using_a_new_store_at_once_share_one_catalog(tmp_path: Path) -> None:
    """The catalog made on first use is one object, whichever thread came first."""
    store = FileExecutionStore(tmp_path / "records")
    barrier = threading.Barrier(8)
    seen: list[object] = []

    def first_use() -> None:
        barrier.wait()
        seen.append(store._index)

    threads = [threading.Thread(target=first_use) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(seen) == 8
    assert all(index is store._index for index in seen)
    execution_id = finished(store)
    assert [s.execution_id for s in store.list()] == [execution_id]
    store.close()


def test_raw_is_the_file_byte_for_byte(store: FileExecutionStore) -> None:
    """raw(id) returns the record file's bytes; an unknown id is RecordNotFound."""
    execution_id = finished(store)
    assert store.raw(execution_id) == record_file(store, execution_id).read_bytes()
    with pytest.raises(RecordNotFound):
        store.raw("exec-missing")
    with pytest.raises(InvalidExecutionId):
        store.raw("../x")


def test_import_raw_keeps_bytes_and_lists_the_record(
    store: FileExecutionStore, tmp_path: Path
) -> None:
    """Imported bytes are kept as they are, listed, verified and replayed alike."""
    done = finished(store, "kept")
    unfinished = start(store)
    unfinished.close()
    with FileExecutionStore(tmp_path / "other") as other:
        for execution_id in (done, unfinished.execution_id):
            other.import_raw(execution_id, store.raw(execution_id) + b'{"torn')
            assert other.raw(execution_id) == store.raw(execution_id)
            assert other.verify(execution_id).valid
        assert other.load(done) == store.load(done)
        statuses = {s.execution_id: s.status for s in other.list()}
        assert statuses == {
            done: RecordStatus.COMPLETED,
            unfinished.execution_id: RecordStatus.INCOMPLETE,
        }
        with pytest.raises(RecordExists):
            other.import_raw(done, store.raw(done))


def test_import_raw_refuses_damaged_bytes_and_writes_nothing(
    store: FileExecutionStore, tmp_path: Path
) -> None:
    """A changed byte is a RecordIntegrityError, and no file is created."""
    execution_id = finished(store)
    data = bytearray(store.raw(execution_id))
    data[data.index(b"\n") + 20] ^= 0x01
    with FileExecutionStore(tmp_path / "other") as other:
        with pytest.raises(RecordIntegrityError):
            other.import_raw(execution_id, bytes(data))
        assert not other.exists(execution_id)
        with pytest.raises(RecordIntegrityError):
            other.import_raw("exec-other-id", store.raw(execution_id))
