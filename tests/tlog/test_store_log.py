"""The file store appends each record it closes to its log, off the caller's thread."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import pytest
from recordkit import finished, start

from intentusnet.errors import LogError
from intentusnet.record.keys import SigningKey
from intentusnet.store import FileExecutionStore
from intentusnet.store.file.translog import log_folder, record_states, store_log
from intentusnet.tlog.audit import audit_log, log_origin
from intentusnet.tlog.cadence import LogCadence
from intentusnet.tlog.checkpoint import LogCheckpoint
from intentusnet.tlog.index import INDEX_NAME, LeafIndex
from intentusnet.tlog.leaf import LogLeaf
from intentusnet.tlog.sequencer import append_leaves

ROOT = Path(__file__).resolve().parents[2]
#: A cadence that never publishes by itself: only closing the store does.
NEVER = LogCadence(seconds=3600, leaves=10**6)


@pytest.fixture
def key() -> SigningKey:
    """The store's signing key."""
    return SigningKey.generate()


def leaves_of(root: Path, key: SigningKey) -> list[LogLeaf]:
    """The leaves of the store's log of ``key``, in order."""
    return [LogLeaf.from_bytes(leaf) for leaf in store_log(root, key.key_id).leaves()]


def wait_for_size(root: Path, key: SigningKey, size: int, limit: float = 10.0) -> float:
    """Seconds until the store's log holds ``size`` leaves (fail after ``limit``)."""
    started = time.monotonic()
    while store_log(root, key.key_id).size < size:
        assert time.monotonic() - started < limit, f"log not at {size} leaves"
        time.sleep(0.01)
    return time.monotonic() - started


def findings(root: Path, key: SigningKey) -> list[tuple[str, str | None]]:
    """The audit's findings on the store: (name, execution id)."""
    audit = audit_log(
        store_log(root, key.key_id),
        key.public_key,
        records=record_states(os.fspath(root), key.public_key),
        grace=0,
    )
    return [(f.name, f.execution_id) for f in audit.findings]


def test_closed_records_are_leaves_in_close_order(tmp_path: Path, key) -> None:
    """Each record closed (completed, failed, closed unfinished): a leaf, in order."""
    store = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    first = finished(store)
    failed = finished(store, status="error")
    unfinished = start(store)
    unfinished.close()
    third = finished(store)
    store.close()
    ids = [first, failed, unfinished.execution_id, third]
    heads = [store.load(i).header.chain_head for i in ids]
    assert leaves_of(tmp_path, key) == [
        LogLeaf(i, h, key.key_id) for i, h in zip(ids, heads, strict=True)
    ]
    note = store_log(tmp_path, key.key_id).checkpoint_note()
    assert note is not None
    assert LogCheckpoint.open(note, log_origin(key.key_id), key.public_key).size == 4
    assert findings(tmp_path, key) == []


def test_nothing_is_appended_before_the_cadence_says(tmp_path: Path, key) -> None:
    """A close only queues its leaf: the log stays empty until the store is closed."""
    store = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    time.sleep(0.05)  # a file's time lags the clock by up to a tick
    for _ in range(3):
        finished(store)
    time.sleep(0.3)  # room for a wrongly eager thread to append
    assert store_log(tmp_path, key.key_id).size == 0
    store.close()
    assert store_log(tmp_path, key.key_id).size == 3


def test_a_batch_is_published_at_m_leaves(tmp_path: Path, key) -> None:
    """With leaves=5 and an hour's wait, 5 closes publish a checkpoint of 5."""
    store = FileExecutionStore(
        tmp_path, signing_key=key, log_cadence=LogCadence(seconds=3600, leaves=5)
    )
    time.sleep(0.05)  # a file's time lags the clock by up to a tick
    for _ in range(4):
        finished(store)
    time.sleep(0.3)
    assert store_log(tmp_path, key.key_id).size == 0
    finished(store)
    wait_for_size(tmp_path, key, 5)
    store.close()


def test_a_leaf_is_published_after_n_seconds(tmp_path: Path, key) -> None:
    """With seconds=0.2, one close is published without closing the store."""
    store = FileExecutionStore(
        tmp_path, signing_key=key, log_cadence=LogCadence(seconds=0.2, leaves=10**6)
    )
    execution_id = finished(store)
    waited = wait_for_size(tmp_path, key, 1)
    assert waited >= 0.1
    assert leaves_of(tmp_path, key)[0].execution_id == execution_id
    store.close()


@pytest.mark.parametrize("cadence", ["no key", "turned off"])
def test_no_log_without_a_key_or_when_turned_off(
    tmp_path: Path, key, cadence: str
) -> None:
    """Without a signing key (or with log_cadence=None) no log folder is made."""
    if cadence == "no key":
        store = FileExecutionStore(tmp_path)
    else:
        store = FileExecutionStore(tmp_path, signing_key=key, log_cadence=None)
    finished(store)
    store.close()
    assert not (tmp_path / "log").exists()


