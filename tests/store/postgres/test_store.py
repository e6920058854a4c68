"""PostgresExecutionStore against a real server: processes, kills, lost connections.

The store contract shared with the file and memory stores is in test_memory.py;
these are what only a database shared by many processes can show.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
import time
import tracemalloc
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest
from pgkit import PASSWORD
from recordkit import attempt_end, change_answer, envelope, finished, reseal, start

from intentusnet import AgentDefinition, IntentRouter, ListFilters
from intentusnet.errors import InvalidExecutionId, RecordExists, StoreError
from intentusnet.hashing import compute_hash
from intentusnet.record.model import EventType, RecordStatus, ReplayableReason
from intentusnet.replay import ReplayEngine
from intentusnet.store import (
    FileExecutionStore,
    MemoryExecutionStore,
    PostgresExecutionStore,
)
from intentusnet.store.hits import Hit
from intentusnet.store.postgres.catalog import REINDEX_BATCH

TESTS = str(Path(__file__).parents[2])
ROOT = str(Path(__file__).parents[3])

WRITER = textwrap.dedent(
    """
    import sys, time
    sys.path[:0] = [sys.argv[3], sys.argv[4]]
    from recordkit import attempt_end, start
    from intentusnet.store import PostgresExecutionStore

    store = PostgresExecutionStore(sys.argv[1])
    writer = start(store, execution_id=sys.argv[2])
    writer.append("AGENT_ATTEMPT_END", attempt_end({"echo": "before the kill"}))
    print("ready", flush=True)
    time.sleep(120)  # until killed
    """
)

MANY = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[3], sys.argv[4]]
    from recordkit import finished
    from intentusnet.store import PostgresExecutionStore

    with PostgresExecutionStore(sys.argv[1]) as store:
        for _ in range(int(sys.argv[2])):
            finished(store, "shared")
    """
)


