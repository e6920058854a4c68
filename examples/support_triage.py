"""A support-ticket triage agent whose code changes between releases.

docs/regression.md records a few tickets with release 1, then re-runs them all
(``intentusnet rerun --all``) against later releases to see what changed:

- release 1 (the default): the model labels the ticket, the knowledge base is
  searched for the label, and the priority follows the model's urgency;
- release 2 (``TRIAGE_RELEASE=2``): billing tickets are always high priority,
  so the answer to a low-urgency billing ticket changes;
- release 3 (``TRIAGE_RELEASE=3``): bug reports also get a summary from the
  model, a call no recording holds: those records diverge.

The model and the knowledge base are local fakes; the router records to
``intentusnet.open_store()`` (``--store`` or ``INTENTUSNET_STORE``)::

    intentusnet run --app support_triage:router ticket.json
"""

from __future__ import annotations

import os

from intentusnet import AgentContext, IntentEnvelope, IntentRouter, open_store, step

RELEASE = int(os.environ.get("TRIAGE_RELEASE", "1"))


@step("llm.classify")
def classify(text: str) -> dict[str, object]:
    """A stand-in for a model labelling the ticket."""
    lowered = text.lower()
    category = "billing" if "invoice" in lowered else "bug"
    if "password" in lowered:
        category = "account"
    return {"category": category, "urgency": 4 if "now" in lowered else 1}


@step("kb.search")
def search(category: str) -> dict[str, object]:
    """The knowledge base articles for a category."""
    return {"articles": [f"kb/{category}/start-here"]}


@step("llm.summarize")
def summarize(text: str) -> str:
    """A stand-in for a model summarising the ticket."""
    return text[:24]


router = IntentRouter(store=open_store())


@router.agent("ticket.triage", name="triage")
def triage(envelope: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
    """Label the ticket, find articles, set a priority."""
    text = str(envelope.payload["text"])
    label = classify(text)
    found = search(str(label["category"]))
    urgent = int(str(label["urgency"])) >= 3
    if RELEASE >= 2 and label["category"] == "billing":
        urgent = True  # release 2: billing is always urgent
    answer: dict[str, object] = {
        "category": label["category"],
        "priority": "high" if urgent else "normal",
        "articles": found["articles"],
    }
    if RELEASE >= 3 and label["category"] == "bug":
        answer["summary"] = summarize(text)  # release 3: a new model call
    return answer
