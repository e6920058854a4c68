"""Token usage read from an LLM API's answer: what a call cost, so a hit saves it.

:func:`read_usage` recognises the request by its path, so it works whichever
host serves the API (the vendor, a proxy, a local server): ``/chat/completions``,
``/completions``, ``/embeddings`` and ``/responses`` as OpenAI's APIs,
``/messages`` as Anthropic's. It reads the answer as JSON or, when streamed, as
server-sent events (OpenAI sends usage in its last chunk only when the request
asked for it with ``stream_options.include_usage``; Anthropic in its
``message_start`` and ``message_delta`` events). An answer it cannot read gives
the counts it found, or ``None``: usage is reporting, never a reason to fail.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, cast
from urllib.parse import urlsplit

import orjson

from .._util.jsonvalue import JSONObject, JSONValue, as_str, wire_form

__all__ = [
    "Usage",
    "api_of",
    "event_data",
    "read_usage",
    "recorded_call_usage",
    "requested_model",
]

#: The operation each API path ending names, and the vendor whose API it is.
_APIS: Final = (
    ("/chat/completions", "openai", "chat"),
    ("/completions", "openai", "text_completion"),
    ("/embeddings", "openai", "embeddings"),
    ("/responses", "openai", "responses"),
    ("/messages", "anthropic", "chat"),
)


@dataclass(frozen=True, slots=True)
class Usage:
    """The tokens one LLM call used, as its answer reported them.

    ``provider`` is ``"openai"`` or ``"anthropic"`` (the API the request spoke,
    told by its path), ``operation`` the GenAI semantic conventions' operation
    name (``chat``, ``text_completion``, ``embeddings``, ``responses``),
    ``model`` the model the request asked for and ``response_model`` the one
    that answered. A count the answer did not report is ``None``.

    Added in 0.1.0.
    """

    provider: str
    operation: str
    model: str | None
    response_model: str | None
    input_tokens: int | None
    output_tokens: int | None

    def as_json(self) -> dict[str, str | int | None]:
        """The usage as a JSON object (the form records and reports carry)."""
        return cast("dict[str, str | int | None]", wire_form(self))


def read_usage(
    path: str, request_body: bytes, response_body: bytes, content_type: str | None
) -> Usage | None:
    """The usage an LLM API's answer reports, or ``None`` if it is not one.

    ``path`` is the request URL's path, ``request_body`` and ``response_body``
    the bodies as sent and received, ``content_type`` the answer's.

    Added in 0.1.0.
    """
    api = api_of(path)
    if api is None:
        return None
    provider, operation = api
    model = requested_model(request_body)
    if content_type is not None and content_type.startswith("text/event-stream"):
        answers = [a for a in map(_object, event_data(response_body)) if a is not None]
    else:
        answer = _object(response_body)
        answers = [answer] if answer is not None else []
    found = _Found()
    for answer in answers:
        found.read(answer)
    if not answers:
        return None
    return Usage(
        provider=provider,
        operation=operation,
        model=model,
        response_model=found.model,
        input_tokens=found.input_tokens,
        output_tokens=found.output_tokens,
    )


def api_of(path: str) -> tuple[str, str] | None:
    """The vendor and operation an LLM API path names, ``None`` for another path.

    ``/v1/chat/completions`` is ``("openai", "chat")``, ``/v1/messages``
    ``("anthropic", "chat")``. Added in 0.1.0.
    """
    found = next((a for a in _APIS if path.rstrip("/").endswith(a[0])), None)
    return None if found is None else (found[1], found[2])


def requested_model(request_body: bytes) -> str | None:
    """The model a JSON request body asks for, if it names one."""
    request = _object(request_body)
    return None if request is None else as_str(request.get("model"))


def recorded_call_usage(request: JSONObject, response: JSONObject) -> Usage | None:
    """The usage of an HTTP call as a record holds it, or ``None``.

    ``request`` is the call's recorded request (``method``, ``url``, ``json``:
    an HTTP step's arguments) and ``response`` its recorded response
    (``headers``, ``body``, ``bodyEncoding``: the step's output). A body kept
    as base64 is not read.
    """
    body = response.get("body")
    if response.get("bodyEncoding") != "utf-8" or not isinstance(body, str):
        return None
    url, sent = request.get("url"), request.get("json")
    return read_usage(
        urlsplit(url).path if isinstance(url, str) else "",
        b"" if sent is None else orjson.dumps(sent),
        body.encode("utf-8"),
        recorded_content_type(response),
    )


def recorded_content_type(response: JSONObject) -> str | None:
    """The content type a recorded response's headers name, if any."""
    pairs = response.get("headers")
    for pair in pairs if isinstance(pairs, list) else []:
        if isinstance(pair, list) and str(pair[0]).lower() == "content-type":
            return str(pair[1])
    return None


class _Found:
    """The model and counts found so far, the later answer's winning."""

    def __init__(self) -> None:
        self.model: str | None = None
        self.input_tokens: int | None = None
        self.output_tokens: int | None = None

    def read(self, answer: JSONObject) -> None:
        # Anthropic's message_start and OpenAI's response.* events wrap the
        # message or response they describe; the rest are the answer itself.
        for key in ("message", "response"):
            inner = answer.get(key)
            if isinstance(inner, dict):
                self.read(inner)
        model = answer.get("model")
        if isinstance(model, str):
            self.model = model
        usage = answer.get("usage")
        if not isinstance(usage, dict):
            return
        for attr, names in (
            ("input_tokens", ("input_tokens", "prompt_tokens")),
            ("output_tokens", ("output_tokens", "completion_tokens")),
        ):
            for name in names:
                count = usage.get(name)
                if isinstance(count, int) and not isinstance(count, bool):
                    setattr(self, attr, count)


def loaded(data: bytes) -> JSONValue:
    """``data`` as JSON, ``None`` when it is not JSON."""
    try:
        parsed: JSONValue = orjson.loads(data)
    except orjson.JSONDecodeError:
        return None
    return parsed


def _object(body: bytes) -> JSONObject | None:
    value = loaded(body)
    return value if isinstance(value, dict) else None


def event_data(body: bytes) -> list[bytes]:
    """The ``data`` of each server-sent event in ``body`` (``[DONE]`` left out).

    Added in 0.1.0.
    """
    datas = []
    for event in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        lines = [
            line[5:].removeprefix(b" ")
            for line in event.split(b"\n")
            if line.startswith(b"data:")
        ]
        data = b"\n".join(lines)
        if data and data != b"[DONE]":
            datas.append(data)
    return datas
