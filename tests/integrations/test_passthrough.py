"""Streaming pass-through: on a miss, the client reads an event stream as it arrives.

The fake API holds each stream after its first event until the test releases it,
so a client that got the first event before the release got it passed through.
"""

from __future__ import annotations

import asyncio
import gc
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import httpx2
import openai
import pytest

from intentusnet import FileExecutionStore
from intentusnet.integrations import httpx as via_httpx
from intentusnet.integrations import httpx2 as via_httpx2

from .fakeapi import API_KEY, FakeAPI

BEARER = {"authorization": f"Bearer {API_KEY}"}


def chat(prompt: str) -> dict[str, object]:
    return {
        "model": "m",
        "stream": True,
        "messages": [{"role": "user", "content": prompt}],
    }


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """The fake API, holding streams until released; stopped after the test."""
    with FakeAPI(held=True) as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory."""
    s = FileExecutionStore(tmp_path / "records")
    yield s
    s.close()


@pytest.mark.parametrize("lib", [via_httpx, via_httpx2], ids=["httpx", "httpx2"])
def test_a_miss_is_read_as_it_arrives_and_recorded_once_whole(lib, api, store):
    """The first event comes before the stream ends; the record waits for the end."""
    http_lib = httpx if lib is via_httpx else httpx2
    url = f"{api.url}/v1/chat/completions"
    with http_lib.Client(transport=lib.RecordingTransport(store), timeout=10) as http:
        with http.stream("POST", url, json=chat("a b c d"), headers=BEARER) as live:
            chunks = live.iter_bytes()
            first = next(chunks)
            assert api.finished == 0  # the server holds the rest
            assert [s.status.value for s in store.list()] == ["in_progress"]
            api.release.set()
            body = first + b"".join(chunks)
        assert live.headers[lib.CACHE_HEADER] == "miss"
        (record,) = store.list()
        assert live.headers[lib.RECORD_HEADER] == record.execution_id
        again = http.post(url, json=chat("a b c d"), headers=BEARER)
    assert first.startswith(b"data: ")
    assert body.count(b"data: ") == 7  # six words and [DONE]
    assert record.status.value == "completed"
    assert again.headers[lib.CACHE_HEADER] == "hit"
    assert again.content == body
    assert api.hits == 1


def test_a_stream_closed_early_is_never_served(api, store):
    """A client that stops reading leaves a failed record; the next call is live."""
    url = f"{api.url}/v1/chat/completions"
    api.release.set()  # closing reads one more event: the server must send it
    with httpx.Client(transport=via_httpx.RecordingTransport(store), timeout=10) as h:
        with h.stream("POST", url, json=chat("a b c d"), headers=BEARER) as cut:
            next(cut.iter_bytes())  # the first of seven events, then closed
        again = h.post(url, json=chat("a b c d"), headers=BEARER)
        third = h.post(url, json=chat("a b c d"), headers=BEARER)
    assert again.headers[via_httpx.CACHE_HEADER] == "miss"
    assert third.headers[via_httpx.CACHE_HEADER] == "hit"
    assert api.hits == 2
    statuses = sorted(s.status.value for s in store.list())
    assert statuses == ["completed", "failed"]
    failed = next(s for s in store.list() if s.status.value == "failed")
    message = store.load(failed.execution_id).final_response["error"]["message"]
    assert "was closed by the client before its end" in message


def test_a_stream_cut_by_the_server_fails_and_is_never_served(api, store):
    """A body the server cuts raises httpx's error to the client and is not kept."""
    url = f"{api.url}/v1/chat/completions"
    api.release.set()
    with httpx.Client(transport=via_httpx.RecordingTransport(store), timeout=10) as h:
        for _ in range(2):
            with (
                pytest.raises(httpx.RemoteProtocolError),
                h.stream("POST", url, json=chat("cut here"), headers=BEARER) as r,
            ):
                r.read()
    assert api.hits == 2
    assert [s.status.value for s in store.list()] == ["failed", "failed"]
    for summary in store.list():
        error = store.load(summary.execution_id).final_response["error"]
        assert "failed before its end (the upstream broke off)" in error["message"]


def test_async_pass_through_and_an_interrupted_stream(api, store):
    """The async transports pass streams through and drop a cut-short one too."""
    url = f"{api.url}/v1/chat/completions"

    async def main() -> tuple[bool, list[str]]:
        transport = via_httpx2.AsyncRecordingTransport(store)
        async with httpx2.AsyncClient(transport=transport, timeout=10) as http:
            async with http.stream(
                "POST", url, json=chat("a b c d"), headers=BEARER
            ) as live:
                chunks = live.aiter_bytes()
                await chunks.__anext__()
                sending = api.finished == 0  # the server holds the rest
                api.release.set()
                async for _ in chunks:
                    pass
            async with http.stream(
                "POST", url, json=chat("x y z"), headers=BEARER
            ) as cut:
                await cut.aiter_bytes().__anext__()  # the first of six events
            states = []
            for prompt in ("a b c d", "x y z", "x y z"):
                answer = await http.post(url, json=chat(prompt), headers=BEARER)
                states.append(answer.headers[via_httpx2.CACHE_HEADER])
            await asyncio.sleep(0)
        return sending, states

    sending, states = asyncio.run(asyncio.wait_for(main(), 30))
    assert sending
    assert states == ["hit", "miss", "hit"]  # the cut stream was asked again
    assert api.hits == 3


def test_openai_streaming_reads_a_miss_as_it_arrives(api, store):
    """The OpenAI SDK's stream yields its first chunk before the server is done."""
    http = httpx2.Client(transport=via_httpx2.RecordingTransport(store), timeout=10)
    client = openai.OpenAI(
        api_key=API_KEY, base_url=f"{api.url}/v1", max_retries=0, http_client=http
    )
    with client:
        api.release.set()
        warm = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "warm"}], stream=True
        )
        assert [c.choices[0].delta.content for c in warm] == [
            "echo",
            " warm",
            " t=None",
        ]
        api.release.clear()  # the warm-up's stream has ended: hold the next
        stream = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "a b c d"}], stream=True
        )
        first = next(iter(stream))
        sending = api.finished == 1  # only the warm-up's body has ended
        api.release.set()
        rest = [c.choices[0].delta.content for c in stream]
        again = client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "a b c d"}], stream=True
        )
        replayed = [c.choices[0].delta.content for c in again]
    assert sending
    assert [first.choices[0].delta.content, *rest] == replayed
    assert api.hits == 2


def test_a_dropped_unclosed_stream_does_not_hold_its_request(api, store):
    """A streamed response dropped unclosed frees its call: asked again, it runs."""
    url = f"{api.url}/v1/chat/completions"
    http = httpx.Client(transport=via_httpx.RecordingTransport(store), timeout=10)
    request = http.build_request("POST", url, json=chat("a b c d"), headers=BEARER)
    dropped = http.send(request, stream=True)
    assert dropped.headers[via_httpx.CACHE_HEADER] == "miss"
    del dropped
    gc.collect()
    api.release.set()
    states: list[str] = []
    again = threading.Thread(
        target=lambda: states.append(
            http.post(url, json=chat("a b c d"), headers=BEARER).headers[
                via_httpx.CACHE_HEADER
            ]
        ),
        daemon=True,
    )
    again.start()
    again.join(10)  # hung here when the dropped call kept its flight
    http.close()
    assert states == ["miss"]
    assert api.hits == 2
