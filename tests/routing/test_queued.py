"""Queued executions: an asynchronous submit the queue cannot start at once.

It is recorded ``queued`` and listed, and any router declaring the queue on
the store starts it when its turn comes, in priority order; a router killed
while running it leaves it to another. In one process on each store, and with
real processes (tests/routing/queuekit.py) on one file store and through
``intentusnet serve --workers 2``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from intentusnet import (
    EventType,
    FileExecutionStore,
    IntentRouter,
    ListFilters,
    MemoryExecutionStore,
    PostgresExecutionStore,
    RecordStatus,
    ResumeRefused,
)
from intentusnet.routing import durable
from intentusnet.routing.durable import chain_head
from intentusnet.routing.queued import ExecutionQueued
from intentusnet.routing.seams import ExecutionOptions

sys.path.insert(0, str(Path(__file__).parent))
import queuekit  # the application the processes run, importable beside this file
from test_queues import peaks


@pytest.fixture(params=["file", "memory", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """Each store that keeps queued executions."""
    if request.param == "file":
        with FileExecutionStore(tmp_path / "records") as opened:
            yield opened
    elif request.param == "memory":
        yield MemoryExecutionStore()
    else:
        with PostgresExecutionStore(request.getfixturevalue("pg_dsn")) as opened:
            yield opened


def _submit(router: IntentRouter, n: int, priority: int = 0) -> tuple[str, bool]:
    """Submit asynchronously: (execution id, whether it was queued)."""
    opened: list[str] = []
    envelope = {
        "intent": {"name": "work"},
        "payload": {"n": n},
        "context": {"priority": priority},
    }
    queued: list[str] = []
    try:
        router.route_intent(envelope, options=ExecutionOptions(opened=opened.append))
    except ExecutionQueued as raised:
        queued.append(raised.execution_id)
    return opened[0], queued == opened


def _finished(router: IntentRouter, execution_id: str) -> str:
    """Wait (bounded) until the execution's chain ends; its newest record's id."""
    store = router.store
    assert store is not None
    deadline = time.monotonic() + 30
    while True:
        head = chain_head(router, execution_id)
        if head != execution_id and store.load(head).header.status in (
            RecordStatus.COMPLETED,
            RecordStatus.FAILED,
        ):
            return head
        assert time.monotonic() < deadline, f"{execution_id} did not finish"
        time.sleep(0.01)


def test_a_submit_is_queued_and_started_in_priority_order(store: object) -> None:
    """Queued: recorded so and listed; started as a resume when its turn comes."""
    go = threading.Event()
    started: list[object] = []
    with IntentRouter(store=store) as router:  # type: ignore[arg-type]
        router.queue("llm", concurrency=1, priority=True)

        @router.agent("work", queue="llm")
        def work(envelope, ctx):  # type: ignore[no-untyped-def]
            started.append(envelope.payload["n"])
            if envelope.payload["n"] == 0:
                go.wait(10)
            return {"n": envelope.payload["n"]}

        first, queued = _submit(router, 0)
        assert queued
        deadline = time.monotonic() + 10
        while started != [0]:  # this router's starter started it
            assert time.monotonic() < deadline
            time.sleep(0.002)
        submitted = [_submit(router, n, priority) for n, priority in [(1, 5), (2, 1)]]
        assert [q for _, q in submitted] == [True, True]
        ids = [i for i, _ in submitted]
        for execution_id, priority in zip(ids, (5, 1), strict=True):
            record = router.store.load(execution_id)
            assert record.header.status is RecordStatus.QUEUED
            [event] = [e for e in record.events if e.type is EventType.EXECUTION_QUEUED]
            assert event.data == {"queue": "llm", "priority": priority, "tenant": None}
        listed = router.store.list(ListFilters(status="queued"))
        assert {s.execution_id for s in listed} == {first, *ids}
        assert router.store.queued_executions("llm", 10) == [ids[1], ids[0]]
        go.set()
        heads = [_finished(router, i) for i in (first, *ids)]
        assert started == [0, 2, 1]  # then by priority, lower first
        for execution_id, head, n in zip((first, *ids), heads, (0, 1, 2), strict=True):
            assert router.store.resumed_by(execution_id) == head  # started as a resume
            assert router.store.load(head).final_response["payload"] == {"n": n}
        deadline = time.monotonic() + 10
        while router.store.queued_executions("llm", 10):  # entries go once ended
            assert time.monotonic() < deadline
            time.sleep(0.01)


def test_a_resume_given_the_hold_runs_under_it_and_keeps_it(store: object) -> None:
    """resume(held=): the caller's hold is used, not taken again, and stays held."""
    with IntentRouter(store=store) as router:  # type: ignore[arg-type]
        router.queue("llm", concurrency=1, run_queued=False)

        @router.agent("work", queue="llm")
        def work(envelope, ctx):  # type: ignore[no-untyped-def]
            return {"n": envelope.payload["n"]}

        first, queued = _submit(router, 0)
        assert queued
        routing = durable.Routing(
            router.store,
            router.durable_store,
            router.registry,
            lambda env, options: router.route_intent(env, options=options),
        )
        hold = router.durable_store.hold_record(first)
        assert hold is not None
        with pytest.raises(ResumeRefused) as refused:  # held: not this caller's
            durable.resume(routing, first)
        assert refused.value.reason == "owned"
        answer = durable.resume(routing, first, held=hold)
        assert answer.status == "success"
        assert answer.payload == {"n": 0}
        head = chain_head(router, first)
        assert head != first
        assert router.store.resumed_by(first) == head  # linked through the hold
        assert router.durable_store.hold_record(first) is None  # still held
        hold.release()
        again = router.durable_store.hold_record(first)
        assert again is not None
        again.release()


