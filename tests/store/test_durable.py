"""Idempotency keys, record holds and resume links in every store that keeps them."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from intentusnet import (
    FileExecutionStore,
    IdempotencyConflict,
    IntentRouter,
    InvalidIdempotencyKey,
    MemoryExecutionStore,
    PostgresExecutionStore,
    RecordNotFound,
    RecordStatus,
)
from intentusnet.store.durable import (
    CancelStore,
    DurableStore,
    KeyClaim,
    check_idempotency_key,
)

HASH = "sha256:" + "0" * 64


@pytest.fixture(params=["file", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DurableStore]:
    """Each store that keeps keys."""
    if request.param == "file":
        yield FileExecutionStore(tmp_path / "store")
    elif request.param == "memory":
        yield MemoryExecutionStore()
    else:
        with PostgresExecutionStore(request.getfixturevalue("pg_dsn")) as pg:
            yield pg


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "may not be empty"),
        ("x" * 256, "at most 255"),
        ("caf\u00e9", "character 3"),
        ("a\nb", "character 1"),
        ("tab\there", "character 3"),
        (7, "a string"),
    ],
)
def test_malformed_keys_are_refused(key: object, problem: str) -> None:
    """Empty, oversized, non-ASCII or control-character keys are refused by name."""
    with pytest.raises(InvalidIdempotencyKey, match=problem):
        check_idempotency_key(key)


def test_a_key_of_255_printable_characters_is_accepted() -> None:
    """Printable ASCII up to 255 characters, spaces included, is a key."""
    key = (" ~azAZ09-" * 30)[:255]
    assert check_idempotency_key(key) == key


def test_first_claim_is_made_and_held(store: DurableStore) -> None:
    """The first caller creates and holds the claim; a second gets it (file: held)."""
    first = store.claim_key("k", "sha256:a", "exec-1")
    second = store.claim_key("k", "sha256:b", "exec-2")
    assert (first.created, first.held, first.execution_id) == (True, True, "exec-1")
    # The file store lets every caller act: the record's exclusive creation
    # and its owner lock decide who runs (tests/routing/test_durable.py).
    held = isinstance(store, FileExecutionStore)
    assert (second.created, second.held) == (False, held)
    assert (second.execution_id, second.envelope_hash) == ("exec-1", "sha256:a")
    first.release()
    third = store.claim_key("k", "sha256:a", "exec-3")
    assert (third.held, third.execution_id) == (True, "exec-1")
    third.release()


def test_hold_of_a_record_being_written_is_refused(store: DurableStore) -> None:
    """A record whose writer is open cannot be held; once closed, one holder only."""
    writer = store.open({"intent": {"name": "x"}}, envelope_hash=HASH)
    execution_id = writer.execution_id
    assert store.hold_record(execution_id) is None
    writer.close()
    hold = store.hold_record(execution_id)
    assert hold is not None
    assert store.hold_record(execution_id) is None
    hold.link("exec-next")
    hold.release()
    assert store.resumed_by(execution_id) == "exec-next"
    assert store.resumed_by("exec-other") is None


def test_hold_of_a_missing_record_is_not_found(store: DurableStore) -> None:
    """Holding a record that does not exist raises RecordNotFound."""
    with pytest.raises(RecordNotFound):
        store.hold_record("exec-missing")


@pytest.mark.parametrize(
    "key",
    [
        "' OR 1=1; DROP TABLE intentusnet_keys; --",
        "%s %(key)s %%",
        "\\ \" ' ` $1 {}",
        "../../../etc/passwd",
        " " * 255,
        "~" * 255,
    ],
)
def test_hostile_keys_are_claimed_as_given(store: DurableStore, key: str) -> None:
    """Quotes, placeholders, paths and blanks are keys like any other, kept apart."""
    first = store.claim_key(key, "sha256:a", "exec-1")
    other = store.claim_key(key[:-1] + "x", "sha256:b", "exec-2")
    first.release()
    again = store.claim_key(key, "sha256:c", "exec-3")
    assert (first.created, other.created, again.created) == (True, True, False)
    assert (again.execution_id, again.envelope_hash) == ("exec-1", "sha256:a")
    other.release()
    again.release()


def test_a_key_reused_with_another_envelope_is_a_conflict(store: DurableStore) -> None:
    """The same key with another payload runs nothing and names both hashes."""
    router = IntentRouter(store=store)  # type: ignore[arg-type]
    ran: list[object] = []

    @router.agent("x")
    def x(env, ctx):  # type: ignore[no-untyped-def]
        ran.append(env.payload)
        return {}

    router.route_intent(
        {"intent": {"name": "x"}, "payload": {"a": 1}}, idempotency_key="k"
    )
    with pytest.raises(IdempotencyConflict) as caught:
        router.route_intent(
            {"intent": {"name": "x"}, "payload": {"a": 2}}, idempotency_key="k"
        )
    assert ran == [{"a": 1}]
    assert caught.value.recorded_hash != caught.value.given_hash


def test_interrupted_leaves_out_live_finished_and_resumed_records(
    store: DurableStore,
) -> None:
    """Recovery's scan: incomplete records only, and none resumed by a record."""

    live = store.open({"intent": {"name": "x"}}, envelope_hash=HASH)
    done = store.open({"intent": {"name": "x"}}, envelope_hash=HASH)
    done.complete({"status": "success", "payload": {}, "error": None, "metadata": {}})
    left = store.open({"intent": {"name": "x"}}, envelope_hash=HASH)
    left.close()
    resumed = store.open({"intent": {"name": "x"}}, envelope_hash=HASH)
    resumed.close()
    dead_resumer = store.open({"intent": {"name": "x"}}, envelope_hash=HASH)
    dead_resumer.close()
    hold = store.hold_record(resumed.execution_id)
    assert hold is not None
    resumer = store.open({"intent": {"name": "x"}}, envelope_hash=HASH)
    hold.link(resumer.execution_id)  # the resumer's record exists (still open)
    hold.release()
    hold = store.hold_record(dead_resumer.execution_id)
    assert hold is not None
    hold.link("exec-never-opened")  # its resumer died before opening it
    hold.release()
    later = datetime.now(UTC) + timedelta(seconds=1)

    found = store.interrupted("x", until=later, limit=10)

    assert [s.execution_id for s in found] == [
        dead_resumer.execution_id,
        left.execution_id,
    ]
    assert store.interrupted("x", until=later, limit=1) == found[:1]
    assert store.interrupted("y", until=later, limit=10) == []
    assert store.interrupted("x", until=later - timedelta(hours=1), limit=10) == []
    live.close()
    resumer.close()


