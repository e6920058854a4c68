"""A remote agent: a summarizer served over HTTP by ``agent_app``.

Start it (from this directory) with one command::

    python agent.py

It listens on http://127.0.0.1:8766/ ; ``router_app.py`` routes to it.
"""

from __future__ import annotations

import os

import uvicorn

from intentusnet.envelope import IntentEnvelope
from intentusnet.http.agent_app import RemoteContext, agent_app


def summarize(env: IntentEnvelope, ctx: RemoteContext) -> dict[str, object]:
    """Summarize ``payload.text`` as its first sentence (a stand-in for a model)."""
    text = str(env.payload.get("text", ""))
    first = text.split(". ")[0].strip()
    return {"summary": first if first.endswith(".") else first + ".", "by": ctx.agent}


# Set AGENT_KEY to require "Authorization: Bearer <key>" from the router.
app = agent_app(summarize, api_key=os.environ.get("AGENT_KEY") or None)

if __name__ == "__main__":
    uvicorn.run(app, host="127.0.0.1", port=8766)
