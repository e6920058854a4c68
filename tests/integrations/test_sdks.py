"""The real OpenAI and Anthropic SDKs, through the transports, against a local fake.

Each test starts the fake API on 127.0.0.1 and drives the installed ``openai``
and ``anthropic`` packages (sync and async, streaming and not) through the
recording transports, counting the requests that reach the server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from intentusnet import FileExecutionStore, savings_report
from intentusnet.integrations import httpx as via_httpx
from intentusnet.integrations import httpx2 as via_httpx2

from .fakeapi import API_KEY, FakeAPI
from .fakeapi import tokens as fake_tokens

TIMEOUT = 10  # seconds: every request, and every test's event loop, is bounded


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """The fake API, running; stopped after the test."""
    with FakeAPI() as server:
        yield server


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory."""
    s = FileExecutionStore(tmp_path / "records")
    yield s
    s.close()


def make_client(sdk: str, url: str, store, *, is_async: bool, lib: str = "httpx2"):
    """An SDK client whose HTTP client records through the transport."""
    module = via_httpx2 if lib == "httpx2" else via_httpx
    http_lib: Any = httpx2 if lib == "httpx2" else httpx
    if is_async:
        http = http_lib.AsyncClient(
            transport=module.AsyncRecordingTransport(store), timeout=TIMEOUT
        )
    else:
        http = http_lib.Client(
            transport=module.RecordingTransport(store), timeout=TIMEOUT
        )
    options = {"api_key": API_KEY, "max_retries": 0, "http_client": http}
    if sdk == "openai":
        cls = openai.AsyncOpenAI if is_async else openai.OpenAI
        return cls(base_url=f"{url}/v1", **options)
    cls = anthropic.AsyncAnthropic if is_async else anthropic.Anthropic
    return cls(base_url=url, **options)


def ask_kwargs(sdk: str, prompt: str, model: str, temperature: float):
    kwargs: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
    }
    if sdk == "openai":
        kwargs["temperature"] = temperature
    else:
        # This Anthropic SDK has no temperature argument; sent as its users would.
        kwargs["max_tokens"] = 16
        kwargs["extra_body"] = {"temperature": temperature}
    return kwargs


def ask(client, sdk: str, stream: bool, prompt: str, model: str, temperature: float):
    """One call through a sync SDK: (the text, the raw body or the raw events)."""
    kwargs = ask_kwargs(sdk, prompt, model, temperature)
    if sdk == "openai":
        api = client.chat.completions
        if stream:
            with api.with_streaming_response.create(stream=True, **kwargs) as raw:
                chunks = list(raw.iter_bytes())
            text = "".join(
                c.choices[0].delta.content or ""
                for c in api.create(stream=True, **kwargs)
            )
            return text, b"".join(chunks)
        raw = api.with_raw_response.create(**kwargs)
        return raw.parse().choices[0].message.content, raw.http_response.content
    if stream:
        with client.messages.with_streaming_response.create(
            stream=True, **kwargs
        ) as raw:
            chunks = list(raw.iter_bytes())
        with client.messages.stream(**kwargs) as events:
            text = "".join(events.text_stream)
        return text, b"".join(chunks)
    raw = client.messages.with_raw_response.create(**kwargs)
    return raw.parse().content[0].text, raw.http_response.content


async def aask(
    client, sdk: str, stream: bool, prompt: str, model: str, temperature: float
):
    """One call through an async SDK client, as ``ask``."""
    kwargs = ask_kwargs(sdk, prompt, model, temperature)
    if sdk == "openai":
        api = client.chat.completions
        if stream:
            async with api.with_streaming_response.create(stream=True, **kwargs) as raw:
                chunks = [c async for c in raw.iter_bytes()]
            parts = [
                c.choices[0].delta.content or ""
                async for c in await api.create(stream=True, **kwargs)
            ]
            return "".join(parts), b"".join(chunks)
        raw = await api.with_raw_response.create(**kwargs)
        return raw.parse().choices[0].message.content, raw.http_response.content
    if stream:
        async with client.messages.with_streaming_response.create(
            stream=True, **kwargs
        ) as raw:
            chunks = [c async for c in raw.iter_bytes()]
        async with client.messages.stream(**kwargs) as events:
            text = "".join([t async for t in events.text_stream])
        return text, b"".join(chunks)
    raw = await client.messages.with_raw_response.create(**kwargs)
    return (await raw.parse()).content[0].text, raw.http_response.content


ERRORS = {
    "openai": (openai.RateLimitError, openai.InternalServerError),
    "anthropic": (anthropic.RateLimitError, anthropic.InternalServerError),
}

