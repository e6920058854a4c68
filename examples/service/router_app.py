"""A router app: a remote summarizer with a local fallback, and an echo agent.

Start the remote agent first (``python agent.py``), then serve this router
(from this directory) with one command::

    intentusnet serve --app router_app:router

The router opens its store with ``open_store()``, so records go where the
command line names the store, a directory or a PostgreSQL URL, and to
``.intentusnet/records`` here when it names none::

    intentusnet --store postgresql://router@db.internal/intentusnet \\
        serve --app router_app:router
"""

from __future__ import annotations

import os

from intentusnet import IntentEnvelope, IntentRouter, RemoteAgent, open_store

router = IntentRouter(store=open_store())

agent_key = os.environ.get("AGENT_KEY")
summarizer = RemoteAgent(
    "summarizer",
    os.environ.get("SUMMARIZER_URL", "http://127.0.0.1:8766/"),
    intents=["summarize"],
    timeout_ms=2_000,
    headers={"Authorization": f"Bearer {agent_key}"} if agent_key else None,
    priority=1,
)
router.register(summarizer.definition, summarizer)


@router.agent("summarize", name="truncate", priority=2)
def truncate(env: IntentEnvelope, ctx: object) -> dict[str, object]:
    """The fallback: the first 40 characters, when the summarizer is down."""
    return {"summary": str(env.payload.get("text", ""))[:40], "by": "truncate"}


@router.agent("echo", name="echo")
async def echo(env: IntentEnvelope, ctx: object) -> dict[str, object]:
    """Answer with the payload."""
    return {"echo": env.payload}
