"""An application for the durable-execution tests: a shop whose router can be killed.

Run as a script (``python tests/routing/shopkit.py route [KEY]``) it routes one
``order`` and prints the response; ``SHOP_KILL=POINT`` makes the process SIGKILL
itself at that point (``before:fetch``, ``in:email``, ... or ``end``). Every
step function appends ``run:NAME:IDEMPOTENCY_KEY`` to ``SHOP_LOG`` first, so the
tests count what really ran. ``SHOP_IDEMPOTENT=1`` declares the e-mail
idempotent. The ``slow`` intent appends one line and sleeps (key races).
"""

from __future__ import annotations

import os
import signal
import sys
import time

import orjson

from intentusnet import FileExecutionStore, IntentRouter

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

router = IntentRouter(store=FileExecutionStore(os.environ.get("SHOP_STORE", ".")))


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


def main(argv: list[str]) -> int:
    """``route [KEY]``: route an order; ``slow KEY START_FILE``: race on a key."""
    if argv[0] == "route":
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