#: (prompt, model, temperature): the first is asked twice, the others differ once.
ASKS = [
    ("hello there", "model-a", 0.0),
    ("hello there", "model-a", 0.0),
    ("hello there", "model-b", 0.0),
    ("hello there", "model-a", 0.5),
    ("goodbye", "model-a", 0.0),
]


def run_scenario(
    sdk: str, api: FakeAPI, store, *, is_async: bool, stream: bool
) -> tuple[list[tuple[str, bytes]], list[int], list[type[BaseException]]]:
    """The asks, the server's hit count after each, and the errors of 429 and 500."""
    answers: list[tuple[str, bytes]] = []
    hits: list[int] = []
    errors: list[type[BaseException]] = []

    def after(answer: tuple[str, bytes]) -> None:
        answers.append(answer)
        hits.append(api.hits)

    if not is_async:
        with make_client(sdk, api.url, store, is_async=False) as client:
            for prompt, model, temperature in ASKS:
                after(ask(client, sdk, stream, prompt, model, temperature))
            for prompt in ("fail 429", "fail 429", "fail 500", "fail 500"):
                try:
                    ask(client, sdk, stream, prompt, "model-a", 0.0)
                except Exception as exc:
                    errors.append(type(exc))
        return answers, hits, errors

    async def main() -> None:
        client = make_client(sdk, api.url, store, is_async=True)
        try:
            for prompt, model, temperature in ASKS:
                after(await aask(client, sdk, stream, prompt, model, temperature))
            for prompt in ("fail 429", "fail 429", "fail 500", "fail 500"):
                try:
                    await aask(client, sdk, stream, prompt, "model-a", 0.0)
                except Exception as exc:
                    errors.append(type(exc))
        finally:
            await client.close()

    bounded: Callable[[], Awaitable[None]] = lambda: asyncio.wait_for(  # noqa: E731
        main(), 4 * TIMEOUT
    )
    asyncio.run(bounded())
    return answers, hits, errors


def assert_no_key_on_disk(store) -> None:
    files = [p for p in store.root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files)
    for path in files:
        assert API_KEY.encode() not in path.read_bytes(), f"the key is in {path}"


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_sdk_through_the_httpx2_transport(sdk, is_async, stream, api, store):
    """Repeats skip the server, byte for byte; changes and errors do not."""
    answers, hits, errors = run_scenario(
        sdk, api, store, is_async=is_async, stream=stream
    )
    first, again = answers[0], answers[1]
    assert first[0] == "echo hello there t=0.0"
    assert again == first  # same text, same bytes
    # The repeat reached nobody (nor did the parsed read after a raw one, when
    # streaming: the same request). Another model, temperature or prompt is
    # another request: each is a miss.
    assert hits == [1, 1, 2, 3, 4]
    assert answers[3][0] == "echo hello there t=0.5"
    assert answers[4][0] == "echo goodbye t=0.0"
    # Errors are raised as the SDK's own, every time: never served from a record.
    rate_limited, server_error = ERRORS[sdk]
    assert errors == [rate_limited, rate_limited, server_error, server_error]
    assert api.hits == hits[-1] + 4
    # The key went to the server, and nowhere near the store.
    assert all(API_KEY in " ".join(seen.values()) for seen in api.seen)
    assert_no_key_on_disk(store)


def test_openai_through_the_httpx_transport(api, store):
    """OpenAI's SDK also takes an httpx client with the httpx transport."""
    with make_client("openai", api.url, store, is_async=False, lib="httpx") as c:
        first = ask(c, "openai", False, "hi", "model-a", 0.0)
        again = ask(c, "openai", False, "hi", "model-a", 0.0)
    assert first == again
    assert api.hits == 1
    assert_no_key_on_disk(store)


def test_anthropic_refuses_an_httpx_client(store):
    """Why the httpx2 transport exists: the Anthropic SDK wants an httpx2 client."""
    http = httpx.Client(transport=via_httpx.RecordingTransport(store))
    with pytest.raises(TypeError, match="httpx2"):
        anthropic.Anthropic(api_key=API_KEY, http_client=http)
    http.close()


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_sdk_responses_tell_a_hit_and_a_header_asks_for_bypass(sdk, api, store):
    """An SDK user sees hit/miss and the record, and asks for bypass per call."""
    kwargs = ask_kwargs(sdk, "hello", "model-a", 0.0)
    bypass = {via_httpx2.CACHE_HEADER: "bypass"}
    with make_client(sdk, api.url, store, is_async=False) as client:
        create = (
            client.chat.completions.with_raw_response.create
            if sdk == "openai"
            else client.messages.with_raw_response.create
        )
        miss, hit = create(**kwargs), create(**kwargs)
        fresh = create(**kwargs, extra_headers=bypass)
    states = [r.headers[via_httpx2.CACHE_HEADER] for r in (miss, hit, fresh)]
    assert states == ["miss", "hit", "bypass"]
    records = [r.headers[via_httpx2.RECORD_HEADER] for r in (miss, hit, fresh)]
    assert records[0] == records[1] != records[2]
    assert hit.http_response.extensions["intentusnet_record"] == records[0]
    assert api.hits == 2
    assert all(via_httpx2.CACHE_HEADER not in seen for seen in api.seen)


def _text(chunks: list[Any]) -> str:
    # The usage chunk (include_usage) has no choices.
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


async def _acall(client, sdk: str, stream: bool, kwargs: dict[str, Any]) -> str:
    if sdk == "openai":
        api = client.chat.completions
        if stream:
            chunks = [c async for c in await api.create(stream=True, **kwargs)]
            return _text(chunks)
        return (await api.create(**kwargs)).choices[0].message.content
    if stream:
        async with client.messages.stream(**kwargs) as events:
            return "".join([t async for t in events.text_stream])
    return (await client.messages.create(**kwargs)).content[0].text


def _call(client, sdk: str, stream: bool, kwargs: dict[str, Any]) -> str:
    if sdk == "openai":
        api = client.chat.completions
        if stream:
            chunks = list(api.create(stream=True, **kwargs))
            return _text(chunks)
        return api.create(**kwargs).choices[0].message.content
    if stream:
        with client.messages.stream(**kwargs) as events:
            return "".join(events.text_stream)
    return client.messages.create(**kwargs).content[0].text


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_usage_is_recorded_and_a_hit_avoids_it(sdk, is_async, stream, api, store):
    """Each call's token usage is in its record; the repeat's tokens are avoided."""
    prompt = "how many tokens is this"
    kwargs = ask_kwargs(sdk, prompt, "model-u", 0.0)
    if sdk == "openai" and stream:
        kwargs["stream_options"] = {"include_usage": True}
    if is_async:

        async def main() -> list[str]:
            client = make_client(sdk, api.url, store, is_async=True)
            try:
                return [await _acall(client, sdk, stream, kwargs) for _ in range(2)]
            finally:
                await client.close()

        texts = asyncio.run(asyncio.wait_for(main(), 4 * TIMEOUT))
    else:
        with make_client(sdk, api.url, store, is_async=False) as client:
            texts = [_call(client, sdk, stream, kwargs) for _ in range(2)]
    assert texts[0] == texts[1] == "echo how many tokens is this t=0.0"
    assert api.hits == 1
    (summary,) = store.list()
    record = store.load(summary.execution_id)
    used = record.final_response["payload"]["usage"]
    want_in, want_out = fake_tokens(kwargs, texts[0])
    assert used == {
        "provider": sdk,
        "operation": "chat",
        "model": "model-u",
        "responseModel": "model-u",
        "inputTokens": want_in,
        "outputTokens": want_out,
    }
    (row,) = savings_report(store).models
    assert (row.provider, row.model, row.hits, row.misses) == (sdk, "model-u", 1, 1)
    assert (row.input_tokens_avoided, row.output_tokens_avoided) == (
        want_in,
        want_out,
    )


def test_openai_stream_without_include_usage_counts_a_call_without_tokens(api, store):
    """OpenAI streams usage only when asked: the call counts, with no tokens."""
    kwargs = ask_kwargs("openai", "no usage asked", "model-u", 0.0)
    with make_client("openai", api.url, store, is_async=False) as client:
        _call(client, "openai", True, kwargs)
    (summary,) = store.list()
    used = store.load(summary.execution_id).final_response["payload"]["usage"]
    assert (used["inputTokens"], used["outputTokens"]) == (None, None)
    (row,) = savings_report(store).models
    assert (row.misses, row.input_tokens_spent, row.output_tokens_spent) == (1, 0, 0)


def test_errors_record_no_usage(api, store):
    """A 429 answer is recorded as an error, without usage, and is no LLM call."""
    kwargs = ask_kwargs("openai", "fail 429", "m", 0.0)
    with (
        make_client("openai", api.url, store, is_async=False) as client,
        pytest.raises(openai.RateLimitError),
    ):
        _call(client, "openai", False, kwargs)
    (summary,) = store.list()
    final = store.load(summary.execution_id).final_response
    assert final["payload"] is None
    assert "usage" not in final["error"]["details"]
    assert savings_report(store).models == ()