ROUTER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[3]]
    from intentusnet import AgentDefinition, IntentRouter
    from intentusnet.store import PostgresExecutionStore

    store = PostgresExecutionStore(sys.argv[1])
    router = IntentRouter(store=store)
    router.register(
        AgentDefinition(name="echo", intents=["echo"]),
        lambda env, ctx: {"echo": env.payload["n"]},
    )
    for n in range(int(sys.argv[2])):
        answer = router.route_intent(
            {"intent": {"name": "echo"}, "payload": {"n": f"{sys.argv[4]}-{n}"}}
        )
        assert answer.status == "success", answer
        assert answer.metadata.recording_error is None, answer.metadata
    router.close()
    store.close()
    """
)

READER = textwrap.dedent(
    """
    import sys
    sys.path[:0] = [sys.argv[2]]
    from intentusnet import ListFilters
    from intentusnet.record.model import RecordStatus
    from intentusnet.replay import ReplayEngine
    from intentusnet.store import ListFilters, PostgresExecutionStore

    replayed = 0
    with PostgresExecutionStore(sys.argv[1]) as store:
        print("ready", flush=True)
        while sys.stdin.readline() == "more\\n":
            for row in store.list(ListFilters(limit=20)):
                if row.status is RecordStatus.COMPLETED:
                    result = ReplayEngine(store.load(row.execution_id)).replay()
                    assert result.payload is not None, row
                    replayed += 1
            print(replayed, flush=True)
    """
)


def _eventually(check: Callable[[], bool], seconds: float = 10) -> bool:
    """Ask ``check`` until it holds or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _drop_other_sessions(dsn: str) -> int:
    """Terminate every other session on the database (as a DBA or a failover would)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchall()
    return len(rows)


def test_a_sigkilled_writer_leaves_an_incomplete_record_that_force_replays(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """A SIGKILLed writer: in progress, then incomplete at once; force-replayable."""
    with subprocess.Popen(
        [sys.executable, "-c", WRITER, pg_dsn, "killed", TESTS, ROOT],
        stdout=subprocess.PIPE,
        text=True,
    ) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline() == "ready\n"
            (row,) = pg_store.list()
            assert (row.execution_id, row.status) == (
                "killed",
                RecordStatus.IN_PROGRESS,
            )
        finally:
            child.kill()
            child.wait(timeout=30)
    assert _eventually(lambda: pg_store.list()[0].status is RecordStatus.INCOMPLETE)
    record = pg_store.load("killed")
    assert record.header.status is RecordStatus.INCOMPLETE
    result = ReplayEngine(record).replay(force=True)
    assert result.partial
    assert result.payload == {"echo": "before the kill"}
    assert pg_store.verify("killed").valid


def test_records_written_by_several_processes_are_all_listed(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """Two processes writing at once: every record listed, the newest found by hash."""
    children = [
        subprocess.Popen([sys.executable, "-c", MANY, pg_dsn, "40", TESTS, ROOT])
        for _ in range(2)
    ]
    assert [child.wait(timeout=120) for child in children] == [0, 0]
    rows = pg_store.list()
    assert len(rows) == 80
    assert {row.status for row in rows} == {RecordStatus.COMPLETED}
    assert pg_store.stats().records == 80
    found = pg_store.find_by_hash(rows[0].envelope_hash)
    assert found is not None
    assert found.execution_id == rows[0].execution_id  # newest first, any process
    assert all(pg_store.verify(row.execution_id).valid for row in rows[::10])


@pytest.mark.slow
def test_four_routers_and_a_reader_share_one_database(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """4 processes x 250 routed intents while a 5th lists and replays: 1000 sound."""
    started = time.monotonic()
    with subprocess.Popen(
        [sys.executable, "-c", READER, pg_dsn, ROOT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    ) as reader:
        assert reader.stdin is not None
        assert reader.stdout is not None
        assert reader.stdout.readline() == "ready\n"
        routers = [
            subprocess.Popen(
                [sys.executable, "-c", ROUTER, pg_dsn, "250", ROOT, f"p{number}"]
            )
            for number in range(4)
        ]
        rounds = replayed = 0
        try:
            while any(child.poll() is None for child in routers) or rounds < 3:
                assert time.monotonic() - started < 120, "bounded in time"
                reader.stdin.write("more\n")
                reader.stdin.flush()
                replayed = int(reader.stdout.readline())
                rounds += 1
        finally:
            for child in routers:
                if child.poll() is None:
                    child.kill()
            reader.stdin.close()
        assert [child.wait(timeout=30) for child in routers] == [0] * 4
        assert reader.wait(timeout=30) == 0
    assert replayed > 0
    rows = pg_store.list()
    assert len(rows) == 1000
    assert {row.status for row in rows} == {RecordStatus.COMPLETED}
    assert all(pg_store.verify(row.execution_id).valid for row in rows)
    payloads = {
        pg_store.load(row.execution_id).envelope["payload"]["n"]  # type: ignore[index,call-overload]
        for row in rows
    }
    assert payloads == {f"p{p}-{n}" for p in range(4) for n in range(250)}


def test_a_lost_connection_is_a_store_error_naming_the_host(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """pg_terminate_backend mid-record: StoreError names the host, not the password."""
    writer = start(pg_store, execution_id="cut")
    assert _drop_other_sessions(pg_dsn) >= 1
    with pytest.raises(StoreError) as caught:
        writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"x": 1}))
    assert "127.0.0.1" in str(caught.value)
    assert PASSWORD not in str(caught.value)
    writer.close()
    # The store connects again; the record's lock went with the old session.
    assert pg_store.load("cut").header.status is RecordStatus.INCOMPLETE


def test_the_router_reports_a_connection_killed_mid_execution(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """An agent whose record's connection is killed: the response has recordingError."""
    router = IntentRouter(store=pg_store)

    def agent(env: object, ctx: object) -> dict[str, object]:
        _drop_other_sessions(pg_dsn)
        return {"ok": True}

    router.register(AgentDefinition(name="a", intents=["work"]), agent)
    answer = router.route_intent({"intent": {"name": "work"}, "payload": {}})
    router.close()
    assert answer.status == "success"
    error = answer.metadata.recording_error
    assert error is not None
    assert "127.0.0.1" in error
    assert PASSWORD not in error
    execution_id = answer.metadata.execution_id
    assert execution_id is not None
    record = pg_store.load(execution_id)
    assert record.header.status is RecordStatus.INCOMPLETE


