"""The replay cache over PostgreSQL: answers and single flight across processes.

Every process here is a real one, with its own store connection and its own
cache; they share only the database, as routers on several hosts would.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import psycopg
import pytest

from intentusnet import AgentDefinition, IntentRouter
from intentusnet.cache.replay_cache import ReplayCache
from intentusnet.store import PostgresExecutionStore

ROOT = str(Path(__file__).parent.parent.parent)
#: Seconds any process of these tests may take.
LIMIT = 60

# A router process: its agent notes each run in a file, then takes
# sys.argv[3] seconds; the process routes one envelope when its start file
# appears and prints the answer's metadata as one JSON line.
ROUTER = textwrap.dedent(
    """
    import os, sys, time
    sys.path[:0] = [sys.argv[5]]
    import orjson
    from intentusnet import AgentDefinition, IntentRouter, ListFilters
    from intentusnet.cache.replay_cache import ReplayCache
    from intentusnet.store import PostgresExecutionStore

    runs, delay, start = sys.argv[2], float(sys.argv[3]), sys.argv[4]

    def agent(env, ctx):
        with open(runs, "a") as out:
            out.write(f"{os.getpid()}\\n")
        time.sleep(delay)
        return {"answer": env.payload["question"] * 2}

    store = PostgresExecutionStore(sys.argv[1])
    router = IntentRouter(store=store, cache=ReplayCache(store=store))
    router.register(AgentDefinition(name="slow", intents=["ask"]), agent)
    store.list(ListFilters(limit=1))  # connected before the start
    print("ready", flush=True)
    deadline = time.monotonic() + 30
    while not os.path.exists(start) and time.monotonic() < deadline:
        time.sleep(0.005)
    ask = {"intent": {"name": "ask"}, "payload": {"question": 21}}
    answer = router.route_intent(ask)
    metadata = answer.metadata
    print(orjson.dumps({
        "payload": answer.payload,
        "fromReplay": metadata.from_replay,
        "executionId": metadata.execution_id,
        "original": metadata.original_execution_id,
    }).decode(), flush=True)
    router.close()
    store.close()
    """
)


class Routers:
    """Router processes started by a test, all killed at its end."""

    def __init__(self, dsn: str, tmp_path: Path) -> None:
        self.dsn = dsn
        self.runs = tmp_path / "runs"
        self.start = tmp_path / "start"
        self.processes: list[subprocess.Popen[str]] = []

    def spawn(self, delay: float) -> subprocess.Popen[str]:
        """Start a router process; return it once it is connected and waiting."""
        args = [self.dsn, str(self.runs), str(delay), str(self.start), ROOT]
        process = subprocess.Popen(
            [sys.executable, "-c", ROUTER, *args],
            stdout=subprocess.PIPE,
            text=True,
        )
        self.processes.append(process)
        assert process.stdout is not None
        assert process.stdout.readline() == "ready\n"
        return process

    def go(self) -> None:
        """Let every process waiting for the start route its envelope."""
        self.start.touch()

    def runs_so_far(self) -> list[str]:
        """The pids of the agent runs so far, in order."""
        return self.runs.read_text().split() if self.runs.exists() else []

    def answer(self, process: subprocess.Popen[str]) -> dict[str, object]:
        """What a process printed, once it has ended (bounded)."""
        out, _ = process.communicate(timeout=LIMIT)
        assert process.returncode == 0, out
        answer: dict[str, object] = orjson.loads(out)
        return answer

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.kill()
            process.communicate(timeout=LIMIT)


@pytest.fixture
def routers(pg_dsn: str, tmp_path: Path) -> Iterator[Routers]:
    """A way to start router processes sharing the database ``pg_dsn``."""
    started = Routers(pg_dsn, tmp_path)
    try:
        yield started
    finally:
        started.stop()


def _eventually(check: Callable[[], bool], seconds: float = LIMIT) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def _flights_held(dsn: str) -> int:
    """How many advisory locks the database's sessions hold (records and flights)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
        ).fetchone()
    assert row is not None
    return int(row[0])