def test_an_entry_whose_record_was_deleted_is_dropped(store: object) -> None:
    """A queued execution deleted before its turn: its entry goes, nothing runs."""
    ran: list[object] = []
    for run_queued in (False, True):
        router = IntentRouter(store=store)  # type: ignore[arg-type]
        router.queue("llm", concurrency=1, run_queued=run_queued)

        @router.agent("work", queue="llm")
        def work(envelope, ctx):  # type: ignore[no-untyped-def]
            ran.append(envelope.payload["n"])
            return {}

        if not run_queued:
            first, queued = _submit(router, 0)
            assert queued
            router.store.delete(first)
            router.close()
    deadline = time.monotonic() + 10
    while router.store.queued_executions("llm", 10):
        assert time.monotonic() < deadline, "the entry stayed"
        time.sleep(0.01)
    router.close()
    assert ran == []


def test_processes_start_the_queued_and_survive_a_kill(tmp_path: Path) -> None:
    """Submitted by one process that starts two and is killed; others finish all."""
    where, ledger = str(tmp_path / "records"), tmp_path / "ledger"
    limits = {"queue_concurrency": 2}
    submitter = queuekit.spawn("submit", where, ledger, 6, queue_stall=1, **limits)
    try:
        _kill_test(submitter, where, ledger, limits)
    finally:
        if submitter.poll() is None:
            submitter.kill()
        submitter.communicate(timeout=30)


def _kill_test(
    submitter: subprocess.Popen[str], where: str, ledger: Path, limits: dict[str, int]
) -> None:
    assert submitter.stdout is not None
    ids = [submitter.stdout.readline().strip() for _ in range(6)]
    deadline = time.monotonic() + 60
    while ledger.read_text().count("start ") < 2 if ledger.exists() else True:
        assert time.monotonic() < deadline
        assert submitter.poll() is None
        time.sleep(0.01)
    with FileExecutionStore(where) as store:
        # the two being started are held by their starter: in progress
        statuses = [store.load(i).header.status for i in ids]
        assert statuses.count(RecordStatus.QUEUED) == 4
        assert statuses.count(RecordStatus.IN_PROGRESS) == 2
        submitter.send_signal(signal.SIGKILL)  # in the middle of two of them
        submitter.communicate(timeout=30)
        skip = len(ledger.read_text().splitlines())
        assert skip == 2  # two started (the limit), none ended
        workers = [
            queuekit.spawn("work", where, ledger, 60, queue_ends=6, **limits)
            for _ in range(2)
        ]
        for worker in workers:
            worker.communicate(timeout=90)
            assert worker.returncode == 0
        with IntentRouter(store=store) as router:
            for execution_id in ids:
                head = _finished(router, execution_id)
                assert store.load(head).header.status is RecordStatus.COMPLETED
        assert store.queued_executions("llm", 10) == []
    top, _ = peaks(ledger, skip=skip)
    assert top <= 2
    ended = ledger.read_text().count("end ")
    assert ended == 6  # each once: the two killed ones again, the rest once


@pytest.mark.slow
def test_serve_with_two_workers_starts_queued_submits(tmp_path: Path) -> None:
    """``serve --workers 2``: respond-async submits queue, run 2 at once, all end."""
    where, ledger = str(tmp_path / "records"), tmp_path / "ledger"
    (tmp_path / "queueapp.py").write_text(
        "import os\nfrom queuekit import build\n"
        "router = build(os.environ['INTENTUSNET_STORE'], os.environ['QUEUE_LEDGER'])\n"
    )
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(
            [str(tmp_path), str(Path(__file__).parent), str(Path.cwd())]
        ),
        "INTENTUSNET_STORE": where,
        "QUEUE_LEDGER": str(ledger),
        "QUEUE_CONCURRENCY": "2",
        "QUEUE_FILL": "2",
        "QUEUE_TOTAL": "10",
    }
    command = [sys.executable, "-m", "intentusnet.cli", "serve", "--app"]
    command += ["queueapp:router", "--port", str(port), "--workers", "2"]
    command += ["--log-level", "warning"]
    server = subprocess.Popen(command, env=environment)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                httpx.get(f"{base}/healthz", trust_env=False)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline
                assert server.poll() is None
                time.sleep(0.05)
        with httpx.Client(base_url=base, trust_env=False, timeout=30) as client:
            locations = []
            for n in range(10):
                answer = client.post(
                    "/v1/intents",
                    json={"intent": {"name": "work"}, "payload": {"n": n}},
                    headers={"Prefer": "respond-async"},
                )
                assert answer.status_code == 202
                locations.append(answer.headers["location"])
            statuses = set()
            for location in locations:
                record = client.get(location, params={"wait": 30}).json()
                statuses.add(record["header"]["status"])
            listed = client.get("/v1/executions", params={"status": "queued"})
            assert listed.status_code == 200
        assert statuses == {"completed"}
        top, _ = peaks(ledger)
        assert top == 2
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


def test_records_list_shows_the_queued(tmp_path: Path) -> None:
    """``records list --status queued`` lists a queued submit, and only it."""
    from click.testing import CliRunner

    from intentusnet.cli import cli

    root = tmp_path / "records"
    with IntentRouter(store=FileExecutionStore(root)) as router:
        router.queue("llm", concurrency=1)
        router.agent("work", name="work", queue="llm")(lambda envelope, ctx: {})
        plain = router.route_intent({"intent": {"name": "work"}, "payload": {}})
        queued_id, queued = _submit(router, 1)
        assert queued
        _finished(router, queued_id)
    result = CliRunner().invoke(
        cli, ["--store", str(root), "records", "list", "--status", "queued", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert queued_id in result.output
    assert plain.metadata.execution_id not in result.output
