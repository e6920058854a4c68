"""Stores holding LLM calls: the real OpenAI and Anthropic SDKs, through the
recording transports, against the fake API on 127.0.0.1.

``record_calls`` makes the calls and returns what a savings report over the
store must say, worked out from the fake's own token counts (``tokens``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import anthropic
import httpx
import httpx2
import openai
from integrations.fakeapi import API_KEY, tokens

from intentusnet.integrations import httpx as via_httpx
from intentusnet.integrations import httpx2 as via_httpx2
from intentusnet.store import ExecutionStore

TIMEOUT = 10


@dataclass
class Expected:
    """What one provider's model must add up to."""

    hits: int = 0
    misses: int = 0
    spent: list[int] = field(default_factory=lambda: [0, 0])
    avoided: list[int] = field(default_factory=lambda: [0, 0])


def ask(sdk: str, url: str, store: ExecutionStore, model: str, prompt: str) -> str:
    """One call through a new client and transport (closed after): the text."""
    if sdk == "openai":
        transport = via_httpx.RecordingTransport(store)
        with httpx.Client(transport=transport, timeout=TIMEOUT) as http:
            client = openai.OpenAI(
                base_url=f"{url}/v1", api_key=API_KEY, http_client=http, max_retries=0
            )
            answer = client.chat.completions.create(
                model=model, messages=[{"role": "user", "content": prompt}]
            )
            return answer.choices[0].message.content or ""
    transport2 = via_httpx2.RecordingTransport(store)
    with httpx2.Client(transport=transport2, timeout=TIMEOUT) as http2:
        client2 = anthropic.Anthropic(
            base_url=url, api_key=API_KEY, http_client=http2, max_retries=0
        )
        message = client2.messages.create(
            model=model, max_tokens=16, messages=[{"role": "user", "content": prompt}]
        )
        block = message.content[0]
        return block.text if block.type == "text" else ""


def record_calls(
    store: ExecutionStore, url: str, calls: Sequence[tuple[str, str, str]]
) -> dict[tuple[str, str], Expected]:
    """Make each (sdk, model, prompt) call in turn; the report expected, by model.

    The first call of a (sdk, model, prompt) is a miss, every repeat a hit.
    """
    expected: dict[tuple[str, str], Expected] = {}
    seen: set[tuple[str, str, str]] = set()
    for sdk, model, prompt in calls:
        text = ask(sdk, url, store, model, prompt)
        used = tokens({"messages": [{"content": prompt}]}, text)
        row = expected.setdefault((sdk, model), Expected())
        if (sdk, model, prompt) in seen:
            row.hits += 1
            row.avoided = [a + u for a, u in zip(row.avoided, used, strict=True)]
        else:
            seen.add((sdk, model, prompt))
            row.misses += 1
            row.spent = [s + u for s, u in zip(row.spent, used, strict=True)]
    return expected
