"""What an LLM API answered, read from a recorded response for people to compare.

:func:`answer_text` reads the text of OpenAI's chat, completions and responses
APIs and of Anthropic's messages API, whole or streamed as server-sent events;
any other body is shown as it is. :func:`answer_body` is the body as JSON, for
the paths where two answers differ.
"""

from __future__ import annotations

from .._util.jsonvalue import JSONObject, JSONValue, as_str
from .usage import event_data, loaded, recorded_content_type


def _body_text(response: JSONObject) -> str:
    body = response.get("body")
    if not isinstance(body, str):
        return ""
    return body if response.get("bodyEncoding") == "utf-8" else f"(base64) {body}"


def _streamed(response: JSONObject) -> bool:
    return (recorded_content_type(response) or "").startswith("text/event-stream")


def answer_body(response: JSONObject) -> JSONValue:
    """The response body as JSON, ``None`` when it is not (a stream, say)."""
    if _streamed(response):
        return None
    return loaded(_body_text(response).encode("utf-8"))


def answer_text(response: JSONObject) -> str:
    """The text the model answered, or the body as recorded when none is found."""
    text = _body_text(response)
    if _streamed(response):
        parts = [_delta(loaded(data)) for data in event_data(text.encode("utf-8"))]
        found = "".join(p for p in parts if p)
    else:
        body = answer_body(response)
        found = _whole(body) if isinstance(body, dict) else ""
    return found or text


def _whole(body: JSONObject) -> str:
    """The text of a whole answer: OpenAI's choices or output, Anthropic's content."""
    texts = [
        _text_at(choice.get("message"), "content") or _text_at(choice, "text")
        for choice in _items(body.get("choices"))
    ]
    for item in _items(body.get("output")):
        texts += [_text_at(c, "text") for c in _items(item.get("content"))]
    texts += [_text_at(c, "text") for c in _items(body.get("content"))]
    return "\n".join(t for t in texts if t)


def _delta(event: JSONValue) -> str | None:
    """The text one streamed event adds."""
    if not isinstance(event, dict):
        return None
    for choice in _items(event.get("choices")):
        return _text_at(choice.get("delta"), "content") or _text_at(choice, "text")
    delta = event.get("delta")
    if event.get("type") == "response.output_text.delta" and isinstance(delta, str):
        return delta
    return _text_at(delta, "text")  # Anthropic's content_block_delta


def _text_at(value: JSONValue, key: str) -> str | None:
    """``value[key]`` when ``value`` is an object and that is a text."""
    return as_str(value.get(key)) if isinstance(value, dict) else None


def _items(value: JSONValue) -> list[JSONObject]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []
