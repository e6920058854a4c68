"""Every crash point, two levels deep: a router killed, then its resume killed.

A trip (tests/routing/crashkit.py: a pure step, a side effect, a child intent
with a side effect of its own) is routed under a key by a process that
SIGKILLs itself at write point N (intentusnet/_util/faults.py: just before and
just after each record write); a retry with the same key, which resumes it,
is killed at point M; recovery then finishes what is left. Every (N, M) is
tried, N and M counted up until the process finishes without being killed:
that enumerates every line boundary and every gap between a side effect's
start and its end, on each level, with no timing. Afterwards:

- every side effect ran at most once (the ledger the agents append to), and
  exactly once in an execution that completed;
- a side effect whose start is recorded and whose end is recorded in no
  record of its chain (the oracle, read from the records before recovery)
  parks its execution ``side_effect_in_doubt`` naming it (a receipt's print:
  the receipt is parked, and the trip completes with its answer); every other
  trip completes with the answer of a trip nothing interrupted, and a retry of
  its key answers the same;
- recovery leaves only records nothing ran in (``empty``, ``abandoned``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import orjson
import pytest

from intentusnet import (
    AgentResponse,
    IntentRouter,
    RecordStatus,
    Recovery,
    ResumeRefused,
)

sys.path.insert(0, str(Path(__file__).parent))
import crashkit  # the application, importable beside this file

pytestmark = pytest.mark.slow
KIT = Path(__file__).with_name("crashkit.py")
SIDE_EFFECTS = ("book", "print")
#: Points are counted up to this at most (a trip writes about 14 times).
MAX_POINT = 80


@pytest.fixture(params=["file", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The store: a directory, or a new PostgreSQL database."""
    if request.param == "postgres":
        # Over the server's Unix socket: a thousand processes connecting over
        # TCP would spend half a minute on password authentication alone.
        dbname = str(request.getfixturevalue("pg_dsn")).rsplit("/", 1)[1]
        yield request.getfixturevalue("pg_server").socket_dsn(dbname)
        return
    # In memory when there is room (as tests/pgkit.py puts its server): a
    # SIGKILL loses nothing the page cache holds, and a thousand processes
    # closing their catalog do not wait on a busy disk.
    memory = Path("/dev/shm")
    if not memory.is_dir() or shutil.disk_usage(memory).free < 1 << 30:
        yield str(tmp_path / "store")
        return
    scratch = Path(tempfile.mkdtemp(prefix="intentusnet-crash-", dir=memory))
    try:
        yield str(scratch / "store")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class Forker:
    """``crashkit.py`` as a forker: one killed (or finished) trip per job."""

    def __init__(self, where: str, ledger: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "INTENTUSNET_KILL_AT"}
        self.process = subprocess.Popen(
            [sys.executable, str(KIT), where, str(ledger)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(self, case: str, kill: int) -> int:
        """Route ``case``'s trip under its key, killed at point ``kill``."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        stdin.write(orjson.dumps({"case": case, "kill": kill}).decode() + "\n")
        stdin.flush()
        status = int(stdout.readline())
        assert status in (0, -9), f"{case}: the trip's process exited {status}"
        return status

    def close(self) -> None:
        """End the forker (its stdin closed, it exits)."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture
def router(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[IntentRouter]:
    """The application in this process (it recovers), on the forker's store."""
    monkeypatch.setenv("CRASH_LEDGER", str(tmp_path / "ledger"))
    built = crashkit.build(where)
    yield built
    built.close()
    built.store.close()


def _kill_at(forker: Forker, n: int) -> tuple[list[str], bool]:
    """Route killed at point ``n``, retry killed at every M: the cases ``N-M``.

    And whether the trip finished before point ``n`` (no point left).
    """
    cases: list[str] = []
    for m in range(1, MAX_POINT):
        case = f"{n}-{m}"
        first = forker.run(case, n)
        second = forker.run(case, m)  # the retry: resumes a killed trip
        cases.append(case)
        if second == 0:
            return cases, first == 0
    pytest.fail(f"a resume of {n} was still killed at point {MAX_POINT}")


def _kill_everywhere(where: str, ledger: Path) -> list[str]:
    """Every (N, M), N shared out to two forkers (the machine's two cores)."""
    points = iter(range(1, MAX_POINT))
    lock = threading.Lock()
    last: list[int] = []  # the first N the trip finished before
    cases: list[str] = []

    def work() -> None:
        forker = Forker(where, ledger)
        try:
            while True:
                with lock:
                    n = next(points, None)
                    if n is None or (last and n > last[0]):
                        return
                found, finished = _kill_at(forker, n)
                with lock:
                    cases.extend(found)
                    if finished:
                        last[:] = [min([n, *last])]
        finally:
            forker.close()

    with ThreadPoolExecutor(2) as pool:
        for done in [pool.submit(work) for _ in range(2)]:
            done.result()
    if not last:
        pytest.fail(f"a trip was still killed at point {MAX_POINT}")
    return cases


def _chain(router: IntentRouter, case: str) -> list[str]:
    """The records of the case's execution: its resume chain, oldest first."""
    store = router.store
    origin = store.find_by_idempotency_key(case)  # type: ignore[union-attr]
    assert origin is not None, case
    chain = [origin] if store.exists(origin) else []
    current = origin
    while (following := store.resumed_by(current)) is not None and store.exists(  # type: ignore[union-attr]
        following
    ):
        chain.append(following)
        current = following
    return chain


def _in_doubt(router: IntentRouter, case: str) -> set[str]:
    """The side effects started and ended in no record of the case (the oracle)."""
    store = router.store
    started: set[str] = set()
    ended: set[str] = set()
    records = _chain(router, case)
    children: list[str] = []
    for execution_id in records:
        for event in store.load(execution_id).events:
            child = event.data.get("childExecutionId")
            if isinstance(child, str) and child not in children:
                children.append(child)
    for execution_id in records + [c for c in children if store.exists(c)]:
        for event in store.load(execution_id).events:
            name = event.data.get("name")
            if event.type.value == "STEP_START" and event.data.get("sideEffect"):
                started.add(str(name))
            elif event.type.value == "STEP_END" and event.data.get("source") != "miss":
                ended.add(str(name))
    return started - ended


def _outcome(
    router: IntentRouter,
    case: str,
    answer: AgentResponse,
    ran: dict[str, int],
    doubt: set[str],
) -> str:
    """What became of one case, once recovered; AssertionError if it is wrong."""
    assert max(ran.values()) <= 1, f"a side effect ran twice: {ran}"
    if not answer.metadata.from_replay:
        # Both processes died before the record opened: nothing had been
        # done, and the key's execution ran now, under its claimed id.
        assert answer.payload == crashkit.ANSWER, answer.payload
        assert ran == {"book": 1, "print": 1}, ran
        return "never opened: run by the last retry"
    head = _chain(router, case)[-1]
    if "book" in doubt:
        attention = _attention(router, head)
        assert (attention["reason"], attention["name"]) == (
            "side_effect_in_doubt",
            "book",
        ), attention
        assert answer.error is not None
        assert answer.error.code.value == "NEEDS_ATTENTION", answer.error
        assert ran["print"] == 0, ran
        return "parked: book in doubt"
    record = router.store.load(head)
    assert record.header.status is RecordStatus.COMPLETED, record.header.status
    assert ran["book"] == 1, f"the booking was skipped: {ran}"
    assert answer.payload == record.final_response["payload"], answer.payload
    if "print" in doubt:
        assert answer.payload == crashkit.RECEIPT_PARKED, answer.payload
        [receipt] = [
            e.data["childExecutionId"]
            for e in record.events
            if e.type.value == "STEP_END" and e.data["name"] == "route:receipt"
        ]
        attention = _attention(router, receipt)
        assert (attention["reason"], attention["name"]) == (
            "side_effect_in_doubt",
            "print",
        ), attention
        return "completed, receipt parked: print in doubt"
    assert answer.payload == crashkit.ANSWER, answer.payload
    assert ran["print"] == 1, f"the receipt was skipped: {ran}"
    return "completed"


def _attention(router: IntentRouter, execution_id: str) -> dict[str, object]:
    record = router.store.load(execution_id)
    status = record.header.status
    assert status is RecordStatus.NEEDS_ATTENTION, f"{status.value}, not parked"
    [found] = [e.data for e in record.events if e.type.value == "ATTENTION_NEEDED"]
    return found


def test_every_crash_point_two_levels_deep(
    where: str, tmp_path: Path, router: IntentRouter
) -> None:
    """Killed at each write point, then its resume: at most once, parked in doubt."""
    started = time.monotonic()
    cases = _kill_everywhere(where, tmp_path / "ledger")
    killed_s = time.monotonic() - started
    doubt = {case: _in_doubt(router, case) for case in cases}

    for _ in range(5):  # a scan takes at most 1000 records per intent
        report = Recovery(router, grace=0, backoff=0).run_once()
        if not report.resumed and not report.parked:
            break
    # Left: records nothing ran in, which recovery leaves to a retry of their
    # key (docs/durability.md).
    left = Counter(o.reason for o in report.outcomes)
    for abandoned in report.outcomes:
        if abandoned.reason == "abandoned":  # resumed by hand: refused too
            with pytest.raises(ResumeRefused) as refused:
                router.resume(abandoned.execution_id)
            assert refused.value.reason == "abandoned"

    answers = {
        case: router.route_intent(crashkit.envelope(case), idempotency_key=case)
        for case in cases
    }
    ledger = Counter((tmp_path / "ledger").read_text().splitlines())
    outcomes: Counter[str] = Counter()
    wrong: list[str] = []
    for case, answer in answers.items():
        ran = {name: ledger[f"{case} {name}"] for name in SIDE_EFFECTS}
        try:
            outcomes[_outcome(router, case, answer, ran, doubt[case])] += 1
        except AssertionError as exc:
            wrong.append(f"{case}: {str(exc).splitlines()[0]}")
    total_s = time.monotonic() - started
    print(  # shown with -s: what the enumeration covered, and its cost
        f"\n{where.split(':')[0]}: {len(cases)} cases, {dict(outcomes)}; "
        f"left {dict(left)}; kills {killed_s:.1f} s, total {total_s:.1f} s"
    )
    kinds = Counter(w.split(": ", 1)[1] for w in wrong)
    assert not wrong, f"{len(wrong)} of {len(cases)} cases: {dict(kinds)}; {wrong[:8]}"
    assert set(left) <= {"empty", "abandoned"}, left
    assert outcomes["parked: book in doubt"] > 0
    assert outcomes["completed, receipt parked: print in doubt"] > 0