def test_four_processes_asking_at_once_run_the_agent_once(routers: Routers) -> None:
    """Same envelope from 4 processes at once: one runs, 3 get its recorded answer."""
    processes = [routers.spawn(delay=0.5) for _ in range(4)]
    routers.go()
    answers = [routers.answer(process) for process in processes]
    assert len(routers.runs_so_far()) == 1
    assert all(a["payload"] == {"answer": 42} for a in answers)
    ran = [a for a in answers if not a["fromReplay"]]
    assert len(ran) == 1
    served = [a for a in answers if a["fromReplay"]]
    assert {a["original"] for a in served} == {ran[0]["executionId"]}
    with PostgresExecutionStore(routers.dsn) as store:
        assert len(store.list()) == 1  # hits are journal rows, not records
        assert store.cache_hit_count() == 3


def test_waiters_take_over_when_the_running_process_is_killed(
    routers: Routers,
) -> None:
    """SIGKILL the process running the agent: one waiter runs it, the rest wait."""
    leader = routers.spawn(delay=LIMIT)  # runs until killed
    routers.go()
    _eventually(lambda: len(routers.runs_so_far()) == 1)
    locks_before = _flights_held(routers.dsn)
    waiters = [routers.spawn(delay=0.3) for _ in range(3)]
    time.sleep(0.5)  # the waiters have asked, and wait for the leader's record
    assert routers.runs_so_far() == [str(leader.pid)]
    assert _flights_held(routers.dsn) == locks_before  # waiters claim nothing
    os.kill(leader.pid, signal.SIGKILL)
    answers = [routers.answer(process) for process in waiters]
    runs = routers.runs_so_far()
    assert len(runs) == 2  # the killed leader, and one waiter
    assert runs[1] in {str(process.pid) for process in waiters}
    assert all(a["payload"] == {"answer": 42} for a in answers)
    assert sorted(bool(a["fromReplay"]) for a in answers) == [False, True, True]


def test_a_claim_holds_until_ended_or_its_connection_is_gone(pg_dsn: str) -> None:
    """try_flight/end_flight between two stores, and a claim lost with a session."""
    first = PostgresExecutionStore(pg_dsn)
    second = PostgresExecutionStore(pg_dsn)
    try:
        assert first.try_flight("sha256:" + "a" * 64)
        assert not second.try_flight("sha256:" + "a" * 64)
        assert second.try_flight("sha256:" + "b" * 64)  # another envelope
        first.end_flight("sha256:" + "a" * 64)
        assert second.try_flight("sha256:" + "a" * 64)
        assert not first.try_flight("sha256:" + "a" * 64)
        second.close()  # its session ends, and the server drops its claims
        _eventually(lambda: first.try_flight("sha256:" + "a" * 64), seconds=10)
    finally:
        first.close()
        second.close()


def test_a_cache_over_postgres_never_serves_an_invalidated_answer(
    pg_dsn: str,
) -> None:
    """A warm local tier in one process; another invalidates, deletes: no stale hit."""
    calls: list[int] = []
    store = PostgresExecutionStore(pg_dsn)
    other = PostgresExecutionStore(pg_dsn)  # another router's connection
    router = IntentRouter(store=store, cache=ReplayCache(store=store))
    router.register(
        AgentDefinition(name="a", intents=["ask"]),
        lambda env, ctx: calls.append(1) or {"n": len(calls)},
    )
    ask = {"intent": {"name": "ask"}, "payload": {"q": 1}}
    try:
        first = router.route_intent(ask)
        assert router.route_intent(ask).metadata.from_replay  # local tier warm
        assert first.metadata.execution_id is not None
        other.invalidate(first.metadata.execution_id, "wrong answer")
        second = router.route_intent(ask)
        assert not second.metadata.from_replay
        assert second.payload == {"n": 2}
        assert router.route_intent(ask).metadata.from_replay
        assert second.metadata.execution_id is not None
        other.delete(second.metadata.execution_id)
        third = router.route_intent(ask)
        assert not third.metadata.from_replay
        assert len(calls) == 3
    finally:
        router.close()
        store.close()
        other.close()
