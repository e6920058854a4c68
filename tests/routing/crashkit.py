"""The crash-point test's application, and a process that runs it killed at a point.

The ``trip`` agent quotes (a pure step), books (a side effect) and routes a
``receipt`` child intent, whose agent prints (a side effect). Every side
effect appends ``CASE NAME`` to the ledger file (``CRASH_LEDGER``), so the test
counts what really happened.

Run as ``python crashkit.py STORE LEDGER`` it is a *forker*: a fresh
interpreter that has imported the package once, then reads jobs from stdin,
one JSON object a line, ``{"case": KEY, "kill": N}``. For each it forks a
child that arms the fault seam (``INTENTUSNET_KILL_AT=N``, see
intentusnet/_util/faults.py), opens the store and routes a trip under
idempotency key ``KEY`` (the first time: a new execution; after a kill: the
key's execution resumed), then exits. The forker answers each job with the
child's exit status on a line of stdout (``-9``: killed at point ``N``; ``0``:
it finished before point ``N``). Forking a ready interpreter costs
milliseconds where starting one costs a third of a second, which keeps a
thousand kills in the test's budget. On PostgreSQL the children share a
router made before the first fork, whose store connects anew in each child
(it checks its pid) without checking the schema again.
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
import traceback

import orjson

from intentusnet import IntentRouter, PostgresExecutionStore, open_store

#: The answer of a trip nothing interrupted.
ANSWER = {"quote": 7, "booked": "booked", "receipt": {"printed": True}}
#: The answer of a trip whose receipt was parked (its print in doubt).
RECEIPT_PARKED = {"quote": 7, "booked": "booked", "receipt": None}


def envelope(case: str) -> dict[str, object]:
    """The trip of test case ``case``."""
    return {"intent": {"name": "trip"}, "payload": {"case": case}}


def _ledger(case: str, name: str) -> None:
    fd = os.open(os.environ["CRASH_LEDGER"], os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, f"{case} {name}\n".encode())
    finally:
        os.close(fd)


def build(where: str) -> IntentRouter:
    """The application's router on the store at ``where``."""
    router = IntentRouter(store=open_store(where))

    @router.agent("trip")
    def trip(envelope, ctx):  # type: ignore[no-untyped-def]
        case = envelope.payload["case"]
        quote = ctx.step("quote", {"case": case}, lambda case: 7)
        booked = ctx.step(
            "book",
            {"case": case},
            lambda case: _ledger(case, "book") or "booked",
            side_effect=True,
        )
        receipt = ctx.route({"intent": {"name": "receipt"}, "payload": {"case": case}})
        return {"quote": quote, "booked": booked, "receipt": receipt.payload}

    @router.agent("receipt")
    def receipt(envelope, ctx):  # type: ignore[no-untyped-def]
        case = envelope.payload["case"]
        ctx.step(
            "print",
            {"case": case},
            lambda case: _ledger(case, "print"),
            side_effect=True,
        )
        return {"printed": True}

    return router


def _child(where: str, ready: IntentRouter | None, case: str, kill: int) -> None:
    """In the forked child: arm the seam, route the case's trip, never return."""
    from intentusnet._util import faults

    code = 0
    try:
        os.environ["INTENTUSNET_KILL_AT"] = str(kill)
        importlib.reload(faults)  # read the seam's variable anew, count from 0
        # The PostgreSQL store connects anew in a child (it checks its pid),
        # its schema known; the file store's catalog is opened by each child.
        router = ready or build(where)
        router.route_intent(envelope(case), idempotency_key=case)
        router.close()
        router.store.close()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def _warm_up(where: str) -> None:
    """Route one trip in a scratch store: every module a child needs is loaded."""
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["CRASH_LEDGER"] = f"{scratch}/ledger"
        router = build(f"{scratch}/store")
        router.route_intent(envelope("warm-up"), idempotency_key="warm-up")
        router.close()
        router.store.close()


def _ready(where: str) -> IntentRouter | None:
    """On PostgreSQL, the router the children share, its schema checked once."""
    if not where.startswith("postgresql:"):
        return None
    router = build(where)
    store = router.store
    assert isinstance(store, PostgresExecutionStore)
    store.try_flight("crashkit")  # any statement on its session: connects it
    store.end_flight("crashkit")
    return router


def main(where: str, ledger: str) -> int:
    """Fork a child per job read from stdin; answer each with its exit status."""
    _warm_up(where)
    ready = _ready(where)
    os.environ["CRASH_LEDGER"] = ledger
    for line in sys.stdin:
        job = orjson.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(where, ready, job["case"], job["kill"])
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
