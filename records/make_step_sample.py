"""Make ``steps.jsonl``: a failed record with steps, the golden sample of their format.

The CRM pipeline of ``examples/debug_fix_replay.py`` in miniature: a lookup that
returns None, a side-effect e-mail, a scoring step that fails. Tests load it, explain
it and re-run it, so a change that can no longer read or serve recorded steps fails
CI. Re-run only on purpose (the record is golden):

    python records/make_step_sample.py
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
    JSONObject,
)

HERE = Path(__file__).resolve().parent
ENVELOPE: JSONObject = {
    "intent": {"name": "crm.qualify"},
    "payload": {"email": "grace@x.io"},
}


def qualify(envelope: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
    """Look the sender up, acknowledge, score: the score step fails on None."""
    email = str(envelope.payload["email"])
    contact = ctx.step("crm.lookup", {"email": email}, lambda email: None)
    ctx.step(
        "email.send",
        {"to": email, "subject": "Thanks"},
        lambda to, subject: {"messageId": "msg-1"},
        side_effect=True,
    )

    def score(contact: dict[str, object] | None) -> dict[str, object]:
        if contact is None:
            raise AssertionError("contact required")
        return {"score": 1}

    return ctx.step("crm.score", {"contact": contact}, score)


def main() -> None:
    """Make the sample."""
    with tempfile.TemporaryDirectory() as tmp:
        store = FileExecutionStore(tmp)
        with IntentRouter(store=store) as router:
            router.agent("crm.qualify", name="qualifier")(qualify)
            response = router.route_intent(ENVELOPE)
        store.close()
        execution_id = response.metadata.execution_id
        source = next(Path(tmp).glob(f"*/{execution_id}.jsonl"))
        shutil.copyfile(source, HERE / "steps.jsonl")
    (HERE / "steps.envelope.json").write_text(json.dumps(ENVELOPE, indent=2) + "\n")
    print("records/steps.jsonl")


if __name__ == "__main__":
    main()
