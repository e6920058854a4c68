"""Executions parked for every reason (``PARK_REASONS``), as real ones get parked.

An ``order`` fetches a price and sends an e-mail (a side effect). A child
process routes it and dies (``os._exit``) at the point ``PARKS_DIE`` names,
so the record stays as a killed router leaves it; the test's own process
then resumes it (or runs recovery) and it parks:

- ``side_effect_in_doubt``: killed inside the e-mail, then resumed;
- ``nondeterminism``: killed after the fetch, resumed by code that audits first;
- ``attempts_exhausted``: killed after the fetch, killed again in a resume,
  then recovery with ``max_attempts=1``.

Only a child process with ``PARKS_DIE`` set ever dies.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from intentusnet import (
    AgentContext,
    IntentEnvelope,
    IntentRouter,
    JSONObject,
    Recovery,
    open_store,
)
from intentusnet.store import ExecutionStore

ORDER: JSONObject = {"intent": {"name": "order"}, "payload": {"n": 2}}
#: What ran, by step name, in this process.
CALLS: Counter[str] = Counter()


def _step(ctx: AgentContext, name: str, value: object, **kw: bool) -> object:
    def call() -> object:
        CALLS[name] += 1
        if os.environ.get("PARKS_DIE") == f"in:{name}":
            os._exit(9)  # its end is never recorded
        return value

    found = ctx.step(name, {}, call, **kw)
    if os.environ.get("PARKS_DIE") == f"after:{name}":
        os._exit(9)
    return found


def order(envelope: IntentEnvelope, ctx: AgentContext) -> JSONObject:
    """Fetch a price, e-mail the customer (a side effect), total it."""
    price = _step(ctx, "fetch", 10)
    mail = _step(ctx, "email", "sent", side_effect=True)
    return {"total": int(price) * int(envelope.payload["n"]), "mail": mail}  # type: ignore[call-overload]


def audited_order(envelope: IntentEnvelope, ctx: AgentContext) -> JSONObject:
    """Today's code: an audit step first, not behind a patch."""
    _step(ctx, "audit", "ok")
    return order(envelope, ctx)


def router_of(store: ExecutionStore, *, audited: bool = False) -> IntentRouter:
    """A router over ``store`` whose ``order`` is today's (or the audited) code."""
    router = IntentRouter(store=store)
    router.agent("order", name="order")(audited_order if audited else order)
    return router


def child(where: str, die: str, resume: str | None = None) -> None:
    """Route an order (or resume ``resume``) in a child process killed at ``die``."""
    tests = str(Path(__file__).parents[2])
    action = f"r.resume({resume!r})" if resume else f"r.route_intent({ORDER!r})"
    code = (
        f"import sys; sys.path.insert(0, {tests!r}); "
        "from intentusnet import open_store; "
        "from server.ui.parks import router_of; "
        f"r = router_of(open_store({where!r})); {action}"
    )
    env = {**os.environ, "PARKS_DIE": die}
    died = subprocess.run([sys.executable, "-c", code], env=env, timeout=60)
    assert died.returncode == 9, died


def parked(where: str, reason: str) -> str:
    """An execution of the store at ``where`` parked for ``reason``: its id."""
    store = open_store(where)
    before = {s.execution_id for s in store.list()}
    child(where, "in:email" if reason == "side_effect_in_doubt" else "after:fetch")
    [crashed] = [s.execution_id for s in store.list() if s.execution_id not in before]
    with router_of(store, audited=reason == "nondeterminism") as router:
        if reason == "attempts_exhausted":
            child(where, "after:fetch", resume=crashed)
            recovery = Recovery(router, grace=0, max_attempts=1)
            [outcome] = [
                o for o in recovery.run_once().outcomes if o.action == "parked"
            ]
            assert outcome.reason == reason, outcome
            found = str(outcome.resumed_as)
        else:
            answer = router.resume(crashed)
            assert answer.error is not None
            assert answer.error.details["reason"] == reason, answer.error
            found = str(answer.metadata.execution_id)
    store.close()
    return found
