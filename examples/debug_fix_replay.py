"""Debug, fix and re-run a failed execution without calling anything twice.

A small CRM pipeline qualifies an inbound lead: it looks the sender up in the
CRM, sends an acknowledgement e-mail (a side effect), and scores the contact
with a (local, fake) model. For a sender the CRM does not know, the lookup
returns None and scoring fails. The walk-through:

1. route the request: it fails;
2. ``explain`` (``intentusnet debug ID``) names the root cause: the lookup;
3. fix the lookup (here: flip ``FIXED``, which makes unknown senders new leads);
4. ``rerun(..., RerunOptions(from_root_cause=True))`` (``intentusnet rerun ID
   --from-root-cause``):
   the fixed lookup runs again, the e-mail is served from the record (it is
   not sent again) and scoring runs on the lookup's new answer;
5. ``diff_records`` (``intentusnet diff A B``) shows where the runs part ways.

Resuming from the failure (``from_failure=True``) would not do: it serves the
lookup's recorded None, so the fixed lookup never runs and scoring fails again.

Run: python examples/debug_fix_replay.py

The module is also an application for the command line: ``router`` records to
``$CRM_STORE``, ``CRM_FIXED=1`` turns the fix on and ``CRM_VERSION`` sets the
agent's version (a configuration change ``debug`` and ``diff`` report), e.g.::

    CRM_STORE=/tmp/crm CRM_FIXED=1 intentusnet --store /tmp/crm \\
        rerun last --app debug_fix_replay:router --from-root-cause
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
    JSONObject,
    ReplayEngine,
    RerunOptions,
    diff_records,
    explain,
    rerun,
    step,
)

#: The fix. False reproduces the bug.
FIXED = os.environ.get("CRM_FIXED") == "1"
#: What the outside world saw: e-mails sent, CRM lookups, model calls.
MAILBOX: list[dict[str, str]] = []
CALLS = {"crm": 0, "model": 0}

CRM = {"ada@example.com": {"name": "Ada", "company": "Engines Ltd", "employees": 120}}


@step("crm.lookup")
def lookup(email: str) -> dict[str, object] | None:
    """The CRM's record of a contact; None for a sender it does not know."""
    CALLS["crm"] += 1
    contact = CRM.get(email)
    if contact is None and FIXED:  # the fix: an unknown sender is a new lead
        return {"name": email.split("@")[0], "company": None, "employees": 0}
    return contact


def fake_model(prompt: str) -> dict[str, object]:
    """A stand-in for an LLM call: deterministic, local, counted."""
    CALLS["model"] += 1
    employees = int(prompt.rsplit("employees=", 1)[1])
    return {"score": min(99, 20 + employees // 2), "model": "fake-scorer-1"}


@step("crm.score")
def score(contact: dict[str, object] | None) -> dict[str, object]:
    """Score a contact with the model."""
    assert contact is not None, "contact required"
    return fake_model(f"Score this lead: employees={contact['employees']}")


@step("email.send", side_effect=True)
def send_email(to: str, subject: str) -> dict[str, str]:
    """Send an e-mail (a side effect: a re-run must never send it again)."""
    MAILBOX.append({"to": to, "subject": subject})
    return {"messageId": f"msg-{len(MAILBOX)}"}


def qualify(envelope: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
    """The pipeline: look up, acknowledge, score."""
    email = str(envelope.payload["email"])
    contact = lookup(email)
    receipt = send_email(to=email, subject="Thanks, we received your request")
    result = score(contact)
    return {"email": email, "score": result["score"], "ack": receipt["messageId"]}


def build_router(store_path: str | Path | None) -> IntentRouter:
    """A router recording to the store at ``store_path`` (none: no recording)."""
    store = None if store_path is None else FileExecutionStore(store_path)
    router = IntentRouter(store=store)
    # CRM_VERSION plays a deployment of a new version of the agent
    version = os.environ.get("CRM_VERSION", "1.0")
    router.agent("crm.qualify", name="qualifier", version=version)(qualify)
    return router


#: For the command line (``--app debug_fix_replay:router``).
router = build_router(os.environ.get("CRM_STORE"))


def main() -> None:
    """Walk the loop: fail, explain, fix, re-run from the root cause, diff."""
    global FIXED
    root = Path(tempfile.mkdtemp(prefix="crm-"))
    store = FileExecutionStore(root)
    with build_router(root) as app:
        request: JSONObject = {
            "intent": {"name": "crm.qualify"},
            "payload": {"email": "grace@x.io"},
        }
        failed = app.route_intent(request)
        failed_id = str(failed.metadata.execution_id)
        assert failed.error is not None
        print(f"1. {failed_id} {failed.status}: {failed.error.message}")

        why = explain(store.load(failed_id))
        print(f"2. intentusnet --store {root} debug {failed_id}\n   {why.summary}")

        FIXED = True
        print("3. fixed the lookup: unknown senders become new leads")

        before = dict(CALLS), len(MAILBOX)
        result = rerun(
            ReplayEngine.from_store(store, failed_id),
            app,
            RerunOptions(from_root_cause=True),
        )
        print(
            f"4. intentusnet --store {root} rerun {failed_id} --app ... "
            f"--from-root-cause\n   {result.execution_id} {result.response.status}: "
            f"{result.response.payload}\n   served {[s.name for s in result.served]}, "
            f"ran {[s.name for s in result.ran]}; e-mails sent: {len(MAILBOX)} "
            f"(before: {before[1]}); CRM lookups: {CALLS['crm']} "
            f"(before: {before[0]['crm']})"
        )

        assert result.record is not None
        diff = diff_records(store.load(failed_id), result.record)
        print(f"5. intentusnet --store {root} diff {failed_id} {result.execution_id}")
        for entry in diff.entries:
            mark = "  <- deviation point" if entry.deviation_point else ""
            print(f"   {entry.kind:<16} {entry.detail}{mark}")
    store.close()


if __name__ == "__main__":
    main()
