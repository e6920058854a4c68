"""read_usage: the tokens an OpenAI or Anthropic answer reports, plain or streamed."""

from __future__ import annotations

import json

from intentusnet.integrations.usage import Usage, read_usage

ASK = json.dumps({"model": "gpt-x", "messages": []}).encode()


def sse(*events: object, names: bool = False) -> bytes:
    out = b""
    for event in events:
        if names and isinstance(event, dict):
            out += f"event: {event['type']}\n".encode()
        data = event if isinstance(event, str) else json.dumps(event)
        out += f"data: {data}\n\n".encode()
    return out


def test_openai_chat_completion() -> None:
    """A chat completion gives its provider, models, token counts and JSON form."""
    answer = {
        "model": "gpt-x-2025",
        "usage": {"prompt_tokens": 12, "completion_tokens": 5},
    }
    usage = read_usage(
        "/v1/chat/completions", ASK, json.dumps(answer).encode(), "application/json"
    )
    assert usage == Usage("openai", "chat", "gpt-x", "gpt-x-2025", 12, 5)
    assert usage.as_json() == {
        "provider": "openai",
        "operation": "chat",
        "model": "gpt-x",
        "responseModel": "gpt-x-2025",
        "inputTokens": 12,
        "outputTokens": 5,
    }


def test_openai_stream_reports_usage_in_its_last_chunk_only_when_asked() -> None:
    """A streamed chat completion counts tokens only from a last usage chunk."""
    chunk = {"model": "gpt-x-2025", "choices": [{"delta": {"content": "hi"}}]}
    last = {
        "model": "gpt-x-2025",
        "choices": [],
        "usage": {"prompt_tokens": 7, "completion_tokens": 1},
    }
    streamed = read_usage(
        "/v1/chat/completions", ASK, sse(chunk, last, "[DONE]"), "text/event-stream"
    )
    assert streamed == Usage("openai", "chat", "gpt-x", "gpt-x-2025", 7, 1)
    unasked = read_usage(
        "/v1/chat/completions",
        ASK,
        sse(chunk, "[DONE]"),
        "text/event-stream; charset=utf-8",
    )
    assert unasked == Usage("openai", "chat", "gpt-x", "gpt-x-2025", None, None)


def test_anthropic_message_plain_and_streamed() -> None:
    """An Anthropic message's counts, plain or streamed (the delta's output wins)."""
    ask = json.dumps({"model": "claude-y", "max_tokens": 5}).encode()
    message = {
        "type": "message",
        "model": "claude-y-1",
        "usage": {"input_tokens": 9, "output_tokens": 4},
    }
    assert read_usage(
        "/v1/messages", ask, json.dumps(message).encode(), "application/json"
    ) == Usage("anthropic", "chat", "claude-y", "claude-y-1", 9, 4)
    start = {
        "type": "message_start",
        "message": {**message, "usage": {"input_tokens": 9, "output_tokens": 1}},
    }
    delta = {"type": "message_delta", "delta": {}, "usage": {"output_tokens": 30}}
    body = sse(start, {"type": "content_block_delta"}, delta, names=True)
    assert read_usage(
        "/v1/messages", ask, body.replace(b"\n", b"\r\n"), "text/event-stream"
    ) == Usage("anthropic", "chat", "claude-y", "claude-y-1", 9, 30)


def test_openai_responses_and_embeddings() -> None:
    """A Responses API stream and an embeddings answer give operation and counts."""
    done = {
        "type": "response.completed",
        "response": {
            "model": "gpt-r",
            "usage": {"input_tokens": 3, "output_tokens": 8},
        },
    }
    assert read_usage("/v1/responses", ASK, sse(done), "text/event-stream") == Usage(
        "openai", "responses", "gpt-x", "gpt-r", 3, 8
    )
    emb = {"model": "emb", "usage": {"prompt_tokens": 4, "total_tokens": 4}}
    assert read_usage("/v1/embeddings", ASK, json.dumps(emb).encode(), None) == Usage(
        "openai", "embeddings", "gpt-x", "emb", 4, None
    )


def test_other_paths_and_unreadable_answers_give_none() -> None:
    """Other paths and unreadable answers give None; badly typed fields are None."""
    assert read_usage("/v1/models", ASK, b"{}", "application/json") is None
    assert read_usage("/v1/messages", b"", b"<html>", "text/html") is None
    assert read_usage("/v1/messages", b"not json", b"[1, 2]", None) is None
    odd = {"model": 5, "usage": {"input_tokens": "many", "output_tokens": True}}
    assert read_usage("/v1/messages", b"[]", json.dumps(odd).encode(), None) == Usage(
        "anthropic", "chat", None, None, None, None
    )
