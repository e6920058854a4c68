"""A store of agents that call an LLM API: tokens, costs, errors and payloads to find.

The API is an ``httpx.MockTransport`` answering as OpenAI's chat completions do,
with the token counts each prompt names, behind the recording transport; the
second run of the same question is served by the transport's cache.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import orjson

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
    JSONObject,
)
from intentusnet.integrations.httpx import RecordingTransport

#: The price table the explorer is started with.
PRICES: JSONObject = {
    "currency": "USD",
    "models": {"gpt-4o-mini": {"input": 0.15, "output": 0.60}},
}
#: An answer's two calls: (input, output) tokens of each.
CALLS = ((100_000, 10_000), (20_000, 10_000))
#: What the first answer spent: 120,000 + 20,000 tokens, at PRICES.
TOKENS = "140,000"
COST = "0.030 USD"
#: The error text of the failed run.
ERROR = "AGENT_ERROR"


def fake_api(request: httpx.Request) -> httpx.Response:
    body = orjson.loads(request.content)
    prompt, completion = (int(n) for n in body["messages"][0]["content"].split("/"))
    return httpx.Response(
        200,
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [
                {"index": 0, "message": {"role": "assistant", "content": "ok"}}
            ],
            "usage": {"prompt_tokens": prompt, "completion_tokens": completion},
        },
    )


def write_prices(where: Path) -> Path:
    """Write :data:`PRICES` to a file; return its path."""
    path = where / "prices.json"
    path.write_bytes(orjson.dumps(PRICES))
    return path


def make_llm_store(root: Path, padding: int = 0) -> dict[str, str]:
    """Record the sample executions under ``root``; return their ids by role.

    ``padding`` more runs of another intent come first (older), so a list has
    pages.
    """
    store = FileExecutionStore(root)
    transport = RecordingTransport(
        store, mode="cache", wrapped=httpx.MockTransport(fake_api)
    )
    http = httpx.Client(transport=transport)

    def answer(envelope: IntentEnvelope, ctx: AgentContext) -> JSONObject:
        for prompt, completion in CALLS:
            http.post(
                "http://llm.test/v1/chat/completions",
                json={
                    "model": str(envelope.payload.get("model", "gpt-4o-mini")),
                    "messages": [{"role": "user", "content": f"{prompt}/{completion}"}],
                },
            )
        if envelope.payload.get("fail"):
            raise RuntimeError("the model's answer did not parse")
        return {"answer": "ok"}

    ids: dict[str, str] = {}
    with IntentRouter(store=store) as router:
        router.agent("chat.answer", name="answerer")(answer)
        router.agent("filler", name="filler")(lambda env, ctx: {"n": env.payload})
        for n in range(padding):
            router.route_intent({"intent": {"name": "filler"}, "payload": {"n": n}})

        def run(role: str, payload: JSONObject) -> None:
            wire: JSONObject = {"intent": {"name": "chat.answer"}, "payload": payload}
            ids[role] = router.route_intent(wire).metadata.execution_id

        run("spent", {"customer": {"email": "ada@example.com"}, "tags": ["vip"]})
        run("cached", {"customer": {"email": "bob@example.com"}, "tags": []})
        run("failed", {"customer": {"email": "eve@example.com"}, "fail": True})
        run("unpriced", {"customer": {"email": "max@example.com"}, "model": "o-9"})
    http.close()
    transport.close()
    store.close()
    return ids
