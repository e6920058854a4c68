"""The refund walkthrough (docs/flow-control.md) killed at every write point.

A refund (tests/routing/refundkit.py: a draft, a wait for ``approval``, an
idempotent payment) is routed under a key by a process that SIGKILLs itself
at write point N (intentusnet/_util/faults.py), for every N until it is not
killed; or routed whole, approved, and resumed by a process killed at point M,
for every M. Then this process does what an operator and the service do: the
key is retried (an interrupted refund is resumed, to its wait), the refund is
approved (``router.signal``), and recovery finishes it. On the file store and
on PostgreSQL. Every time:

- nothing is paid before the approval;
- the refund completes, answered ``{"sent": true, "paid": 20}``;
- the provider holds exactly one payment for it (a payment whose end was not
  recorded is made again under the same idempotency key, and the provider
  keeps one: that happens only when the kill fell between its call and its
  end).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest

from intentusnet import IntentRouter, RecordStatus, Recovery

sys.path.insert(0, str(Path(__file__).parent))
import refundkit  # the application, importable beside this file

pytestmark = pytest.mark.slow
KIT = Path(__file__).with_name("refundkit.py")
#: Points are counted up to this at most (a refund writes about 20 times).
MAX_POINT = 80


@pytest.fixture(params=["file", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The store: a directory (in memory when there is room), or a new database."""
    if request.param == "postgres":
        dbname = str(request.getfixturevalue("pg_dsn")).rsplit("/", 1)[1]
        yield request.getfixturevalue("pg_server").socket_dsn(dbname)
        return
    memory = Path("/dev/shm")
    if not memory.is_dir() or shutil.disk_usage(memory).free < 1 << 30:
        yield str(tmp_path / "store")
        return
    scratch = Path(tempfile.mkdtemp(prefix="intentusnet-refund-", dir=memory))
    try:
        yield str(scratch / "store")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


class Forker:
    """``refundkit.py`` as a forker: one killed (or finished) job at a time."""

    def __init__(self, where: str, ledger: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "INTENTUSNET_KILL_AT"}
        self.process = subprocess.Popen(
            [sys.executable, str(KIT), where, str(ledger)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def run(self, case: str, kill: int, do: str) -> int:
        """Do ``do`` for ``case``, killed at point ``kill``; the exit status."""
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None
        assert stdout is not None
        job = {"case": case, "kill": kill, "do": do}
        stdin.write(orjson.dumps(job).decode() + "\n")
        stdin.flush()
        status = int(stdout.readline())
        assert status in (0, -9), f"{case}: the process exited {status}"
        return status

    def close(self) -> None:
        """End the forker."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(timeout=60)
        assert self.process.stdout is not None
        self.process.stdout.close()


@pytest.fixture
def router(
    where: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[IntentRouter]:
    """The walkthrough's application in this process, on the forker's store."""
    monkeypatch.setenv("REFUND_LEDGER", str(tmp_path / "ledger"))
    built = refundkit.build(where)
    yield built
    built.close()
    built.store.close()


def _origin(router: IntentRouter, case: str) -> str:
    found = router.store.find_by_idempotency_key(case)  # type: ignore[union-attr]
    assert found is not None, case
    return str(found)


def _to_its_wait(router: IntentRouter, case: str) -> None:
    """Retry the key: an interrupted refund is resumed to its wait (or opened)."""
    answer = router.route_intent(refundkit.envelope(case), idempotency_key=case)
    assert answer.error is not None, answer
    assert answer.error.code.value == "WAITING", answer.error


def _finish(router: IntentRouter, cases: list[str]) -> dict[str, object]:
    """Recovery (wake-ups due, then interrupted records) until every case ended."""
    recovery = Recovery(router, grace=0, backoff=0)
    answers: dict[str, object] = {}
    deadline = time.monotonic() + 60
    while len(answers) < len(cases) and time.monotonic() < deadline:
        recovery.run_once()
        for case in cases:
            answer = router.route_intent(refundkit.envelope(case), idempotency_key=case)
            if answer.error is None or answer.error.code.value != "WAITING":
                answers[case] = answer.payload
    return answers


def _ledger(tmp_path: Path) -> Counter[str]:
    path = tmp_path / "ledger"
    lines = path.read_text().splitlines() if path.exists() else []
    return Counter(" ".join(line.split()[:2]) for line in lines)


def test_the_refund_is_paid_once_after_approval_whatever_is_killed(
    where: str, tmp_path: Path, router: IntentRouter
) -> None:
    """Killed at each point of the route, or of the resume after approval: paid once."""
    started = time.monotonic()
    forker = Forker(where, tmp_path / "ledger")
    routed: list[str] = []
    resumed: list[str] = []
    try:
        for n in range(1, MAX_POINT):  # the route, killed at point n
            case = f"route-{n}"
            routed.append(case)
            if forker.run(case, n, "route") == 0:
                break
        else:
            pytest.fail(f"a route was still killed at point {MAX_POINT}")
        for case in routed:
            _to_its_wait(router, case)
        assert _ledger(tmp_path) == Counter(), "paid before the approval"
        for case in routed:
            router.signal(_origin(router, case), "approval", {"ok": True}, by="ann")

        for m in range(1, MAX_POINT):  # the resume after approval, killed at m
            case = f"resume-{m}"
            resumed.append(case)
            _to_its_wait(router, case)
            router.signal(_origin(router, case), "approval", {"ok": True}, by="ann")
            if forker.run(case, m, "resume") == 0:
                break
        else:
            pytest.fail(f"a resume was still killed at point {MAX_POINT}")
    finally:
        forker.close()

    cases = routed + resumed
    answers = _finish(router, cases)
    ledger = _ledger(tmp_path)
    wrong = [
        f"{case}: {answers.get(case)}, paid {ledger[f'paid {case}']}"
        for case in cases
        if answers.get(case) != refundkit.PAID or ledger[f"paid {case}"] != 1
    ]
    twice = [case for case in cases if ledger[f"call {case}"] > 1]
    for case in cases:
        head = router.store.load(_head(router, _origin(router, case)))
        assert head.header.status is RecordStatus.COMPLETED, case
    print(  # shown with -s: what the enumeration covered, and its cost
        f"\n{'postgres' if where.startswith('postgresql:') else 'file'}: "
        f"{len(routed)} route kills, {len(resumed)} resume "
        f"kills; paid again under its key: {twice}; "
        f"{time.monotonic() - started:.1f} s"
    )
    assert not wrong, wrong
    assert len(resumed) > 10  # the resume's points were walked
    assert all(case.startswith("resume-") for case in twice)


def _head(router: IntentRouter, execution_id: str) -> str:
    store = router.store
    current = execution_id
    while (following := store.resumed_by(current)) is not None and store.exists(  # type: ignore[union-attr]
        following
    ):
        current = following
    return current
