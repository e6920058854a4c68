"""The recording core both transports share: the key function option.

Each test runs with the httpx and the httpx2 transport against the fake API on
127.0.0.1, so the one core is held to the same behaviour through both.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest

from intentusnet import (
    FileExecutionStore,
    IntentEnvelope,
    NotCacheable,
    compute_hash,
)
from intentusnet.integrations import httpx as via_httpx
from intentusnet.integrations import httpx2 as via_httpx2

from .fakeapi import API_KEY, FakeAPI

LIBS: dict[str, tuple[Any, Any]] = {
    "httpx": (httpx, via_httpx),
    "httpx2": (httpx2, via_httpx2),
}
HEADERS = {"authorization": f"Bearer {API_KEY}"}


def chat(user: str, prompt: str = "hi") -> dict[str, Any]:
    """A chat completions body whose ``user`` is tracking, not meaning."""
    return {
        "model": "m",
        "messages": [{"role": "user", "content": prompt}],
        "user": user,
    }


def by_model_and_messages(payload: dict[str, Any]) -> dict[str, Any]:
    """A key function: only the URL, the model and the messages count."""
    body = payload["json"]
    return {"url": payload["url"], "model": body["model"], "messages": body["messages"]}


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """The fake API, running."""
    with FakeAPI() as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory."""
    s = FileExecutionStore(tmp_path / "records")
    yield s
    s.close()


@pytest.mark.parametrize("lib", ["httpx", "httpx2"])
def test_key_function_makes_requests_equal(lib, api, store):
    """Requests with equal keys are one request; the hash is the key's."""
    http_lib, module = LIBS[lib]
    transport = module.RecordingTransport(store, key=by_model_and_messages)
    url = f"{api.url}/v1/chat/completions"
    with http_lib.Client(transport=transport, headers=HEADERS) as client:
        first = client.post(url, json=chat("alice"))
        second = client.post(url, json=chat("bob"))
        other = client.post(url, json=chat("alice", "another prompt"))
    assert [r.headers["x-intentusnet-cache"] for r in (first, second, other)] == [
        "miss",
        "hit",
        "miss",
    ]
    assert second.content == first.content
    assert api.hits == 2
    record = store.load(first.headers["x-intentusnet-record"])
    key = by_model_and_messages({"url": url, "json": chat("alice")})
    assert record.envelope["payload"] == {"key": key}
    expected = compute_hash(
        IntentEnvelope.model_validate(
            {"intent": {"name": "http.request"}, "payload": {"key": key}}
        )
    )
    assert record.header.envelope_hash == expected
    # The request itself is recorded beside the answer, with its usage.
    payload = record.final_response["payload"]
    assert payload["request"]["json"]["user"] == "alice"
    assert payload["request"]["method"] == "POST"
    assert payload["usage"]["inputTokens"] == 1


@pytest.mark.parametrize("lib", ["httpx", "httpx2"])
def test_async_transport_takes_the_key_function(lib, api, store):
    """The async transports hash by the key function too."""
    http_lib, module = LIBS[lib]
    url = f"{api.url}/v1/chat/completions"

    async def main() -> list[str]:
        transport = module.AsyncRecordingTransport(store, key=by_model_and_messages)
        async with http_lib.AsyncClient(transport=transport, headers=HEADERS) as c:
            answers = [await c.post(url, json=chat(user)) for user in ("a", "b")]
        return [r.headers["x-intentusnet-cache"] for r in answers]

    assert asyncio.run(asyncio.wait_for(main(), 20)) == ["miss", "hit"]
    assert api.hits == 1


def broken(payload: dict[str, Any]) -> dict[str, Any]:
    """A key function with a bug."""
    return {"model": payload["json"]["no such field"]}


@pytest.mark.parametrize("lib", ["httpx", "httpx2"])
def test_a_failing_key_function_is_a_clear_error(lib, api, store):
    """A key function that raises fails the request, naming it; nothing is sent."""
    http_lib, module = LIBS[lib]
    transport = module.RecordingTransport(store, key=broken)
    url = f"{api.url}/v1/chat/completions"
    with (
        http_lib.Client(transport=transport, headers=HEADERS) as client,
        pytest.raises(NotCacheable) as caught,
    ):
        client.post(url, json=chat("alice"))
    message = str(caught.value)
    assert "the key function broken failed for POST " in message
    assert "/v1/chat/completions: KeyError: 'no such field'" in message
    assert isinstance(caught.value.__cause__, KeyError)
    assert api.hits == 0
    assert store.list() == []


@pytest.mark.parametrize("lib", ["httpx", "httpx2"])
def test_a_key_json_cannot_carry_is_a_clear_error(lib, api, store):
    """A key that is not JSON (a NaN here) is refused with its path."""
    http_lib, module = LIBS[lib]
    transport = module.RecordingTransport(store, key=lambda p: {"x": [float("nan")]})
    with (
        http_lib.Client(transport=transport, headers=HEADERS) as client,
        pytest.raises(NotCacheable, match=r"returned a value that cannot key.*key\.x"),
    ):
        client.post(f"{api.url}/v1/chat/completions", json=chat("a"))
    assert api.hits == 0


@pytest.mark.parametrize("lib", ["httpx", "httpx2"])
def test_a_key_that_is_not_callable_is_refused(lib, store):
    """``key`` must be a function of the payload."""
    _, module = LIBS[lib]
    with pytest.raises(TypeError, match="key must be a callable"):
        module.RecordingTransport(store, key={"model": "m"})
