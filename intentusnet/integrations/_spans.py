"""What the OpenTelemetry integration's spans are called and carry.

The names and ``gen_ai.*`` attributes follow the OpenTelemetry GenAI semantic
conventions (``invoke_agent AGENT``, ``execute_tool TOOL``, ``chat MODEL``);
``openinference.span.kind`` (``CHAIN``, ``AGENT``, ``TOOL``, ``LLM``) is
OpenInference's, which Arize Phoenix reads, as it reads ``llm.*`` token counts.
A call answered from a record spent nothing: it is marked a hit and its
tokens are the ones it saved (``intentusnet.cache.saved_*``), never usage.
Inputs and outputs are read from the records, so they are redacted as the
records are (``content_of_execution``, ``content_of_call``). This module makes
plain attribute dicts; it does not import OpenTelemetry.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, TypeAlias
from urllib.parse import urlsplit

import orjson

from ._answers import answer_body
from .usage import Usage, api_of, read_usage, requested_model

if TYPE_CHECKING:
    from .._util.jsonvalue import JSONValue
    from ..record.model import ExecutionRecord
    from ..routing.seams import ObservedCall, ObservedExecution

__all__ = [
    "Attributes",
    "attempt_span",
    "call_attributes",
    "call_name",
    "call_usage",
    "content_of_call",
    "content_of_execution",
    "execution_span",
    "http_step_name",
    "step_span",
    "tool_attributes",
]

#: A span's attributes, as this integration sets them.
Attributes: TypeAlias = dict[str, str | int | bool]

#: OpenInference's span kind attribute (Phoenix shows it).
KIND: Final = "openinference.span.kind"
#: Operations ``read_usage`` names that the GenAI conventions call ``chat``
#: (OpenAI's Responses API answers a conversation as chat completions do).
_CHAT_OPERATIONS: Final = frozenset({"chat", "responses"})


def execution_span(execution: ObservedExecution) -> tuple[str, Attributes]:
    """An execution's span name and attributes."""
    attributes: Attributes = {
        KIND: "CHAIN",
        "intentusnet.execution_id": execution.execution_id,
        "intentusnet.intent": execution.intent,
        "intentusnet.intent_version": execution.intent_version,
        "intentusnet.cache": execution.cache,
        "intentusnet.cache.hit": execution.cache == "hit",
    }
    if execution.envelope_hash is not None:
        attributes["intentusnet.envelope_hash"] = execution.envelope_hash
    if execution.parent_execution_id is not None:
        attributes["intentusnet.parent_execution_id"] = execution.parent_execution_id
    return f"intent {execution.intent}", attributes


def attempt_span(execution_id: str, agent: str, attempt: int) -> tuple[str, Attributes]:
    """An agent attempt's span name and attributes (``invoke_agent``)."""
    return f"invoke_agent {agent}", {
        KIND: "AGENT",
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": agent,
        "intentusnet.execution_id": execution_id,
        "intentusnet.agent": agent,
        "intentusnet.attempt": attempt,
    }


def step_span(
    execution_id: str, step: int, name: str, agent: str, attempt: int
) -> tuple[str, Attributes]:
    """A step's span name and attributes (``execute_tool``, the step a tool)."""
    return f"execute_tool {name}", {
        **tool_attributes(name),
        "intentusnet.execution_id": execution_id,
        "intentusnet.step": step,
        "intentusnet.step.name": name,
        "intentusnet.agent": agent,
        "intentusnet.attempt": attempt,
    }


def tool_attributes(name: str) -> Attributes:
    """What makes a span a tool's: the kind and the GenAI operation and name."""
    return {
        KIND: "TOOL",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": name,
    }


def http_step_name(call: ObservedCall) -> str:
    """The step an agent's HTTP call is recorded as (``http METHOD HOSTPATH``)."""
    url = urlsplit(call.url)
    return f"http {call.method} {url.netloc}{url.path}"


def call_usage(call: ObservedCall) -> Usage | None:
    """What an HTTP call to an LLM API used; ``None`` when it is not one.

    A streamed answer passed through to the client has no body yet: its model
    is the one asked for, and its counts are not known.
    """
    path = urlsplit(call.url).path
    found = read_usage(path, call.request_body, call.response_body, call.content_type)
    if found is not None:
        return found
    api = api_of(path)
    if api is None:
        return None
    model = requested_model(call.request_body)
    return Usage(api[0], api[1], model, None, None, None)


def call_name(call: ObservedCall, usage: Usage | None) -> str:
    """An HTTP call's span name: ``chat MODEL`` for an LLM call, else the method."""
    if usage is None:
        return call.method
    name = _operation(usage)
    return name if usage.model is None else f"{name} {usage.model}"


def call_attributes(call: ObservedCall, usage: Usage | None) -> Attributes:
    """An HTTP call's attributes; an LLM call's GenAI and OpenInference ones too.

    A hit's token counts are what it saved, not what it used.
    """
    hit = call.cache == "hit"
    attributes: Attributes = {
        KIND: "TOOL" if usage is None else "LLM",
        "http.request.method": call.method,
        "url.full": call.url,
        "http.response.status_code": call.status,
        "intentusnet.cache": call.cache,
        "intentusnet.cache.hit": hit,
    }
    if usage is None:
        return attributes
    attributes.update(
        {
            # gen_ai.system is the older name of gen_ai.provider.name: both are set
            "gen_ai.provider.name": usage.provider,
            "gen_ai.system": usage.provider,
            "gen_ai.operation.name": _operation(usage),
            "llm.system": usage.provider,
        }
    )
    models = {
        "gen_ai.request.model": usage.model,
        "gen_ai.response.model": usage.response_model,
        "llm.model_name": usage.response_model or usage.model,
    }
    attributes.update({k: v for k, v in models.items() if v is not None})
    if hit:
        tokens = {
            "intentusnet.cache.saved_input_tokens": usage.input_tokens,
            "intentusnet.cache.saved_output_tokens": usage.output_tokens,
        }
    else:
        tokens = {
            "gen_ai.usage.input_tokens": usage.input_tokens,
            "gen_ai.usage.output_tokens": usage.output_tokens,
            "llm.token_count.prompt": usage.input_tokens,
            "llm.token_count.completion": usage.output_tokens,
        }
        if usage.input_tokens is not None and usage.output_tokens is not None:
            tokens["llm.token_count.total"] = usage.input_tokens + usage.output_tokens
    attributes.update({k: v for k, v in tokens.items() if v is not None})
    return attributes


def content_of_execution(record: ExecutionRecord) -> Attributes:
    """An execution's input and output as its record holds them (redacted so)."""
    attributes = _value("input", record.envelope.get("payload"))
    answer = record.final_response
    if answer is not None:
        error = answer.get("error")
        attributes.update(
            _value("output", answer.get("payload") if error is None else error)
        )
    return attributes


def content_of_call(record: ExecutionRecord) -> Attributes:
    """An LLM call's messages as its record holds them (redacted so).

    ``gen_ai.input.messages`` and ``gen_ai.output.messages`` in the
    conventions' form (role and text parts), from an OpenAI- or
    Anthropic-style body; ``input.value`` and ``output.value`` the request's
    and the answer's JSON bodies, for OpenInference. A body that is not JSON
    (an event stream) is left out.
    """
    answer = record.final_response
    payload = None if answer is None else answer.get("payload")
    if not isinstance(payload, dict):
        payload = {}
    request = payload.get("request") or record.envelope.get("payload")
    sent = request.get("json") if isinstance(request, dict) else None
    response = payload.get("response")
    got = answer_body(response) if isinstance(response, dict) else None
    attributes: Attributes = {}
    for side, body, read in (
        ("input", sent, _input_messages),
        ("output", got, _output_messages),
    ):
        if isinstance(body, dict):
            attributes.update(_value(side, body))
            messages = read(body)
            if messages:
                attributes[f"gen_ai.{side}.messages"] = _json(messages)
    return attributes


def _operation(usage: Usage) -> str:
    return "chat" if usage.operation in _CHAT_OPERATIONS else usage.operation


def _value(which: str, value: JSONValue | None) -> Attributes:
    """OpenInference's ``input.value``/``output.value`` of a JSON value."""
    if value is None:
        return {}
    return {f"{which}.value": _json(value), f"{which}.mime_type": "application/json"}


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


def _parts(content: JSONValue) -> list[dict[str, JSONValue]]:
    """A message's content as the conventions' parts (text blocks kept as text)."""
    if isinstance(content, str):
        return [{"type": "text", "content": content}]
    parts: list[dict[str, JSONValue]] = []
    if isinstance(content, list):
        for block in content:
            if isinstance(block, dict) and isinstance(block.get("text"), str):
                parts.append({"type": "text", "content": block["text"]})
    return parts


def _input_messages(sent: dict[str, JSONValue]) -> list[dict[str, JSONValue]]:
    """The request's messages (chat completions, messages; its system prompt)."""
    found: list[dict[str, JSONValue]] = []
    system = sent.get("system")
    if system is not None:
        found.append({"role": "system", "parts": list(_parts(system))})
    messages = sent.get("messages")
    for message in messages if isinstance(messages, list) else []:
        if isinstance(message, dict):
            role = str(message.get("role", "user"))
            found.append({"role": role, "parts": list(_parts(message.get("content")))})
    return found


def _output_messages(got: dict[str, JSONValue]) -> list[dict[str, JSONValue]]:
    """The answer's messages: OpenAI's choices, or Anthropic's content."""
    choices = got.get("choices")
    if isinstance(choices, list):
        found: list[dict[str, JSONValue]] = []
        for choice in choices:
            message = choice.get("message") if isinstance(choice, dict) else None
            if isinstance(message, dict) and isinstance(choice, dict):
                found.append(
                    {
                        "role": str(message.get("role", "assistant")),
                        "parts": list(_parts(message.get("content"))),
                        "finish_reason": choice.get("finish_reason"),
                    }
                )
        return found
    if "content" in got:
        return [
            {
                "role": str(got.get("role", "assistant")),
                "parts": list(_parts(got.get("content"))),
                "finish_reason": got.get("stop_reason"),
            }
        ]
    return []