def _advisory_locks(dsn: str) -> int:
    """How many advisory locks the sessions on the database hold now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' "
            "AND database = (SELECT oid FROM pg_database "
            "WHERE datname = current_database())"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_a_routed_intent_is_three_statements_and_leaves_no_lock(
    pg_store: PostgresExecutionStore, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Open, the agent's start, the outcome: three statements; the lock then freed."""
    router = IntentRouter(store=pg_store)
    router.register(
        AgentDefinition(name="echo", intents=["echo"]), lambda env, ctx: {"ok": 1}
    )
    router.route_intent({"intent": {"name": "echo"}, "payload": {"n": -1}})
    sent: list[str] = []
    execute = psycopg.Connection.execute

    def counted(conn: psycopg.Connection, query: str, *args: object, **kw: object):  # type: ignore[no-untyped-def]
        sent.append(query)
        return execute(conn, query, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(psycopg.Connection, "execute", counted)
    answers = [
        router.route_intent({"intent": {"name": "echo"}, "payload": {"n": n}})
        for n in range(5)
    ]
    monkeypatch.undo()
    router.close()
    assert [answer.status for answer in answers] == ["success"] * 5
    assert len(sent) == 3 * 5
    assert _advisory_locks(pg_dsn) == 0
    for answer in answers:
        execution_id = answer.metadata.execution_id
        assert execution_id is not None
        assert pg_store.load(execution_id).header.status is RecordStatus.COMPLETED
        assert pg_store.verify(execution_id).valid


def test_a_record_stays_locked_until_its_completion_commits(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """Mid-commit of the completing statement, others still read it in progress."""
    writer = start(pg_store, execution_id="slow")
    writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"x": 1}))
    other = PostgresExecutionStore(pg_dsn)
    assert other.list()[0].status is RecordStatus.IN_PROGRESS  # connected now
    with other, psycopg.connect(pg_dsn, autocommit=True) as conn:
        # Stalls the completing statement after its own work, before its commit.
        conn.execute(
            "CREATE FUNCTION stall() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
            "IF NEW.status <> 'in_progress' THEN PERFORM pg_sleep(1); END IF; "
            "RETURN NEW; END $$"
        )
        conn.execute(
            "CREATE TRIGGER stall AFTER UPDATE ON intentusnet_records "
            "FOR EACH ROW EXECUTE FUNCTION stall()"
        )

        def stalled() -> bool:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event = 'PgSleep'"
            ).fetchone()
            return row is not None and row[0] == 1

        completing = threading.Thread(
            target=writer.complete,
            args=({"status": "success", "payload": None, "metadata": {}},),
        )
        completing.start()
        try:
            assert _eventually(stalled)
            assert _advisory_locks(pg_dsn) == 1
            (row,) = other.list()
            assert row.status is RecordStatus.IN_PROGRESS
            assert stalled()  # all of it seen before the commit
        finally:
            completing.join(timeout=30)
    assert _advisory_locks(pg_dsn) == 0
    assert pg_store.load("slow").header.status is RecordStatus.COMPLETED


