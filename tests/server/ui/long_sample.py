"""A store whose content is long: what a real store holds, not what fits a table.

Long intent and agent names (one with no place to break), a failed run whose
error runs to hundreds of characters, an execution parked ``needs_attention``
(its process killed inside a side effect, then resumed), and agents whose LLM
calls cost millionths of a dollar (5.85e-06 USD a call at :data:`PRICES`),
served by the fake API of ``llm_sample.py`` behind the recording transport.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
    JSONObject,
)
from intentusnet.integrations.httpx import RecordingTransport

from .llm_sample import fake_api

#: The price table: 39 input tokens of ``nano`` cost 5.85e-06 USD.
PRICES: JSONObject = {
    "currency": "USD",
    "models": {"nano": {"input": 0.15, "output": 0.60}},
}
#: One call's cost as every page writes it, and two calls'.
CALL_COST = "0.0000059 USD"
TWO_CALLS_COST = "0.000012 USD"
#: A dotted intent name far longer than any column.
LONG_INTENT = (
    "billing.invoices.reconcile-every-open-invoice-with-the-general-ledger"
    "-and-notify-the-account-owner"
)
#: An intent name with no place to break at all.
UNBROKEN_INTENT = "x" * 40 + "-" + "y" * 60
LONG_AGENT = "ledger-reconciliation-agent-with-a-descriptive-name"
#: The failed run's exception message.
LONG_ERROR = (
    "the ledger service answered 503 for "
    "https://ledger.internal.example/api/v2/accounts/0000-1111-2222-3333/"
    "entries?from=2026-01-01T00:00:00Z&until=2026-12-31T23:59:59Z&page=17 "
    + "after 5 retries; "
    * 12
)


def capture(envelope: IntentEnvelope, ctx: AgentContext) -> JSONObject:
    """Charge a card: a side effect. ``die`` kills the process inside the step."""

    def charge(amount: int) -> JSONObject:
        if envelope.payload.get("die"):
            os._exit(9)  # the process dies: the step's end is never recorded
        return {"charged": amount}

    return ctx.step("payments.charge", {"amount": 20}, charge, side_effect=True)


def die_in_a_side_effect(root: str) -> None:
    """Route a capture whose process dies inside its side effect (run as a child)."""
    store = FileExecutionStore(root)
    router = IntentRouter(store=store)
    router.agent("payments.capture", name="capturer")(capture)
    router.route_intent({"intent": {"name": "payments.capture"}, "payload": {"die": 1}})


def parked_execution(store: FileExecutionStore) -> str:
    """An execution parked side_effect_in_doubt, as a real one gets parked.

    A child process dies inside the charge step; resuming it here finds the
    side effect in doubt and parks it. Returns the parked record's id.
    """
    tests = str(Path(__file__).parents[2])
    code = (
        f"import sys; sys.path.insert(0, {tests!r}); "
        "from server.ui.long_sample import die_in_a_side_effect; "
        f"die_in_a_side_effect({str(store.root)!r})"
    )
    died = subprocess.run([sys.executable, "-c", code], check=False, timeout=60)
    assert died.returncode == 9, died
    [crashed] = [s.execution_id for s in store.list()]
    with IntentRouter(store=store) as router:
        router.agent("payments.capture", name="capturer")(capture)
        return str(router.resume(crashed).metadata.execution_id)


def make_long_store(root: Path) -> dict[str, str]:
    """Record the long executions under ``root``; return their ids by role."""
    store = FileExecutionStore(root)
    transport = RecordingTransport(
        store, mode="record", wrapped=httpx.MockTransport(fake_api)
    )
    http = httpx.Client(transport=transport)

    def reconcile(envelope: IntentEnvelope, ctx: AgentContext) -> JSONObject:
        for _ in range(2):
            http.post(
                "http://llm.test/v1/chat/completions",
                json={
                    "model": "nano",
                    "messages": [{"role": "user", "content": "39/0"}],
                },
            )
        if envelope.payload.get("fail"):
            raise RuntimeError(LONG_ERROR)
        return {"reconciled": True}

    ids: dict[str, str] = {"parked": parked_execution(store)}
    with IntentRouter(store=store) as router:
        router.agent(LONG_INTENT, name=LONG_AGENT)(reconcile)
        router.agent(UNBROKEN_INTENT, name="a" * 80)(lambda env, ctx: {"ok": 1})

        def run(role: str, intent: str, payload: JSONObject) -> None:
            wire: JSONObject = {"intent": {"name": intent}, "payload": payload}
            ids[role] = router.route_intent(wire).metadata.execution_id

        run("unbroken", UNBROKEN_INTENT, {})
        run("failed", LONG_INTENT, {"fail": True})
        run("spent", LONG_INTENT, {"n": 1})
    http.close()
    transport.close()
    store.close()
    return ids
