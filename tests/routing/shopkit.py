"""An application for the durable-execution tests: a shop whose router can be killed.

Run as a script (``python tests/routing/shopkit.py route [KEY]``) it routes one
``order`` and prints the response; ``SHOP_KILL=POINT`` makes the process SIGKILL
itself at that point (``before:fetch``, ``in:email``, ... or ``end``). Every
step function appends ``run:NAME:IDEMPOTENCY_KEY`` to ``SHOP_LOG`` first, so the
tests count what really ran. ``SHOP_IDEMPOTENT=1`` declares the e-mail
idempotent. The ``slow`` intent appends one line and sleeps (key races);
``tick`` runs a step every 20 ms for half a minute (to be cancelled).
``SHOP_STORE`` is a directory or a ``postgresql://`` URL (``open_store``).

:func:`kill_trial` (imported by the tests and ``benchmarks/bench_durable.py``)
kills routers at random points, recovers, and counts what became of each order.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import orjson

from intentusnet import IntentRouter, RecordStatus, Recovery, open_store
from intentusnet.record.durable import idempotency_key_of, resume_of

#: Where the process may be killed, in the order the agent passes them.
KILL_POINTS = (
    "before:fetch",
    "in:fetch",
    "before:email",
    "in:email",
    "before:charge",
    "in:charge",
    "end",
)
ORDER = {"intent": {"name": "order"}, "payload": {"item": "book", "n": 2}}

router = IntentRouter(store=open_store(os.environ.get("SHOP_STORE", ".")))


def _log(line: str) -> None:
    with open(os.environ["SHOP_LOG"], "a", encoding="utf-8") as handle:
        handle.write(line + "\n")


def _point(name: str) -> None:
    if os.environ.get("SHOP_KILL") == name:
        os.kill(os.getpid(), signal.SIGKILL)


def _step(name: str, value: object) -> object:
    ctx = router_context()
    _log(f"run:{name}:{ctx.idempotency_key}")
    _point(f"in:{name}")
    return value


def router_context():  # type: ignore[no-untyped-def]
    from intentusnet.routing.agents import current_context

    ctx = current_context()
    assert ctx is not None
    return ctx


@router.agent("order")
def order(envelope, ctx):  # type: ignore[no-untyped-def]
    """Fetch a price, e-mail the customer (a side effect), charge."""
    n = envelope.payload["n"]
    _point("before:fetch")
    price = ctx.step(
        "fetch", {"item": envelope.payload["item"]}, lambda item: _step("fetch", 10)
    )
    _point("before:email")
    ctx.step(
        "email",
        {"to": "ann@example.com"},
        lambda to: _step("email", None),
        side_effect=True,
        idempotent=os.environ.get("SHOP_IDEMPOTENT") == "1",
    )
    _point("before:charge")
    total = ctx.step(
        "charge", {"amount": price * n}, lambda amount: _step("charge", amount)
    )
    _point("end")
    return {"total": total}


@router.agent("slow")
def slow(envelope, ctx):  # type: ignore[no-untyped-def]
    """Append one line, then take a while: racing callers must wait for it."""
    _log(f"run:slow:{ctx.execution_id}")
    time.sleep(0.3)
    return {"ran": ctx.execution_id}


@router.agent("tick")
def tick(envelope, ctx):  # type: ignore[no-untyped-def]
    """Tick (a step every 20 ms, each logged) for a long while: one to cancel."""
    for n in range(int(envelope.payload.get("n", 1500))):
        ctx.step("tick", {"n": n}, lambda n: _step("tick", n))
        time.sleep(0.02)
    return {"ticked": True}


def _kill_at(key: str, point: str) -> None:
    """Route an order under ``key`` in a process that SIGKILLs itself at ``point``."""
    subprocess.run(
        [sys.executable, __file__, "route", key],
        env={**os.environ, "SHOP_KILL": point},
        capture_output=True,
        timeout=120,
        check=False,
    )


def kill_trial(kills: int, seed: int, *, parallel: int = 2) -> dict[str, int]:
    """Kill ``kills`` routers at random points, recover once, count the outcome.

    Order ``n`` is routed under key ``trial-n`` by its own process (``parallel``
    at a time), killed at a point drawn from :data:`KILL_POINTS`; then one
    ``Recovery(router, grace=0).run_once()`` in this process. An order is
    ``lost`` if no record of its key exists, ``unfinished`` if its chain does
    not end completed, failed or needs_attention; a parked one without a
    reason is ``no_reason``. From the step log: ``steps_rerun`` counts runs of
    steps that had ended before the kill, ``side_effects_twice`` orders whose
    e-mail ran twice, ``emails_skipped`` completed orders with no e-mail.
    """
    rng = random.Random(seed)
    points = [rng.choice(KILL_POINTS) for _ in range(kills)]
    with ThreadPoolExecutor(parallel) as pool:
        list(pool.map(_kill_at, [f"trial-{n}" for n in range(kills)], points))
    store = router.store
    assert store is not None
    origins: dict[str, str] = {}
    ended: set[str] = set()  # "<origin>:<step>" of the steps that ended
    for summary in store.list():
        record = store.load(summary.execution_id)
        key = idempotency_key_of(record)
        if key is not None and resume_of(record) is None:
            origins[key] = record.execution_id
            ended |= {
                f"{record.execution_id}:{event.data['step']}"
                for event in record.events
                if event.type.value == "STEP_END"
            }
    Recovery(router, grace=0).run_once()
    runs = Counter(line.split(":", 2)[2] for line in _log_lines())
    emails = Counter(
        line.split(":")[2] for line in _log_lines() if line.startswith("run:email:")
    )
    counts = Counter(
        submitted=kills,
        lost=kills - len(origins),
        steps_rerun=sum(runs[step] - 1 for step in ended if runs[step] > 1),
    )
    for origin in origins.values():
        record = store.load(_newest(origin))
        status = record.header.status
        counts[status.value if status in _ENDED else "unfinished"] += 1
        counts["side_effects_twice"] += emails[origin] > 1
        if status is RecordStatus.COMPLETED:
            counts["emails_skipped"] += emails[origin] == 0
        if status is RecordStatus.NEEDS_ATTENTION:
            counts["no_reason"] += not any(
                e.type.value == "ATTENTION_NEEDED" and e.data.get("reason")
                for e in record.events
            )
    return {name: counts[name] for name in TRIAL_COUNTS}


#: What :func:`kill_trial` counts, in the order it reports them.
TRIAL_COUNTS = (
    "submitted",
    "completed",
    "failed",
    "needs_attention",
    "unfinished",
    "lost",
    "no_reason",
    "side_effects_twice",
    "steps_rerun",
    "emails_skipped",
)
_ENDED = (RecordStatus.COMPLETED, RecordStatus.FAILED, RecordStatus.NEEDS_ATTENTION)


def _log_lines() -> list[str]:
    try:
        with open(os.environ["SHOP_LOG"], encoding="utf-8") as handle:
            return handle.read().splitlines()
    except FileNotFoundError:
        return []


def _newest(execution_id: str) -> str:
    """The newest record of ``execution_id``'s resume chain."""
    store = router.store
    assert store is not None
    current = execution_id
    while (following := store.resumed_by(current)) is not None:  # type: ignore[attr-defined]
        current = following
    return current


def main(argv: list[str]) -> int:
    """``route [KEY]``: route an order; ``slow KEY START_FILE``: race on a key.

    ``tick [KEY]``: tick until cancelled.

    ``recover GRACE``: run recovery (``run_forever``) until killed.
    """
    if argv[0] == "recover":
        import threading

        Recovery(router, grace=float(argv[1])).run_forever(threading.Event())
        return 0
    if argv[0] == "tick":
        key = argv[1] if len(argv) > 1 else None
        envelope = {"intent": {"name": "tick"}, "payload": {}}
        response = router.route_intent(envelope, idempotency_key=key)
    elif argv[0] == "route":
        key = argv[1] if len(argv) > 1 else None
        response = router.route_intent(ORDER, idempotency_key=key)
    else:
        start = argv[2]
        while not os.path.exists(start):
            time.sleep(0.001)
        envelope = {"intent": {"name": "slow"}, "payload": {}}
        response = router.route_intent(envelope, idempotency_key=argv[1])
    sys.stdout.write(orjson.dumps(response.to_wire()).decode() + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