def test_an_id_another_session_writes_or_wrote_cannot_be_opened(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """Held elsewhere, then completed: RecordExists both times, no lock left behind."""
    writer = start(pg_store, execution_id="taken")
    with PostgresExecutionStore(pg_dsn) as other:
        with pytest.raises(RecordExists):
            start(other, execution_id="taken")  # its lock is held by the writer
        assert other.list()[0].status is RecordStatus.IN_PROGRESS
        writer.append(EventType.AGENT_ATTEMPT_END, attempt_end({"x": 1}))
        writer.complete({"status": "success", "payload": None, "metadata": {}})
        assert _advisory_locks(pg_dsn) == 0
        with pytest.raises(RecordExists):
            start(other, execution_id="taken")  # its row exists
        assert _advisory_locks(pg_dsn) == 0
        other.invalidate("taken", "stale")  # no session holds it
    assert pg_store.load("taken").header.replayable_reason is (
        ReplayableReason.MANUALLY_INVALIDATED
    )


def test_a_file_record_copied_byte_for_byte_verifies_and_replays_alike(
    pg_store: PostgresExecutionStore, tmp_path: Path
) -> None:
    """File store bytes imported into PostgreSQL read back identical, replay alike."""
    with FileExecutionStore(tmp_path) as files:
        done = finished(files, "copied")
        files.invalidate(finished(files, "old"), "stale")
        for execution_id in files.iter_ids():
            data = next(files.root.glob(f"*/{execution_id}.jsonl")).read_bytes()
            pg_store.import_raw(execution_id, data)
            assert pg_store.raw(execution_id) == data
            assert pg_store.verify(execution_id) == files.verify(execution_id)
            assert pg_store.load(execution_id) == files.load(execution_id)
        original = ReplayEngine(files.load(done)).replay()
    copied = ReplayEngine(pg_store.load(done)).replay()
    assert (copied.payload, copied.status) == (original.payload, original.status)
    assert copied.original_execution_id == done
    with pytest.raises(RecordExists):
        pg_store.import_raw(done, pg_store.raw(done))


HOSTILE = [
    "../x",
    "/etc/passwd",
    "",
    "a\x00b",
    ".hidden",
    "x" * 129,
    "a'; DROP TABLE intentusnet_records; --",
]


@pytest.mark.parametrize("bad", HOSTILE)
def test_hostile_ids_are_refused_before_any_query(
    pg_store: PostgresExecutionStore, bad: str
) -> None:
    """Every method taking an id refuses a hostile one; the tables stay whole."""
    finished(pg_store)
    calls: list[Callable[[], object]] = [
        lambda: start(pg_store, execution_id=bad),
        lambda: pg_store.load(bad),
        lambda: pg_store.exists(bad),
        lambda: pg_store.verify(bad),
        lambda: pg_store.delete(bad),
        lambda: pg_store.invalidate(bad, "x"),
        lambda: pg_store.change_probe(bad),
        lambda: pg_store.import_raw(bad, b""),
    ]
    for call in calls:
        with pytest.raises(InvalidExecutionId):
            call()
    assert len(pg_store.list()) == 1


def test_hostile_envelope_text_is_stored_as_data(
    pg_store: PostgresExecutionStore,
) -> None:
    """SQL in an intent name and payload is data: stored, listed and hashed verbatim."""
    name = "x'); DELETE FROM intentusnet_lines; --"
    wire = envelope("'; DROP TABLE intentusnet_records; --")
    wire["intent"] = {"name": name, "version": "1.0"}
    writer = pg_store.open(wire, envelope_hash=compute_hash(wire))
    writer.complete({"status": "success", "payload": None, "metadata": {}})
    (row,) = pg_store.list(ListFilters(intent=name))
    assert row.intent_name == name
    assert pg_store.load(row.execution_id).envelope == wire


def test_reindex_rebuilds_the_catalog_from_the_lines(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """Catalog columns changed behind the store's back are rebuilt; edits are found."""
    good, edited = finished(pg_store, "good"), finished(pg_store, "edited")
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE intentusnet_records SET status = 'failed', intent = 'wrong'"
        )
        conn.execute(
            "UPDATE intentusnet_lines SET line = overlay(line placing 'X' from 30) "
            "WHERE execution_id = %s AND seq = 2",
            [edited],
        )
    assert pg_store.reindex() == 2
    rows = {row.execution_id: row for row in pg_store.list()}
    assert rows[good].status is RecordStatus.COMPLETED
    assert rows[good].intent_name == "echo"
    assert rows[edited].replayable_reason is ReplayableReason.INTEGRITY_FAILURE
    report = pg_store.verify(edited)
    assert not report.valid
    assert report.failures[0].startswith("line 3:")
    assert pg_store.find_by_hash(rows[good].envelope_hash) is not None


def rewrite_lines(dsn: str, execution_id: str, data: bytes) -> None:
    """Replace a record's stored lines with ``data``, behind the store's back."""
    lines = data.splitlines(keepends=True)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM intentusnet_lines WHERE execution_id = %s", [execution_id]
        )
        for seq, line in enumerate(lines):
            conn.execute(
                "INSERT INTO intentusnet_lines (execution_id, seq, line) "
                "VALUES (%s, %s, %s)",
                [execution_id, seq, line],
            )


