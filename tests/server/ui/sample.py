"""A small store for the explorer's tests: every kind of bar and a hostile payload."""

from __future__ import annotations

import time
from pathlib import Path

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
    JSONObject,
    ReplayCache,
)

#: A payload that would run script if it were rendered as HTML.
HOSTILE = (
    '<script>window.__pwned = true</script><img src=x onerror="window.__pwned = true">'
)


def _qualify(envelope: IntentEnvelope, ctx: AgentContext) -> JSONObject:
    email = str(envelope.payload["email"])
    contact = ctx.step("crm.lookup", {"email": email}, lambda email: {"id": len(email)})
    time.sleep(0.005)
    child = ctx.route({"intent": {"name": "echo"}, "payload": {"from": "qualify"}})
    score = ctx.step("crm.score", {"contact": contact}, lambda contact: {"score": 3})
    return {"score": score, "child": child.status}


def _broken(envelope: IntentEnvelope, ctx: AgentContext) -> JSONObject:
    time.sleep(0.003)
    raise ConnectionError("model endpoint refused the connection")


def make_store(root: Path) -> dict[str, str]:
    """Record the sample executions under ``root``; return their ids by role."""
    store = FileExecutionStore(root)
    ids: dict[str, str] = {}
    with IntentRouter(store=store) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
        router.agent("crm.qualify", name="qualifier")(_qualify)
        router.agent("summarize", name="flaky", priority=1)(_broken)
        router.agent("summarize", name="short", priority=2)(
            lambda env, ctx: {"summary": str(env.payload.get("text", ""))[:10]}
        )
        for n in range(3):
            ids[f"echo{n}"] = router.route_intent(
                {"intent": {"name": "echo"}, "payload": {"n": n}}
            ).metadata.execution_id
        ids["hostile"] = router.route_intent(
            {
                "intent": {"name": "echo"},
                "payload": {"text": HOSTILE, "long": "x" * 5000},
            }
        ).metadata.execution_id
        ids["fallback"] = router.route_intent(
            {
                "intent": {"name": "summarize"},
                "payload": {"text": "Routes intents. Records them."},
                "routing": {"strategy": "FALLBACK"},
            }
        ).metadata.execution_id
        ids["failed"] = router.route_intent(
            {
                "intent": {"name": "summarize"},
                "payload": {"text": "direct"},
                "routing": {"targetAgent": "flaky"},
            }
        ).metadata.execution_id
        ids["steps"] = router.route_intent(
            {"intent": {"name": "crm.qualify"}, "payload": {"email": "a@x.io"}}
        ).metadata.execution_id
        ids["steps2"] = router.route_intent(
            {"intent": {"name": "crm.qualify"}, "payload": {"email": "b@x.io"}}
        ).metadata.execution_id
    # The same envelope twice through a replay cache: one record, one hit on it.
    with IntentRouter(store=store, cache=ReplayCache()) as cached:
        cached.agent("lookup", name="lookup")(lambda env, ctx: {"found": True})
        envelope: JSONObject = {"intent": {"name": "lookup"}, "payload": {"k": 1}}
        ids["cached"] = cached.route_intent(envelope).metadata.execution_id
        cached.route_intent(envelope)
    store.close()
    return ids


def record_llm_calls(root: Path) -> dict[str, str]:
    """Record a model call made live, the same call answered by the transport's
    cache, and a plain tool step, under ``root``; return their ids by role.

    The calls go through the real OpenAI SDK and the recording transport to the
    fake API on 127.0.0.1.
    """
    import httpx
    import openai
    from integrations.fakeapi import API_KEY, FakeAPI

    from intentusnet.integrations import httpx as via_httpx

    store = FileExecutionStore(root)
    ids: dict[str, str] = {}
    with FakeAPI() as api, IntentRouter(store=store) as router:
        transport = via_httpx.RecordingTransport(store)
        http = httpx.Client(transport=transport, timeout=10)
        client = openai.OpenAI(
            base_url=f"{api.url}/v1", api_key=API_KEY, http_client=http, max_retries=0
        )

        def chat(envelope: IntentEnvelope, ctx: AgentContext) -> JSONObject:
            answer = client.chat.completions.create(
                model="model-a", messages=[{"role": "user", "content": "hello there"}]
            )
            return {"text": answer.choices[0].message.content}

        router.agent("chat", name="chat")(chat)
        router.agent("tool", name="tool")(
            lambda env, ctx: ctx.step("lookup", {"k": 1}, lambda k: {"v": k})
        )
        for role, n in (("live", 1), ("hit", 2)):
            ids[role] = router.route_intent(
                {"intent": {"name": "chat"}, "payload": {"n": n}}
            ).metadata.execution_id
        ids["tool"] = router.route_intent(
            {"intent": {"name": "tool"}}
        ).metadata.execution_id
        http.close()
    store.close()
    return ids
