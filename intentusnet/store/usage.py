"""The LLM token usage a recorded answer carries, as the catalog keeps it.

An answer whose payload holds a ``usage`` object (the HTTP transports write one
for every OpenAI or Anthropic answer; see docs/cache.md, "What caching saved")
is an LLM call. The file store's catalog keeps its provider, model and token
counts in the record's row (``usage``, the JSON text of :class:`RecordedUsage`),
so that a savings report reads rows, not record files, and adds them up in running
totals per provider and model (:class:`UsageTotal`).
"""

from __future__ import annotations

from typing import NamedTuple

import orjson

from .._util.jsonvalue import JSONObject

__all__ = [
    "RecordedUsage",
    "UsageTotal",
    "recorded_usage",
    "usage_from_text",
    "usage_text",
]


class RecordedUsage(NamedTuple):
    """The usage kept in one record: who, which model, how many tokens.

    ``model`` is the model asked for, else the one that answered; a count the
    answer did not report is 0.
    """

    provider: str
    model: str | None
    input_tokens: int
    output_tokens: int


class UsageTotal(NamedTuple):
    """The usage of every record of one provider and model, added up.

    ``calls`` counts the completed records whose answers carry usage.
    """

    provider: str
    model: str | None
    calls: int
    input_tokens: int
    output_tokens: int


def recorded_usage(response: JSONObject | None) -> RecordedUsage | None:
    """The usage a recorded answer (wire form) carries in its payload, if sound."""
    payload = None if response is None else response.get("payload")
    usage = payload.get("usage") if isinstance(payload, dict) else None
    if not isinstance(usage, dict):
        return None
    provider = usage.get("provider")
    if not isinstance(provider, str):
        return None
    model = usage.get("model")
    if not isinstance(model, str):
        model = usage.get("responseModel")
    counts = [usage.get("inputTokens"), usage.get("outputTokens")]
    numbers = [c for c in counts if isinstance(c, int) and not isinstance(c, bool)]
    given = sum(c is not None for c in counts)
    if len(numbers) != given or min(numbers, default=0) < 0:
        return None
    input_tokens, output_tokens = (c if isinstance(c, int) else 0 for c in counts)
    return RecordedUsage(
        provider,
        model if isinstance(model, str) else None,
        input_tokens,
        output_tokens,
    )


def usage_text(response: JSONObject | None) -> str | None:
    """The catalog's ``usage`` column for a recorded answer (None: no usage)."""
    found = recorded_usage(response)
    return None if found is None else orjson.dumps(list(found)).decode()


def usage_from_text(text: str | None) -> RecordedUsage | None:
    """The usage of a catalog ``usage`` column (None when it holds none)."""
    if text is None:
        return None
    provider, model, input_tokens, output_tokens = orjson.loads(text)
    return RecordedUsage(provider, model, input_tokens, output_tokens)