def test_reindex_reports_a_record_edited_and_rehashed(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """Lines edited and re-hashed in the database are named by reindex, not accepted."""
    good, edited = finished(pg_store, "good"), finished(pg_store, "edited")
    rewrite_lines(pg_dsn, edited, reseal(pg_store.raw(edited), change_answer("forged")))
    changed: list[tuple[str, str]] = []
    assert pg_store.reindex(on_changed=lambda *found: changed.append(found)) == 2
    assert changed == [(edited, "line 6: its hash is not the one the catalog recorded")]
    rows = {row.execution_id: row for row in pg_store.list()}
    assert rows[good].replayable
    assert rows[edited].replayable_reason is ReplayableReason.INTEGRITY_FAILURE
    assert not pg_store.verify(edited).valid
    again: list[tuple[str, str]] = []
    pg_store.reindex(on_changed=lambda *found: again.append(found))
    assert again == changed


def test_records_are_signed_by_the_same_code_as_files(
    pg_dsn: str, tmp_path: Path
) -> None:
    """Signed in PostgreSQL, checked anywhere: forged lines fail the signature."""
    from intentusnet.record.keys import SigningKey
    from intentusnet.record.signing import KeyRing, SignatureStatus

    key = SigningKey.generate()
    ring = KeyRing([key.public_key])
    with PostgresExecutionStore(pg_dsn, signing_key=key) as store:
        done, withdrawn = finished(store, "kept"), finished(store, "withdrawn")
        store.invalidate(withdrawn, "stale")
        unfinished = start(store)
        unfinished.close()
        for execution_id in (done, withdrawn, unfinished.execution_id):
            record = store.load(execution_id)
            assert record.header.key_id == key.key_id
            assert record.events[-1].type is EventType.SIGNATURE
            assert ring.check(record).status is SignatureStatus.SIGNED_VALID
            assert ring.check_report(store.verify(execution_id)).accepted
        with FileExecutionStore(tmp_path / "copy") as files:
            files.import_raw(done, store.raw(done))
            assert ring.check(files.load(done)).status is SignatureStatus.SIGNED_VALID
        rewrite_lines(pg_dsn, done, reseal(store.raw(done), change_answer("forged")))
        forged = store.load(done)
        assert forged.final_response["payload"] == {"echo": "forged"}
        assert ring.check(forged).status is SignatureStatus.SIGNED_INVALID


@pytest.mark.slow
def test_reindex_streams_a_large_store_in_batches(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """3000 records are rebuilt a batch at a time, in memory that does not grow.

    Progress is reported after each batch.
    """
    memory = MemoryExecutionStore()
    for number in range(3000):
        execution_id = finished(memory, f"text {number}")
        pg_store.import_raw(execution_id, memory.raw(execution_id))
    progress: list[int] = []
    # warm: first-use imports and caches are not the batch
    pg_store.reindex(on_progress=progress.append)
    assert progress == list(range(REINDEX_BATCH, 3001, REINDEX_BATCH))
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE intentusnet_records SET intent = 'wrong', lines = 0")
        ((total,),) = conn.execute("SELECT sum(size)::bigint FROM intentusnet_records")
    answered: list[int] = []
    run = pg_store._db.run

    def counted(*args: object, **kwargs: object) -> list[tuple[object, ...]]:
        rows = run(*args, **kwargs)  # type: ignore[arg-type]
        answered.append(len(rows))
        return rows

    pg_store._db.run = counted  # type: ignore[method-assign]
    tracemalloc.start()
    try:
        assert pg_store.reindex() == 3000
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        pg_store._db.run = run  # type: ignore[method-assign]
    lines_per_record = 6
    assert max(answered) <= REINDEX_BATCH * lines_per_record
    assert len(answered) == 2 * (3000 // REINDEX_BATCH) + 1
    assert peak < total * 0.75  # about one batch's worth, not the store's
    rows = pg_store.list()
    assert {row.intent_name for row in rows} == {"echo"}
    assert all(pg_store.verify(row.execution_id).valid for row in rows[::300])


def test_lines_cut_from_a_record_end_fail_verification(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """A deleted last line leaves a sound chain, but the catalog row catches it."""
    execution_id = finished(pg_store)
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "DELETE FROM intentusnet_lines WHERE execution_id = %s AND seq = "
            "(SELECT max(seq) FROM intentusnet_lines WHERE execution_id = %s)",
            [execution_id, execution_id],
        )
    report = pg_store.verify(execution_id)
    assert not report.valid
    assert "cut from its end" in report.failures[-1]


def test_find_by_hash_passes_over_a_newest_record_that_fails_to_verify(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """An edited newest record is skipped for the next one; none left is None."""
    older = finished(pg_store, "same")
    time.sleep(0.002)
    newer = finished(pg_store, "same")
    envelope_hash = pg_store.load(newer).header.envelope_hash
    assert pg_store.find_by_hash(envelope_hash).execution_id == newer  # type: ignore[union-attr]
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        for execution_id in (newer, older):
            conn.execute(
                "UPDATE intentusnet_lines SET line = convert_to(replace("
                "convert_from(line, 'UTF8'), 'same', 'SAME'), 'UTF8') "
                "WHERE execution_id = %s AND seq = 0",
                [execution_id],
            )
            found = pg_store.find_by_hash(envelope_hash)
            assert found is None if execution_id == older else found is not None
            if found is not None:
                assert found.execution_id == older
    assert pg_store.find_by_hash("sha256:" + "0" * 64) is None


def test_a_newer_schema_is_refused(pg_dsn: str) -> None:
    """Tables of a newer schema version are not written by an older release."""
    with PostgresExecutionStore(pg_dsn) as store:
        assert store.list() == []
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("UPDATE intentusnet_schema SET version = 99")
    with (
        PostgresExecutionStore(pg_dsn) as store,
        pytest.raises(StoreError, match="schema version 99"),
    ):
        store.list()


@pytest.mark.parametrize(("durability", "setting"), [("flush", "off"), ("fsync", "on")])
def test_durability_sets_synchronous_commit(
    pg_dsn: str, durability: str, setting: str
) -> None:
    """Each durability commits with its documented synchronous_commit."""
    with PostgresExecutionStore(pg_dsn, durability=durability) as store:  # type: ignore[arg-type]
        finished(store)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            shown = conn.execute(
                "SELECT setting FROM pg_settings WHERE name = 'synchronous_commit'"
            ).fetchone()
        assert shown == ("on",)  # the server default, untouched
        assert store._db.run("SHOW synchronous_commit") == [(setting,)]


def test_an_unknown_durability_is_refused() -> None:
    """durability is flush or fsync; anything else says so at construction."""
    with pytest.raises(ValueError, match="'flush' or 'fsync'"):
        PostgresExecutionStore("postgresql://x/y", durability="always")  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [0, -1, 2.5, True, "4"])
def test_a_bad_pool_size_is_refused(size: object) -> None:
    """pool_size is an int of at least 1; anything else says so at construction."""
    with pytest.raises(ValueError, match="pool_size must be an int >= 1"):
        PostgresExecutionStore("postgresql://x/y", pool_size=size)  # type: ignore[arg-type]


def test_reads_run_in_parallel_on_a_bounded_pool(pg_dsn: str) -> None:
    """16 threads reading while one writes: all answered, never over pool_size + 1."""
    peak, done = 0, threading.Event()

    def watch() -> None:  # the store's sessions, seen from one more connection
        nonlocal peak
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            while not done.is_set():
                row = conn.execute(
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = "
                    "current_database() AND pid <> pg_backend_pid()"
                ).fetchone()
                peak = max(peak, int(row[0]) if row else 0)
                time.sleep(0.002)

    with PostgresExecutionStore(pg_dsn, pool_size=3) as store:
        ids = [finished(store, f"r{n}") for n in range(20)]

        def read(n: int) -> str:
            record = store.load(ids[n % len(ids)])
            assert store.find_by_hash(record.header.envelope_hash) is not None
            return record.execution_id

        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            with ThreadPoolExecutor(16) as pool:
                writes = pool.submit(lambda: [finished(store, "w") for _ in range(20)])
                assert sorted(pool.map(read, range(160))) == sorted(ids * 8)
                assert len(writes.result(timeout=60)) == 20
        finally:
            done.set()
            watcher.join(timeout=60)
        assert 1 < peak <= 4  # the session and at most 3 pooled readers
        assert len(store.list()) == 40


def test_reads_outlive_pooled_connections_the_server_ended(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """A DBA ends every session: the next read works (writes see the lost lock)."""
    execution_id = finished(pg_store, "before")
    assert [row.execution_id for row in pg_store.list()] == [execution_id]
    assert _drop_other_sessions(pg_dsn) >= 2  # the session and the pool's reader
    assert [row.execution_id for row in pg_store.list()] == [execution_id]
    assert pg_store.load(execution_id).execution_id == execution_id


def test_an_unreachable_server_names_the_host_not_the_password() -> None:
    """A refused connection is a StoreError with host and port, without the password."""
    store = PostgresExecutionStore(
        f"postgresql://u:{PASSWORD}@127.0.0.1:1/db?connect_timeout=3"
    )
    with pytest.raises(StoreError, match=r"127\.0\.0\.1:1/db") as caught:
        store.list()
    assert PASSWORD not in str(caught.value)


def test_cache_hits_are_rows_read_back_newest_first(
    pg_store: PostgresExecutionStore, pg_dsn: str
) -> None:
    """The cache-hit journal keeps sealed lines; an edited one is left out."""
    first = pg_store.record_cache_hit(Hit("s1", "h", "a"))
    second = pg_store.record_cache_hit(Hit("s2", "h", "b"))
    assert [hit.hit_id for hit in pg_store.cache_hits()] == [second, first]
    assert [hit.hit_id for hit in pg_store.cache_hits(intent="a")] == [first]
    assert pg_store.cache_hit_count() == 2
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(
            "UPDATE intentusnet_cache_hits SET line = overlay(line placing 'Z' "
            "from 40) WHERE hit_id = %s",
            [first],
        )
    assert [hit.hit_id for hit in pg_store.cache_hits()] == [second]


def test_psycopg_is_imported_only_by_the_postgres_store() -> None:
    """import intentusnet and the file store leave psycopg unimported."""
    code = (
        "import sys, intentusnet\n"
        "from intentusnet.store import FileExecutionStore, MemoryExecutionStore\n"
        "intentusnet.IntentRouter\n"
        "assert 'psycopg' not in sys.modules, 'imported'\n"
        "intentusnet.PostgresExecutionStore\n"
        "assert 'psycopg' in sys.modules\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