def test_invalidating_appends_the_new_chain_head(tmp_path: Path, key) -> None:
    """An invalidated record gets a second leaf, at its new head; the audit holds."""
    store = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    execution_id = finished(store)
    before = store.load(execution_id).header.chain_head
    store.invalidate(execution_id, "wrong answer")
    store.close()
    after = store.load(execution_id).header.chain_head
    assert [leaf.chain_head for leaf in leaves_of(tmp_path, key)] == [before, after]
    assert findings(tmp_path, key) == []


def test_a_record_is_never_a_leaf_twice(tmp_path: Path, key) -> None:
    """The same leaves appended again, or twice in one batch, add nothing."""
    log = store_log(tmp_path, key.key_id, key)
    index = LeafIndex(log)
    leaves = [
        LogLeaf(f"exec-{i}", "sha256:" + f"{i:064x}", key.key_id) for i in range(5)
    ]
    assert append_leaves(log, index, leaves + leaves[:2]) == 5
    assert append_leaves(log, index, leaves[3:]) == 5
    (
        log_folder(tmp_path, key.key_id) / INDEX_NAME
    ).unlink()  # a deleted index is rebuilt
    assert append_leaves(log, LeafIndex(log), leaves) == 5
    other = LogLeaf("exec-1", "sha256:" + "e" * 64, key.key_id)  # a new head
    assert append_leaves(log, LeafIndex(log), [other]) == 6


def test_two_stores_on_one_root_append_each_leaf_once(tmp_path: Path, key) -> None:
    """Two store objects (two sequencers) on one folder: one leaf per close."""
    one = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    two = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    ids = [finished(one), finished(two), finished(one)]
    two.close()
    one.close()
    assert sorted(leaf.execution_id for leaf in leaves_of(tmp_path, key)) == sorted(ids)
    assert findings(tmp_path, key) == []


CHILD = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[3])
    from recordkit import finished, start
    from intentusnet.record.keys import SigningKey
    from intentusnet.store import FileExecutionStore
    from intentusnet.tlog.cadence import LogCadence

    store = FileExecutionStore(
        sys.argv[1],
        signing_key=SigningKey.load(sys.argv[2]),
        log_cadence=LogCadence(seconds=3600, leaves=10**6),
    )
    ids = [finished(store) for _ in range(3)]
    writer = start(store)  # open when the process is killed
    print(" ".join([*ids, writer.execution_id]), flush=True)
    sys.stdin.read()
    """
)


def test_leaves_queued_by_a_killed_process_are_appended_by_the_next(
    tmp_path: Path, key
) -> None:
    """Killed with 3 leaves queued and a record open: the next sequencer appends 4."""
    root = tmp_path / "store"
    private, _public = key.save(tmp_path / "keys")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root), str(private), str(ROOT / "tests")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert child.stdout is not None
    killed = child.stdout.readline().decode().split()
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    assert child.stdin is not None
    child.stdin.close()
    assert len(killed) == 4
    assert not (log_folder(root, key.key_id) / "checkpoint").exists()
    store = FileExecutionStore(root, signing_key=key, log_cadence=NEVER)
    later = finished(store)
    store.close()
    assert sorted(leaf.execution_id for leaf in leaves_of(root, key)) == sorted(
        [*killed, later]
    )
    assert findings(root, key) == []


def test_a_failed_append_loses_no_leaf(tmp_path: Path, key) -> None:
    """A log that cannot be written loses no leaf: the next scan appends them.

    The log cannot be written: closing the store does not raise, the records are not in
    the log; once it can, the next store's scan appends them all.
    """
    log_folder(tmp_path, key.key_id).mkdir(parents=True)
    blocker = log_folder(tmp_path, key.key_id) / ".tmp"
    blocker.write_bytes(b"")  # a file where a folder must be
    store = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    ids = [finished(store) for _ in range(3)]
    store.close()
    assert store_log(tmp_path, key.key_id).size == 0
    blocker.unlink()
    again = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    later = finished(again)
    again.close()
    assert [leaf.execution_id for leaf in leaves_of(tmp_path, key)] == [*ids, later]
    assert findings(tmp_path, key) == []


def test_the_background_thread_retries_a_failed_append(
    tmp_path: Path, key, caplog: pytest.LogCaptureFixture
) -> None:
    """A batch that fails in the background thread stays queued, then retried.

    A batch that fails in the thread stays queued (a warning says why), and is appended
    once it can be.
    """
    log_folder(tmp_path, key.key_id).mkdir(parents=True)
    blocker = log_folder(tmp_path, key.key_id) / ".tmp"
    blocker.write_bytes(b"")
    store = FileExecutionStore(
        tmp_path, signing_key=key, log_cadence=LogCadence(seconds=0.05, leaves=10**6)
    )
    execution_id = finished(store)
    time.sleep(0.5)  # the thread has tried, and failed
    assert store_log(tmp_path, key.key_id).size == 0
    assert "appending to the log" in caplog.text
    blocker.unlink()
    wait_for_size(tmp_path, key, 1, limit=15.0)  # the next try, 5 s after the failure
    assert leaves_of(tmp_path, key)[0].execution_id == execution_id
    store.close()


WRITER = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, sys.argv[3])
    from recordkit import finished
    from intentusnet.record.keys import SigningKey
    from intentusnet.store import FileExecutionStore
    from intentusnet.tlog.cadence import LogCadence

    store = FileExecutionStore(
        sys.argv[1],
        signing_key=SigningKey.load(sys.argv[2]),
        log_cadence=LogCadence(seconds=0.02, leaves=8),
    )
    print(" ".join(finished(store) for _ in range(60)), flush=True)
    store.close()
    """
)