HOLDER = textwrap.dedent(
    """
    import sys, time
    from intentusnet.store import PostgresExecutionStore

    store = PostgresExecutionStore(sys.argv[1])
    claim = store.claim_key("order-7", "sha256:a", "exec-killed")
    writer = store.open({"intent": {"name": "x"}}, envelope_hash="sha256:" + "0" * 64)
    print(claim.held, writer.execution_id, flush=True)
    time.sleep(120)  # until killed
    """
)


@pytest.mark.slow
def test_postgres_claim_and_record_of_a_killed_process_are_free_at_once(
    pg_dsn: str,
) -> None:
    """Another host sees the key and record held, then free once the process dies."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, pg_dsn], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    held, execution_id = proc.stdout.readline().split()
    with PostgresExecutionStore(pg_dsn) as other:
        assert held == "True"
        waiting = other.claim_key("order-7", "sha256:a", "exec-mine")
        assert (waiting.held, waiting.execution_id) == (False, "exec-killed")
        assert other.hold_record(execution_id) is None
        assert other.load(execution_id).header.status is RecordStatus.IN_PROGRESS

        proc.kill()
        proc.communicate(timeout=30)

        claim = _eventually(lambda: other.claim_key("order-7", "sha256:a", "exec-x"))
        assert (claim.created, claim.execution_id) == (False, "exec-killed")
        assert other.load(execution_id).header.status is RecordStatus.INCOMPLETE
        hold = other.hold_record(execution_id)
        assert hold is not None
        with PostgresExecutionStore(pg_dsn) as third:  # a second resumer elsewhere
            assert third.hold_record(execution_id) is None
            assert not third.claim_key("order-7", "sha256:a", "exec-y").held
        hold.release()
        claim.release()


def _eventually(claim: Callable[[], KeyClaim]) -> KeyClaim:
    """The first held claim within 10 s (the server ends a dead client's session)."""
    deadline = time.monotonic() + 10
    while True:
        found = claim()
        if found.held or time.monotonic() > deadline:
            assert found.held
            return found
        time.sleep(0.01)


KEY_FILE_HOLDER = textwrap.dedent(
    """
    import fcntl, os, sys, time
    from intentusnet.store import FileExecutionStore
    from intentusnet.store.file.durable import _key_path

    root, key, mode = sys.argv[1:]
    if mode == "claimed":
        claim = FileExecutionStore(root).claim_key(key, "sha256:a", "exec-killed")
        print(claim.created, flush=True)
    else:  # an earlier build's key file, created and locked, its claim not written
        directory, path = _key_path(root, key)
        os.makedirs(directory, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT)
        fcntl.flock(fd, fcntl.LOCK_EX)
        print(True, flush=True)
    time.sleep(120)  # until killed
    """
)


def test_file_claim_of_a_killed_claimer_names_its_execution(tmp_path: Path) -> None:
    """A claimer killed after claiming leaves its whole claim for the next caller."""
    root = tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-c", KEY_FILE_HOLDER, str(root), "order-7", "claimed"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "True"
    proc.kill()
    proc.communicate(timeout=30)
    with FileExecutionStore(root) as store:
        claim = store.claim_key("order-7", "sha256:a", "exec-next")
        assert (claim.created, claim.held) == (False, True)
        assert claim.execution_id == "exec-killed"
        assert store.find_by_idempotency_key("order-7") == "exec-killed"
        claim.release()


def test_file_claim_is_a_link_holding_the_whole_claim(tmp_path: Path) -> None:
    """A new key's file is a symbolic link whose text is the claim, format 1."""
    from intentusnet.store.file.durable import _key_path

    with FileExecutionStore(tmp_path / "store") as store:
        store.claim_key("order-1", HASH, "exec-1").release()
        path = _key_path(str(tmp_path / "store"), "order-1")[1]
        assert os.readlink(path) == f"1 exec-1 {HASH}"
        assert store.find_by_idempotency_key("order-1") == "exec-1"


CLAIMER = textwrap.dedent(
    """
    import os, sys, time
    from intentusnet.store import FileExecutionStore

    root, start, mine = sys.argv[1:]
    store = FileExecutionStore(root)
    while not os.path.exists(start):
        pass
    claim = store.claim_key("raced", "sha256:a", mine)
    print(claim.created, claim.execution_id, flush=True)
    """
)


def test_file_processes_racing_one_new_key_create_one_claim(tmp_path: Path) -> None:
    """Eight processes claiming one new key at once: one creates it, all read it."""
    root, start = tmp_path / "store", tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIMER, str(root), str(start), f"exec-{n}"],
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(8)
    ]
    time.sleep(1.0)  # all of them importing, then waiting for the start
    start.write_text("")
    answers = [proc.communicate(timeout=60)[0].split() for proc in procs]
    assert all(proc.returncode == 0 for proc in procs)
    assert sorted(created for created, _ in answers).count("True") == 1
    winner = next(mine for created, mine in answers if created == "True")
    assert {named for _, named in answers} == {winner}


