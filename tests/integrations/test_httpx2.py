"""The httpx2 transports: the same recording core as httpx's, for httpx2 clients."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import pytest

from intentusnet import FileExecutionStore
from intentusnet.errors import CacheMiss
from intentusnet.integrations import httpx as recording_httpx
from intentusnet.integrations.httpx2 import (
    AsyncRecordingTransport,
    RecordingTransport,
    TransportMode,
)

from .fakellm import API_KEY, COOKIE, FakeLLM

CHAT = {"model": "m", "messages": [{"role": "user", "content": "hello"}]}
BEARER = {"authorization": f"Bearer {API_KEY}"}


@pytest.fixture
def llm() -> Iterator[FakeLLM]:
    """The fake LLM API, running."""
    with FakeLLM() as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory."""
    s = FileExecutionStore(tmp_path / "records")
    yield s
    s.close()


def client(store, mode="cache", **options):
    return httpx2.Client(transport=RecordingTransport(store, mode, **options))


def test_a_client_works_through_the_transport(store, llm):
    """httpx2.Client accepts the transport; the second call is a hit."""
    url = f"{llm.url}/v1/chat/completions"
    with client(store) as http:
        first = http.post(url, json=CHAT, headers=BEARER)
        second = http.post(url, json=CHAT, headers=BEARER)
    assert isinstance(second, httpx2.Response)
    assert llm.calls == 1
    assert second.status_code == 200
    assert second.content == first.content
    assert second.headers["x-request-id"] == "req-fake"


def test_stream_replayed_event_by_event(store, llm):
    """An event stream is replayed as its events, through httpx2's stream API."""
    ask = {**CHAT, "stream": True}
    chunks = []
    for _ in range(2):
        with (
            client(store) as http,
            http.stream(
                "POST", f"{llm.url}/v1/chat/completions", json=ask, headers=BEARER
            ) as response,
        ):
            chunks.append(list(response.iter_bytes()))
    assert llm.calls == 1
    assert b"".join(chunks[0]) == b"".join(chunks[1])
    assert len(chunks[1]) == 4


def test_async_transport(store, llm):
    """httpx2.AsyncClient works through the async twin, hits included."""
    url = f"{llm.url}/v1/chat/completions"

    async def main() -> list[bytes]:
        transport = AsyncRecordingTransport(store)
        async with httpx2.AsyncClient(transport=transport) as http:
            first = await http.post(url, json=CHAT, headers=BEARER)
            second = await http.post(url, json=CHAT, headers=BEARER)
            return [first.content, second.content]

    first, second = asyncio.run(main())
    assert first == second
    assert llm.calls == 1


def test_one_core_so_httpx_and_httpx2_share_records(store, llm):
    """A request recorded through httpx is answered through httpx2, and back."""
    url = f"{llm.url}/v1/chat/completions"
    with httpx.Client(transport=recording_httpx.RecordingTransport(store)) as http:
        old = http.post(url, json=CHAT, headers=BEARER)
    with client(store) as http:
        new = http.post(url, json=CHAT, headers=BEARER)
    assert new.content == old.content
    assert llm.calls == 1
    assert TransportMode is recording_httpx.TransportMode


def test_errors_and_secrets(store, llm):
    """A 429 is not served again; keys and cookies reach no file of the store."""
    with client(store) as http:
        for _ in range(2):
            response = http.post(f"{llm.url}/v1/fail/429", json=CHAT, headers=BEARER)
            assert response.status_code == 429
        http.post(
            f"{llm.url}/v1/messages?api_key={API_KEY}",
            json=CHAT,
            headers={"x-api-key": API_KEY, "cookie": f"c={COOKIE}"},
        )
    assert llm.calls == 3
    for path in (p for p in store.root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        assert API_KEY.encode() not in data, path
        assert COOKIE.encode() not in data, path


def test_replay_mode_and_connection_errors(store):
    """Replay mode misses loudly; a refused connection raises httpx2's own error."""
    with client(store, "replay") as http, pytest.raises(CacheMiss, match="POST"):
        http.post("https://api.example.com/v1/chat?api_key=SECRET", json=CHAT)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with client(store) as http, pytest.raises(httpx2.ConnectError):
        http.post(f"http://127.0.0.1:{port}/v1", json=CHAT)


def test_bad_mode_and_credential_hash_header_are_refused(store):
    """The httpx2 transports check their arguments as the httpx ones do."""
    with pytest.raises(ValueError, match="'record', 'replay', 'cache'"):
        RecordingTransport(store, mode="playback")
    with pytest.raises(ValueError, match="authorization"):
        AsyncRecordingTransport(store, hash_headers=["authorization"])


def test_async_transport_ignores_body_paths(store, llm):
    """ignore_body_paths reaches the httpx2 async transport too."""
    url = f"{llm.url}/v1/chat/completions"

    async def main() -> None:
        transport = AsyncRecordingTransport(store, ignore_body_paths=["user"])
        async with httpx2.AsyncClient(transport=transport) as http:
            for user in ("alice", "bob"):
                await http.post(url, json={**CHAT, "user": user}, headers=BEARER)

    asyncio.run(main())
    assert llm.calls == 1
