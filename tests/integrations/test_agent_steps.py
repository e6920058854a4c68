"""Requests made inside an agent are steps of its execution, served by a re-run.

The real OpenAI and Anthropic SDKs run inside agents, through the recording
transports, against the fake API on 127.0.0.1 that each test starts; a re-run
is made with the server stopped (or still running, counting its hits).
"""

from __future__ import annotations

import asyncio
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest

from intentusnet import (
    FileExecutionStore,
    IntentRouter,
    ListFilters,
    NondeterminismError,
    Redactor,
    ReplayEngine,
    RerunOptions,
    record_steps,
    rerun,
)
from intentusnet.integrations import httpx as via_httpx
from intentusnet.integrations import httpx2 as via_httpx2
from intentusnet.integrations.network import block_network

from .fakeapi import API_KEY, FakeAPI

TIMEOUT = 10  # seconds: every request, and every event loop, is bounded
CHAT = "http POST 127.0.0.1:{port}/v1/chat/completions"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory."""
    s = FileExecutionStore(tmp_path / "records")
    yield s
    s.close()


#: What today's code adds to every prompt (a test changes it: a code change).
STYLE = {"suffix": ""}


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    """Things with a ``close()``, closed after the test."""
    things: list[Any] = []
    yield things
    for thing in things:
        thing.close()


def openai_router(store, url: str, *, is_async: bool, closing) -> IntentRouter:
    """A router whose agent ``chat`` asks the fake OpenAI API through the SDK.

    The payload's ``prompt`` is asked, streamed when ``stream`` is true; the
    answer holds the text, the raw body (unstreamed) and the cache headers. The
    async agent makes its client per call: a client's connections belong to
    one event loop.
    """
    router = IntentRouter(store=store)
    closing.append(router)
    options: dict[str, Any] = {
        "base_url": f"{url}/v1",
        "api_key": API_KEY,
        "max_retries": 0,
    }

    def kwargs(env) -> dict[str, Any]:
        prompt = env.payload["prompt"] + STYLE["suffix"]
        return {
            "model": "model-a",
            "messages": [{"role": "user", "content": prompt}],
        }

    if not is_async:
        client = openai.OpenAI(
            http_client=httpx.Client(
                transport=via_httpx.RecordingTransport(store), timeout=TIMEOUT
            ),
            **options,
        )
        closing.append(client)

        @router.agent("chat")
        def chat(env, ctx):
            api = client.chat.completions
            if env.payload.get("stream"):
                parts = api.create(stream=True, **kwargs(env))
                return {
                    "text": "".join(c.choices[0].delta.content or "" for c in parts)
                }
            raw = api.with_raw_response.create(**kwargs(env))
            return {
                "text": raw.parse().choices[0].message.content,
                "body": raw.http_response.text,
                "cache": raw.http_response.headers["x-intentusnet-cache"],
                "step": raw.http_response.headers["x-intentusnet-step"],
                "record": raw.http_response.headers["x-intentusnet-record"],
            }

        return router

    @router.agent("chat")
    async def achat(env, ctx):
        http = httpx.AsyncClient(
            transport=via_httpx.AsyncRecordingTransport(store), timeout=TIMEOUT
        )
        async with openai.AsyncOpenAI(http_client=http, **options) as aclient:
            api = aclient.chat.completions
            if env.payload.get("stream"):
                parts = [
                    c.choices[0].delta.content or ""
                    async for c in await api.create(stream=True, **kwargs(env))
                ]
                return {"text": "".join(parts)}
            raw = await api.with_raw_response.create(**kwargs(env))
            return {
                "text": raw.parse().choices[0].message.content,
                "body": raw.http_response.text,
            }

    return router


def route(router: IntentRouter, payload: dict[str, Any], *, is_async: bool):
    """Route a ``chat`` intent, with the async API when ``is_async``."""
    env = {"intent": {"name": "chat"}, "payload": payload}
    if not is_async:
        return router.route_intent(env)
    return asyncio.run(asyncio.wait_for(router.route(env), TIMEOUT))


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "stream"])
@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_an_sdk_call_in_an_agent_is_a_step_served_by_a_rerun(
    store, closing, is_async: bool, stream: bool
) -> None:
    """An SDK call in an agent is a step of its record, served by a rerun.

    The step and the transport's own record are linked both ways; a rerun with the
    server stopped serves the step (no new transport record), and answers the same.
    """
    with FakeAPI() as api:
        router = openai_router(store, api.url, is_async=is_async, closing=closing)
        payload = {"prompt": "hello there", "stream": stream}
        first = route(router, payload, is_async=is_async)
        assert first.status == "success", first.error
        assert api.hits == 1
        port = api.url.rsplit(":", 1)[1]
    record = store.load(first.metadata.execution_id)
    (step,) = record_steps(record)
    assert step.name == CHAT.format(port=port)
    assert step.args["json"]["messages"] == [{"role": "user", "content": "hello there"}]
    assert step.output["status"] == 200
    # the transport's own record answered it: the step names it, it names the agent
    ids = {r.execution_id for r in store.list()}
    assert ids == {record.execution_id, step.child_execution_id}
    call = store.load(step.child_execution_id)
    assert call.header.intent_name == "http.request"
    assert call.header.parent_execution_id == record.execution_id
    assert call.final_response["payload"]["response"] == step.output
    if not is_async and not stream:
        assert (first.payload["cache"], first.payload["step"]) == ("miss", "1")
        assert first.payload["record"] == step.child_execution_id
    for execution_id in ids:
        path = Path(store.root).joinpath(*_record_path(store, execution_id))
        assert API_KEY.encode() not in path.read_bytes()

    result = rerun(ReplayEngine(record), router)  # the server is gone
    assert result.ok, result.response.error
    assert [(s.name, s.source) for s in result.steps] == [(step.name, "record")]
    (served,) = record_steps(store.load(result.execution_id))
    assert served.child_execution_id == step.child_execution_id
    assert {r.execution_id for r in store.list()} == {*ids, result.execution_id}
    again = dict(result.response.payload)
    if not is_async and not stream:
        assert again.pop("cache") == "hit"
        assert again.pop("record") == result.execution_id
        first.payload.pop("cache"), first.payload.pop("record")
    assert again == first.payload
    assert "echo hello there" in again["text"]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_the_same_call_in_a_later_execution_is_a_cache_hit(
    store, closing, is_async: bool
) -> None:
    """The same SDK call in a later execution is served by the cache.

    The server is asked once; the second step names the first call's record; a
    strict rerun of the second serves its step with the server stopped and the
    network blocked.
    """
    with FakeAPI() as api:
        router = openai_router(store, api.url, is_async=is_async, closing=closing)
        first = route(router, {"prompt": "same question"}, is_async=is_async)
        second = route(router, {"prompt": "same question"}, is_async=is_async)
        assert (first.status, second.status) == ("success", "success")
        assert api.hits == 1
    (made,) = record_steps(store.load(first.metadata.execution_id))
    record = store.load(second.metadata.execution_id)
    (hit,) = record_steps(record)
    assert (made.source, hit.source) == ("live", "live")
    assert hit.child_execution_id == made.child_execution_id
    assert hit.output == made.output
    call = store.load(made.child_execution_id)
    assert call.header.parent_execution_id == first.metadata.execution_id
    # the hit made no record of its own
    calls = [r.execution_id for r in store.list(ListFilters(intent="http.request"))]
    assert calls == [made.child_execution_id]
    if not is_async:
        assert (first.payload["cache"], second.payload["cache"]) == ("miss", "hit")
        assert second.payload["record"] == made.child_execution_id
        assert second.payload["step"] == "1"
    assert second.payload["text"] == first.payload["text"]

    with block_network() as block:
        result = rerun(ReplayEngine(record), router)
    assert block.refused == []
    assert result.ok, result.response.error
    assert [s.source for s in result.steps] == ["record"]
    assert result.response.payload["text"] == second.payload["text"]


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_stream_in_an_agent_is_recorded_in_both_places_once_read(
    store, closing, is_async: bool
) -> None:
    """A streamed call's step and transport record end once the agent read it.

    A second execution streams it from the cache.
    """
    with FakeAPI() as api:
        router = openai_router(store, api.url, is_async=is_async, closing=closing)
        payload = {"prompt": "stream me", "stream": True}
        first = route(router, payload, is_async=is_async)
        second = route(router, payload, is_async=is_async)
        assert api.hits == 1
    assert first.payload == second.payload
    (made,) = record_steps(store.load(first.metadata.execution_id))
    (hit,) = record_steps(store.load(second.metadata.execution_id))
    assert made.outcome == "success"
    assert made.output["body"].startswith("data: ")
    assert hit.child_execution_id == made.child_execution_id
    call = store.load(made.child_execution_id)
    assert call.header.status.value == "completed"
    assert call.header.parent_execution_id == first.metadata.execution_id
    assert call.final_response["payload"]["response"] == made.output


def _record_path(store, execution_id: str) -> tuple[str, ...]:
    (path,) = [
        p.relative_to(store.root).parts
        for p in Path(store.root).rglob(f"*{execution_id}*.jsonl")
    ]
    return path


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_strict_rerun_with_a_changed_prompt_stops_naming_the_request(
    store, closing, is_async: bool
) -> None:
    """A strict rerun asked something else at a step's place stops, naming it.

    NondeterminismError (a CassetteMiss) names the request and the nearest recorded
    one, the SDK's caller gets it, and nothing reaches the server.
    """
    with FakeAPI() as api:
        router = openai_router(store, api.url, is_async=is_async, closing=closing)
        first = route(router, {"prompt": "hello"}, is_async=is_async)
        assert first.status == "success", first.error
        STYLE["suffix"] = " (be brief)"
        try:
            with pytest.raises(NondeterminismError) as caught:
                rerun(
                    ReplayEngine.from_store(store, first.metadata.execution_id), router
                )
        finally:
            STYLE["suffix"] = ""
        assert api.hits == 1  # the changed request never left
        port = api.url.rsplit(":", 1)[1]
    message = str(caught.value)
    assert f"step '{CHAT.format(port=port)}'" in message
    assert "nearest recorded: " + CHAT.format(port=port) in message
    assert "json.messages[0].content" in message
    # the agent itself got the miss from the SDK call, with its message
    rerun_record = store.load(caught.value.rerun_execution_id)
    error = rerun_record.final_response["error"]
    assert "NondeterminismError" in error["message"]
    assert CHAT.format(port=port) in error["message"]


def test_a_request_a_rerun_makes_live_is_recorded_under_the_rerun(
    store, closing
) -> None:
    """allow_live: a request the record does not hold is recorded under the re-run.

    The transport answers it, and records it with the re-run's execution as its
    parent.
    """
    with FakeAPI() as api:
        router = openai_router(store, api.url, is_async=False, closing=closing)
        first = route(router, {"prompt": "hello"}, is_async=False)
        STYLE["suffix"] = " (be brief)"
        try:
            engine = ReplayEngine.from_store(store, first.metadata.execution_id)
            result = rerun(engine, router, RerunOptions(allow_live=True))
        finally:
            STYLE["suffix"] = ""
        assert api.hits == 2
    assert result.ok, result.response.error
    assert result.response.payload["cache"] == "miss"
    (step,) = record_steps(store.load(result.execution_id))
    assert step.source == "live"
    assert result.response.payload["record"] == step.child_execution_id
    call = store.load(step.child_execution_id)
    assert call.header.parent_execution_id == result.execution_id


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_a_stream_cut_short_in_an_agent_is_a_failed_step(
    store, closing, is_async: bool
) -> None:
    """A stream the server cuts fails its step; a strict rerun fails it again.

    The partial body is never served.
    """
    with FakeAPI() as api:
        router = openai_router(store, api.url, is_async=is_async, closing=closing)
        payload = {"prompt": "cut it", "stream": True}
        first = route(router, payload, is_async=is_async)
        assert first.status == "error"
    record = store.load(first.metadata.execution_id)
    (step,) = record_steps(record)
    assert step.outcome == "error"
    # the transport's record of the call failed too: it is never served later
    (call,) = store.list(ListFilters(intent="http.request"))
    assert call.status == "failed"
    assert store.load(call.execution_id).header.parent_execution_id == (
        record.execution_id
    )
    result = rerun(ReplayEngine(record), router)
    assert not result.ok
    assert [(s.source, s.outcome) for s in result.steps] == [("record", "error")]


def test_an_error_status_is_a_response_served_again(store, closing) -> None:
    """A 429 is the step's output, served again: the SDK raises the same error.

    It is a response, not a failure: a rerun with the server stopped serves it.
    """
    with FakeAPI() as api:
        router = openai_router(store, api.url, is_async=False, closing=closing)
        first = router.route_intent(
            {"intent": {"name": "chat"}, "payload": {"prompt": "fail 429"}}
        )
    assert first.status == "error"
    assert "RateLimitError" in first.error.message
    record = store.load(first.metadata.execution_id)
    (step,) = record_steps(record)
    assert (step.outcome, step.output["status"]) == ("success", 429)
    result = rerun(ReplayEngine(record), router)
    assert [s.source for s in result.steps] == ["record"]
    assert result.response.error.message == first.error.message


def test_a_transport_cache_hit_in_an_agent_is_recorded_as_its_step(store) -> None:
    """A hit answers inside an agent too (no call); the step records the answer."""
    with FakeAPI() as api:
        transport = via_httpx.RecordingTransport(store)
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        headers = {"authorization": f"Bearer {API_KEY}"}
        url = f"{api.url}/v1/chat/completions"
        with httpx.Client(transport=transport, timeout=TIMEOUT) as http:
            outside = http.post(url, json=body, headers=headers)  # its own record
            router = IntentRouter(store=store)

            @router.agent("ask")
            def ask(env, ctx):
                answer = http.post(url, json=body, headers=headers)
                return {
                    "cache": answer.headers["x-intentusnet-cache"],
                    "text": answer.text,
                }

            inside = router.route_intent({"intent": {"name": "ask"}})
        assert api.hits == 1
    assert outside.headers["x-intentusnet-cache"] == "miss"
    assert inside.payload == {"cache": "hit", "text": outside.text}
    (step,) = record_steps(store.load(inside.metadata.execution_id))
    assert step.output["body"] == outside.text
    router.close()


def test_redaction_ignored_paths_and_hooks_shape_the_step(store) -> None:
    """The step holds what the transport hashes and records, the secret redacted.

    The redactor, ignore_body_paths and before_record_request apply; the agent sees
    the recorded response live as in the rerun; the secret never reaches disk.
    """
    redactor = Redactor(
        b"0123456789abcdef",
        http_body=["messages[*].content", "choices[*].message.content"],
    )

    def hook(payload):
        return {**payload, "hooked": True}

    user = {"name": "alice"}  # ignored: today's code may ask for another user
    with FakeAPI() as api:
        transport = via_httpx.RecordingTransport(
            store,
            redactor=redactor,
            ignore_body_paths=["user"],
            before_record_request=hook,
        )
        http = httpx.Client(transport=transport, timeout=TIMEOUT)
        router = IntentRouter(store=store)

        @router.agent("ask")
        def ask(env, ctx):
            answer = http.post(
                f"{api.url}/v1/chat/completions",
                json={
                    "model": "m",
                    "user": user["name"],
                    "messages": [{"role": "user", "content": "my secret plan"}],
                },
                headers={"authorization": f"Bearer {API_KEY}"},
            )
            return {"content": answer.json()["choices"][0]["message"]["content"]}

        first = router.route_intent({"intent": {"name": "ask"}})
        assert first.status == "success", first.error
        record = store.load(first.metadata.execution_id)
        user["name"] = "bob"
        result = rerun(ReplayEngine(record), router)
        assert api.hits == 1
    http.close()
    router.close()
    (step,) = record_steps(record)
    assert step.args["hooked"] is True
    assert step.args["json"]["user"] == "(ignored)"
    assert step.args["json"]["messages"][0]["content"].startswith("[redacted:")
    assert first.payload["content"].startswith("[redacted:")  # as recorded
    assert result.ok, result.response.error
    assert result.response.payload == first.payload
    for path in Path(store.root).rglob("*"):
        if path.is_file():
            assert b"my secret plan" not in path.read_bytes(), path
            assert API_KEY.encode() not in path.read_bytes(), path


def test_a_request_inside_a_step_is_its_child_served_with_it(store) -> None:
    """A request made inside ctx.step is that step's child, served with it.

    A rerun serving the parent makes no request at all.
    """
    with FakeAPI() as api:
        http = httpx.Client(
            transport=via_httpx.RecordingTransport(store), timeout=TIMEOUT
        )
        router = IntentRouter(store=store)

        def summarize(text: str) -> str:
            answer = http.post(
                f"{api.url}/v1/chat/completions",
                json={"model": "m", "messages": [{"role": "user", "content": text}]},
                headers={"authorization": f"Bearer {API_KEY}"},
            )
            return answer.json()["choices"][0]["message"]["content"]

        @router.agent("sum")
        def agent(env, ctx):
            return {"summary": ctx.step("llm.summarize", {"text": "long"}, summarize)}

        first = router.route_intent({"intent": {"name": "sum"}})
        record = store.load(first.metadata.execution_id)
        result = rerun(ReplayEngine(record), router)
        assert api.hits == 1
    http.close()
    router.close()
    parent, child = record_steps(record)
    assert (parent.name, child.parent) == ("llm.summarize", parent.number)
    assert child.name.startswith("http POST 127.0.0.1:")
    assert [s.name for s in result.steps] == ["llm.summarize"]
    assert result.response.payload == first.payload


def test_anthropic_through_httpx2_in_an_agent(store) -> None:
    """The Anthropic SDK (httpx2), streamed in an async agent, is a step.

    A rerun serves it with the server stopped.
    """
    with FakeAPI() as api:
        router = IntentRouter(store=store)

        @router.agent("ask")
        async def ask(env, ctx):
            ask = {"model": "claude-x", "max_tokens": 16}
            messages = [{"role": "user", "content": "bonjour"}]
            http = httpx2.AsyncClient(
                transport=via_httpx2.AsyncRecordingTransport(store), timeout=TIMEOUT
            )
            async with anthropic.AsyncAnthropic(
                base_url=api.url, api_key=API_KEY, max_retries=0, http_client=http
            ) as claude:
                async with claude.messages.stream(messages=messages, **ask) as events:
                    text = "".join([t async for t in events.text_stream])
                plain = await claude.messages.create(messages=messages, **ask)
            return {"streamed": text, "plain": plain.content[0].text}

        first = asyncio.run(router.route({"intent": {"name": "ask"}}))
        assert first.status == "success", first.error
        assert api.hits == 2
        port = api.url.rsplit(":", 1)[1]
    record = store.load(first.metadata.execution_id)
    names = [s.name for s in record_steps(record)]
    assert names == [f"http POST 127.0.0.1:{port}/v1/messages"] * 2
    result = rerun(ReplayEngine(record), router)
    assert result.ok, result.response.error
    assert result.response.payload == first.payload
    assert result.response.payload["streamed"] == "echo bonjour t=None"
    router.close()


def test_block_network_stops_a_raw_socket_call_in_a_rerun(store) -> None:
    """A raw socket call is no step; block_network() refuses it in a rerun.

    The refusal names the address, and the server sees nothing.
    """
    with FakeAPI() as api:
        router = IntentRouter(store=store)

        @router.agent("raw")
        def raw(env, ctx):
            request = urllib.request.Request(
                f"{api.url}/v1/chat/completions",
                data=b'{"model": "m", "messages": [{"role": "user", "content": "x"}]}',
                headers={"authorization": f"Bearer {API_KEY}"},
            )
            with urllib.request.urlopen(request, timeout=TIMEOUT) as answer:
                return {"status": answer.status}

        first = router.route_intent({"intent": {"name": "raw"}})
        assert first.payload == {"status": 200}
        engine = ReplayEngine.from_store(store, first.metadata.execution_id)
        with block_network() as block:
            result = rerun(engine, router)
        assert api.hits == 1
        port = api.url.rsplit(":", 1)[1]
    assert not result.ok
    # urllib wraps the error in its own; the message and the block both tell
    assert f"network access to 127.0.0.1:{port} is blocked" in (
        result.response.error.message
    )
    assert block.refused == [f"127.0.0.1:{port}"]
    # a socket opened and connected by hand is refused the same way
    with block_network() as block, pytest.raises(ConnectionError):
        socket.create_connection(("127.0.0.1", int(port)), timeout=TIMEOUT)
    assert block.refused == [f"127.0.0.1:{port}"]
    router.close()