def test_file_key_left_empty_by_a_killed_claimer_is_claimed_anew(
    tmp_path: Path,
) -> None:
    """An earlier build's key file whose claimer died unwritten is claimed again."""
    root = tmp_path / "store"
    proc = subprocess.Popen(
        [sys.executable, "-c", KEY_FILE_HOLDER, str(root), "order-8", "empty"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "True"
    proc.kill()
    proc.communicate(timeout=30)
    with FileExecutionStore(root) as store:
        claim = store.claim_key("order-8", "sha256:a", "exec-next")
        assert (claim.created, claim.held, claim.execution_id) == (
            True,
            True,
            "exec-next",
        )
        later = store.claim_key("order-8", "sha256:b", "exec-third")
        assert (later.created, later.execution_id) == (False, "exec-next")
        assert later.envelope_hash == "sha256:a"
        assert store.find_by_idempotency_key("order-8") == "exec-next"
        claim.release()


def test_a_key_is_looked_up_without_claiming_it(store: DurableStore) -> None:
    """find_by_idempotency_key names the claimed execution and claims nothing."""
    assert store.find_by_idempotency_key("order-9") is None
    assert store.find_by_idempotency_key("order-9") is None  # still not claimed
    claim = store.claim_key("order-9", "sha256:a", "exec-1")
    assert claim.created
    assert store.find_by_idempotency_key("order-9") == "exec-1"
    claim.release()
    with pytest.raises(InvalidIdempotencyKey, match="character 3"):
        store.find_by_idempotency_key("caf\u00e9")


def _keyed_router(store: DurableStore) -> tuple[IntentRouter, list[object]]:
    router = IntentRouter(store=store)  # type: ignore[arg-type]
    ran: list[object] = []

    @router.agent("x")
    def x(env, ctx):  # type: ignore[no-untyped-def]
        ran.append(env.payload)
        return {"n": len(ran)}

    return router, ran


def test_prune_deletes_the_key_with_its_record(store: DurableStore) -> None:
    """A pruned record takes its key and resume link: the key runs anew."""
    router, ran = _keyed_router(store)
    envelope = {"intent": {"name": "x"}, "payload": {"a": 1}}
    first = router.route_intent(envelope, idempotency_key="k-pruned")
    kept = router.route_intent(envelope, idempotency_key="k-kept")
    old_id = str(first.metadata.execution_id)
    left = store.open({"intent": {"name": "x"}}, envelope_hash=HASH)
    left.close()
    hold = store.hold_record(left.execution_id)
    assert hold is not None
    hold.link("exec-gone")
    hold.release()
    assert store.find_by_idempotency_key("k-pruned") == old_id

    store.delete(kept.metadata.execution_id)  # type: ignore[attr-defined]
    pruned = store.prune(timedelta(0))  # type: ignore[attr-defined]

    assert set(pruned) == {old_id, left.execution_id}
    assert store.find_by_idempotency_key("k-pruned") is None
    assert store.find_by_idempotency_key("k-kept") is None
    assert store.resumed_by(left.execution_id) is None
    again = router.route_intent(envelope, idempotency_key="k-pruned")
    assert again.metadata.execution_id != old_id
    assert not again.metadata.from_replay
    assert ran == [{"a": 1}, {"a": 1}, {"a": 1}]
    router.close()


def test_a_cancel_request_is_written_once_and_goes_with_its_record(
    store: DurableStore,
) -> None:
    """The first request is kept, a second gets it; delete takes it away."""
    assert isinstance(store, CancelStore)
    router = IntentRouter(store=store)  # type: ignore[arg-type]
    router.agent("echo", name="echo")(lambda env, ctx: env.payload)
    origin = str(
        router.route_intent(
            {"intent": {"name": "echo"}, "payload": {}}
        ).metadata.execution_id
    )
    first = {"by": "ann", "via": "cli", "atUtc": "2026-12-07T00:00:00Z"}

    assert store.cancel_requests([origin]) == {}
    assert store.request_cancel(origin, first) is None
    assert store.request_cancel(origin, {**first, "by": "bob"}) == first
    assert store.cancel_requests([origin, "exec-" + "0" * 32]) == {origin: first}

    store.delete(origin)  # type: ignore[attr-defined]
    assert store.cancel_requests([origin]) == {}
    router.close()


def test_decisions_are_counted_once_per_record_and_outlive_it(
    store: DurableStore,
) -> None:
    """Each action starts at 0; a record noted twice counts once; delete keeps it."""
    from intentusnet.store.durable import DECISION_ACTIONS, DecisionTally

    assert isinstance(store, DecisionTally)
    router = IntentRouter(store=store)  # type: ignore[arg-type]
    router.agent("echo", name="echo")(lambda env, ctx: env.payload)
    record = str(
        router.route_intent(
            {"intent": {"name": "echo"}, "payload": {}}
        ).metadata.execution_id
    )
    assert store.decision_counts() == dict.fromkeys(DECISION_ACTIONS, 0)

    store.note_decision("fork", record)
    store.note_decision("fork", record)
    store.note_decision("cancel", record)
    with pytest.raises(ValueError, match="not a decision"):
        store.note_decision("../resolve", record)

    assert store.decision_counts() == {"resolve": 0, "cancel": 1, "fork": 1}
    store.delete(record)  # type: ignore[attr-defined]
    assert store.decision_counts() == {"resolve": 0, "cancel": 1, "fork": 1}
    router.close()
