"""The refund walkthrough's application (docs/flow-control.md), and its forker.

The ``refund`` agent drafts (a pure step standing for the model call), waits
for the signal ``approval`` and pays (a side effect declared idempotent, which
passes ``ctx.idempotency_key`` to the provider). The provider is a ledger file
(``REFUND_LEDGER``): every call appends ``call ORDER KEY``; a key not paid yet
also appends ``paid ORDER KEY``, as a payment provider keeps one payment per
idempotency key.

Run as ``python refundkit.py STORE LEDGER`` it is a forker, as crashkit.py is:
it reads jobs from stdin (``{"case", "kill", "do"}``, ``do`` being ``route``,
routing the case's refund under its key, or ``resume``, resuming the case's
execution after its approval), forks a child per job that arms
``INTENTUSNET_KILL_AT`` and does it, and answers each job with the child's exit
status (``-9``: killed at the point; ``0``: done before it).
"""

from __future__ import annotations

import importlib
import os
import sys
import tempfile
import traceback
from datetime import timedelta
from pathlib import Path

import orjson

from intentusnet import IntentRouter, PostgresExecutionStore, WaitTimedOut, open_store

#: The answer of a refund approved and paid.
PAID = {"sent": True, "paid": 20}


def envelope(case: str) -> dict[str, object]:
    """The refund of test case ``case``."""
    return {"intent": {"name": "refund"}, "payload": {"order": case}}


def draft(order: str) -> dict[str, object]:
    """Stands for the model call that drafts the refund."""
    return {"order": order, "amount": 20, "note": "Sorry about the late book."}


def pay(refund: dict[str, object], key: str) -> dict[str, object]:
    """The payment provider: one payment per idempotency key, every call logged."""
    ledger = Path(os.environ["REFUND_LEDGER"])
    order = refund["order"]
    lines = ledger.read_text().splitlines() if ledger.exists() else []
    entries = [f"call {order} {key}"]
    if f"paid {order} {key}" not in lines:
        entries.append(f"paid {order} {key}")
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    try:
        os.write(fd, "".join(f"{e}\n" for e in entries).encode())
    finally:
        os.close(fd)
    return {"paid": refund["amount"]}


def build(where: str) -> IntentRouter:
    """The walkthrough's router on the store at ``where``."""
    router = IntentRouter(store=open_store(where))

    @router.agent("refund")
    def refund(envelope, ctx):  # type: ignore[no-untyped-def]
        proposal = ctx.step("draft", {"order": envelope.payload["order"]}, draft)
        try:
            approval = ctx.wait_for("approval", timeout=timedelta(days=2))
        except WaitTimedOut:
            return {"sent": False, "why": "no approval in two days"}
        if not approval.get("ok"):
            return {"sent": False, "why": f"declined by {approval.get('by')}"}
        paid = ctx.step(
            "send",
            {"refund": proposal},
            lambda refund: pay(refund, ctx.idempotency_key),
            side_effect=True,
            idempotent=True,
        )
        return {"sent": True, **paid}

    return router


def _child(where: str, ready: IntentRouter | None, job: dict[str, object]) -> None:
    """In the forked child: arm the seam, do the job, never return."""
    from intentusnet._util import faults

    code = 0
    try:
        os.environ["INTENTUSNET_KILL_AT"] = str(job["kill"])
        importlib.reload(faults)  # read the seam's variable anew, count from 0
        router = ready or build(where)
        case = str(job["case"])
        if job["do"] == "route":
            router.route_intent(envelope(case), idempotency_key=case)
        else:
            origin = router.store.find_by_idempotency_key(case)  # type: ignore[union-attr]
            router.resume(str(origin))
        router.close()
        router.store.close()
    except BaseException:
        traceback.print_exc()
        code = 1
    finally:
        sys.stderr.flush()
        os._exit(code)


def _warm_up() -> None:
    """Route, approve and pay one refund in a scratch store: every module loaded."""
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["REFUND_LEDGER"] = f"{scratch}/ledger"
        router = build(f"{scratch}/store")
        waiting = router.route_intent(envelope("warm-up"), idempotency_key="warm-up")
        execution_id = str(waiting.metadata.execution_id)
        router.signal(execution_id, "approval", {"ok": True})
        router.resume(execution_id)
        router.close()
        router.store.close()


def _ready(where: str) -> IntentRouter | None:
    """On PostgreSQL, the router the children share, its schema checked once."""
    if not where.startswith("postgresql:"):
        return None
    router = build(where)
    store = router.store
    assert isinstance(store, PostgresExecutionStore)
    store.try_flight("refundkit")  # any statement on its session: connects it
    store.end_flight("refundkit")
    return router


def main(where: str, ledger: str) -> int:
    """Fork a child per job read from stdin; answer each with its exit status."""
    _warm_up()
    ready = _ready(where)
    os.environ["REFUND_LEDGER"] = ledger
    for line in sys.stdin:
        job = orjson.loads(line)
        pid = os.fork()
        if pid == 0:
            _child(where, ready, job)
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(*sys.argv[1:3]))