def test_two_processes_appending_at_once_log_each_record_once(
    tmp_path: Path, key
) -> None:
    """Two processes appending to one log log each record exactly once.

    Two processes closing records into one store, each appending small batches at the
    same time: every record one leaf, the tiles agree, no finding.
    """
    root = tmp_path / "store"
    private, _public = key.save(tmp_path / "keys")
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                WRITER,
                str(root),
                str(private),
                str(ROOT / "tests"),
            ],
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for _ in range(2)
    ]
    ids: list[str] = []
    for child in children:
        out, _ = child.communicate(timeout=120)
        assert child.returncode == 0
        ids.extend(out.decode().split())
    assert len(ids) == 120
    assert sorted(leaf.execution_id for leaf in leaves_of(root, key)) == sorted(ids)
    assert findings(root, key) == []


def test_a_rotated_key_starts_a_log_of_its_own(tmp_path: Path, key) -> None:
    """A rotated key starts a log of its own; each log's audit holds.

    After a key rotation, the new key's records go to a new log; the old log keeps its
    records; each log's audit holds (no record of the other key hidden).
    """
    store = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    old = finished(store)
    store.close()
    new_key = SigningKey.generate()
    rotated = FileExecutionStore(tmp_path, signing_key=new_key, log_cadence=NEVER)
    new = finished(rotated)
    rotated.close()
    assert [leaf.execution_id for leaf in leaves_of(tmp_path, key)] == [old]
    assert [leaf.execution_id for leaf in leaves_of(tmp_path, new_key)] == [new]
    assert findings(tmp_path, key) == []
    assert findings(tmp_path, new_key) == []


def test_a_deletion_by_the_store_is_logged_and_not_reported(
    tmp_path: Path, key
) -> None:
    """delete() and prune() log a deletion leaf first: log verify reports nothing.

    A record removed by hand (no deletion leaf) is still `deleted`; a store without
    a log deletes without one.
    """
    root = tmp_path / "signed"
    store = FileExecutionStore(root, signing_key=key, log_cadence=NEVER)
    ids = [finished(store, f"r {i}") for i in range(5)]
    head = store.load(ids[0]).header.chain_head
    store.delete(ids[0])
    tail = leaves_of(root, key)[-1]  # in the log before the file went
    assert tail == LogLeaf(ids[0], head, key.key_id, deleted=True)
    assert findings(root, key) == []
    assert sorted(store.prune(timedelta(0))) == sorted(ids[1:])
    deletions = [leaf for leaf in leaves_of(root, key) if leaf.deleted]
    assert sorted(leaf.execution_id for leaf in deletions) == sorted(ids)
    assert findings(root, key) == []
    by_hand = finished(store, "by hand")
    store.close()
    next(root.glob(f"*/{by_hand}.jsonl")).unlink()
    assert findings(root, key) == [("deleted", by_hand)]
    plain = FileExecutionStore(tmp_path / "plain")
    plain.delete(finished(plain))
    plain.close()
    assert not (tmp_path / "plain" / "log").exists()


def test_a_deletion_the_log_cannot_hold_deletes_nothing(tmp_path: Path, key) -> None:
    """The log cannot be written: delete() raises LogError, the record stays, unlogged.

    Once it can, the record's close is logged and no deletion leaf of it is.
    """
    store = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    kept = finished(store)
    store.close()
    blocker = log_folder(tmp_path, key.key_id) / ".tmp"
    shutil.rmtree(blocker, ignore_errors=True)
    blocker.write_bytes(b"")  # a file where a folder must be
    store = FileExecutionStore(tmp_path, signing_key=key, log_cadence=NEVER)
    with pytest.raises(LogError):
        store.delete(kept)
    assert store.exists(kept)
    blocker.unlink()
    store.close()
    assert [leaf.deleted for leaf in leaves_of(tmp_path, key)] == [False]
    assert findings(tmp_path, key) == []
