"""OpenTelemetry traces of executions, through the real SDK and a real OTLP exporter.

Spans go to the SDK's ``InMemorySpanExporter`` through a ``SimpleSpanProcessor``,
or through the OTLP/HTTP exporter to a receiver the test starts on 127.0.0.1;
LLM calls go through the real OpenAI SDK to the fake API in ``fakeapi``.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import openai
import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
    InMemorySpanExporter,
)
from opentelemetry.trace import StatusCode

from intentusnet import (
    FileExecutionStore,
    IntentRouter,
    MemoryExecutionStore,
    PriceTable,
    Redactor,
    ReplayCache,
)
from intentusnet.integrations import httpx as via_httpx
from intentusnet.integrations.opentelemetry import instrument

from .fakeapi import API_KEY, FakeAPI
from .otlp import Receiver, received

TIMEOUT = 10  # seconds: every request, wait and subprocess is bounded
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    """An in-memory exporter (cleared after the test)."""
    exported = InMemorySpanExporter()
    yield exported
    exported.clear()


@pytest.fixture
def provider(exporter: InMemorySpanExporter) -> Iterator[TracerProvider]:
    """A tracer provider exporting every span at once to ``exporter``."""
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield tracer_provider
    tracer_provider.shutdown()


@pytest.fixture
def store() -> MemoryExecutionStore:
    """A store in memory."""
    return MemoryExecutionStore()


def envelope(payload: dict | None = None, **routing) -> dict:
    """An 'echo' envelope in wire form."""
    return {
        "intent": {"name": "echo"},
        "payload": payload or {"text": "hi"},
        "routing": routing,
    }


def by_name(spans: tuple[ReadableSpan, ...]) -> dict[str, ReadableSpan]:
    """The spans by name (the names a test uses are unique in it)."""
    named = {span.name: span for span in spans}
    assert len(named) == len(spans), [s.name for s in spans]
    return named


def parent_of(span: ReadableSpan) -> int | None:
    """The span id of ``span``'s parent."""
    return None if span.parent is None else span.parent.span_id


def test_one_execution_is_a_tree_of_spans(store, provider, exporter):
    """Execution, attempt and steps nest, carrying record id, hash, status and cache."""
    router = IntentRouter(store=store)

    @router.agent("echo")
    def echo(env, ctx):
        def outer() -> int:
            return ctx.step("inner", {"x": 1}, lambda x: x + 1)

        return {"n": ctx.step("outer", {}, outer)}

    instrument(router, tracer_provider=provider)
    with router:
        response = router.route_intent(envelope())
    assert response.status == "success"
    spans = by_name(exporter.get_finished_spans())
    assert set(spans) == {
        "intent echo",
        "invoke_agent echo",
        "execute_tool outer",
        "execute_tool inner",
    }
    execution, attempt = spans["intent echo"], spans["invoke_agent echo"]
    outer, inner = spans["execute_tool outer"], spans["execute_tool inner"]
    assert execution.parent is None
    assert parent_of(attempt) == execution.context.span_id
    assert parent_of(outer) == attempt.context.span_id
    assert parent_of(inner) == outer.context.span_id
    assert {s.context.trace_id for s in spans.values()} == {execution.context.trace_id}
    metadata = response.metadata
    assert dict(execution.attributes) == {
        "openinference.span.kind": "CHAIN",
        "intentusnet.cache.hit": False,
        "intentusnet.execution_id": metadata.execution_id,
        "intentusnet.envelope_hash": metadata.envelope_hash,
        "intentusnet.intent": "echo",
        "intentusnet.intent_version": "1.0",
        "intentusnet.cache": "bypass",
        "intentusnet.status": "success",
        "intentusnet.agent": "echo",
    }
    assert execution.status.status_code is StatusCode.UNSET
    assert attempt.attributes["intentusnet.outcome"] == "success"
    assert attempt.attributes["intentusnet.attempt"] == 1
    assert attempt.attributes["openinference.span.kind"] == "AGENT"
    assert attempt.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert attempt.attributes["gen_ai.agent.name"] == "echo"
    assert inner.attributes["openinference.span.kind"] == "TOOL"
    assert inner.attributes["gen_ai.operation.name"] == "execute_tool"
    assert inner.attributes["gen_ai.tool.name"] == "inner"
    assert inner.attributes["intentusnet.step"] == 2
    assert inner.attributes["intentusnet.step.name"] == "inner"
    assert inner.attributes["intentusnet.outcome"] == "success"
    # the spans are the record's: the same steps, in the same execution
    record = store.load(metadata.execution_id)
    assert [e.type for e in record.events].count("STEP_START") == 2


def test_fallback_is_two_attempts_the_failed_one_in_error(store, provider, exporter):
    """The failing agent's attempt has an error status and the exception as an event."""
    router = IntentRouter(store=store)

    @router.agent("echo", priority=1)
    def first(env, ctx):
        raise RuntimeError("down")

    @router.agent("echo", priority=2)
    def second(env, ctx):
        return {"ok": True}

    instrument(router, tracer_provider=provider)
    with router:
        response = router.route_intent(envelope(strategy="FALLBACK"))
    assert response.status == "success"
    spans = by_name(exporter.get_finished_spans())
    failed, answered = spans["invoke_agent first"], spans["invoke_agent second"]
    execution = spans["intent echo"]
    assert parent_of(failed) == parent_of(answered) == execution.context.span_id
    assert failed.status.status_code is StatusCode.ERROR
    assert "down" in (failed.status.description or "")
    assert failed.attributes["intentusnet.outcome"] == "error"
    assert failed.attributes["intentusnet.error.code"] == "AGENT_ERROR"
    (event,) = failed.events
    assert event.name == "exception"
    assert event.attributes["exception.type"] == "RuntimeError"
    assert answered.status.status_code is StatusCode.UNSET
    assert answered.attributes["intentusnet.attempt"] == 2
    assert execution.attributes["intentusnet.agent"] == "second"
    assert failed.start_time < failed.end_time <= answered.start_time


def test_failed_execution_and_step_have_error_status(store, provider, exporter):
    """A step that raises and an execution that fails are marked ERROR."""
    router = IntentRouter(store=store)

    @router.agent("echo")
    def echo(env, ctx):
        def boom() -> None:
            raise ValueError("bad input")

        ctx.step("lookup", {}, boom)

    instrument(router, tracer_provider=provider)
    with router:
        response = router.route_intent(envelope())
    assert response.status == "error"
    spans = by_name(exporter.get_finished_spans())
    step, execution = spans["execute_tool lookup"], spans["intent echo"]
    assert step.status.status_code is StatusCode.ERROR
    assert step.status.description == "bad input"
    assert step.attributes["intentusnet.outcome"] == "error"
    assert execution.status.status_code is StatusCode.ERROR
    assert execution.attributes["intentusnet.status"] == "error"


def test_child_intent_nests_in_the_parents_route_step(store, provider, exporter):
    """ctx.route: a route: step span in the parent's attempt, the child's span in it."""
    router = IntentRouter(store=store)

    @router.agent("echo")
    def echo(env, ctx):
        child = ctx.route({"intent": {"name": "lookup"}, "payload": {"id": 7}})
        return {"child": child.payload}

    @router.agent("lookup")
    def lookup(env, ctx):
        return {"found": env.payload["id"]}

    instrument(router, tracer_provider=provider)
    with router:
        response = router.route_intent(envelope())
    assert response.payload == {"child": {"found": 7}}
    spans = by_name(exporter.get_finished_spans())
    parent, step = spans["intent echo"], spans["execute_tool route:lookup"]
    child, child_attempt = spans["intent lookup"], spans["invoke_agent lookup"]
    assert parent_of(step) == spans["invoke_agent echo"].context.span_id
    assert parent_of(child) == step.context.span_id
    assert parent_of(child_attempt) == child.context.span_id
    child_id = child.attributes["intentusnet.execution_id"]
    assert step.attributes["intentusnet.child_execution_id"] == child_id
    assert child.attributes["intentusnet.parent_execution_id"] == (
        response.metadata.execution_id
    )
    assert child.attributes["intentusnet.cache"] == "bypass"
    assert (
        store.load(child_id).header.parent_execution_id
        == (parent.attributes["intentusnet.execution_id"])
    )


def test_a_cache_hit_is_one_span_with_cache_hit(tmp_path, provider, exporter):
    """The miss runs the agent; the hit is a lone span naming the source record."""
    store = FileExecutionStore(tmp_path / "records")
    router = IntentRouter(store=store, cache=ReplayCache())
    calls = []

    @router.agent("echo")
    def echo(env, ctx):
        calls.append(1)
        return {"n": 1}

    instrument(router, tracer_provider=provider)
    with router:
        first = router.route_intent(envelope())
        second = router.route_intent(envelope())
        router.route_intent(envelope(cache="bypass"))
    store.close()
    assert len(calls) == 2
    assert second.metadata.from_replay
    miss, hit, bypass = sorted(
        (s for s in exporter.get_finished_spans() if s.name == "intent echo"),
        key=lambda s: s.start_time,
    )
    assert miss.attributes["intentusnet.cache"] == "miss"
    assert hit.attributes["intentusnet.cache"] == "hit"
    assert hit.attributes["intentusnet.cache.hit"] is True
    assert miss.attributes["intentusnet.cache.hit"] is False
    assert bypass.attributes["intentusnet.cache"] == "bypass"
    source = first.metadata.execution_id
    assert hit.attributes["intentusnet.execution_id"] == source
    assert hit.attributes["intentusnet.envelope_hash"] == first.metadata.envelope_hash
    assert hit.attributes["intentusnet.status"] == "success"
    attempts = [
        s for s in exporter.get_finished_spans() if s.name == "invoke_agent echo"
    ]
    assert len(attempts) == 2  # none for the hit
    assert hit.start_time <= hit.end_time


def test_a_cancelled_routing_call_ends_its_spans(store, provider, exporter):
    """A routing call cancelled mid-attempt: its execution span ends, CANCELLED."""
    router = IntentRouter(store=store)

    @router.agent("echo")
    async def echo(env, ctx):
        running.set()
        await asyncio.sleep(TIMEOUT)
        return {}

    instrument(router, tracer_provider=provider)

    async def main():
        task = asyncio.create_task(router.route(envelope()))
        await asyncio.wait_for(running.wait(), TIMEOUT)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    running = asyncio.Event()
    with router:
        asyncio.run(main())
    spans = by_name(exporter.get_finished_spans())
    execution = spans["intent echo"]
    assert parent_of(spans["invoke_agent echo"]) == execution.context.span_id
    assert execution.status.status_code is StatusCode.ERROR
    assert "cancelled" in (execution.status.description or "")
    (record,) = store.list()
    assert record.status.value == "incomplete"


def test_async_routing_with_async_and_threaded_sync_agents(store, provider, exporter):
    """route(): an async agent and a sync one on a worker thread nest the same."""
    router = IntentRouter(store=store)

    @router.agent("echo")
    async def echo(env, ctx):
        await asyncio.sleep(0)
        return {"n": ctx.step("double", {"x": 2}, lambda x: 2 * x)}

    @router.agent("slow")
    def slow(env, ctx):  # sync, so route() runs it on a worker thread
        assert threading.current_thread() is not threading.main_thread()
        return {"n": ctx.step("triple", {"x": 2}, lambda x: 3 * x)}

    instrument(router, tracer_provider=provider)

    async def main():
        return await asyncio.wait_for(
            asyncio.gather(
                router.route(envelope()),
                router.route({"intent": {"name": "slow"}, "payload": {}}),
            ),
            TIMEOUT,
        )

    with router:
        answers = asyncio.run(main())
    assert [a.payload for a in answers] == [{"n": 4}, {"n": 6}]
    spans = by_name(exporter.get_finished_spans())
    for intent, agent, step in (("echo", "echo", "double"), ("slow", "slow", "triple")):
        execution, attempt = spans[f"intent {intent}"], spans[f"invoke_agent {agent}"]
        assert parent_of(attempt) == execution.context.span_id
        assert parent_of(spans[f"execute_tool {step}"]) == attempt.context.span_id
    assert (
        spans["intent echo"].context.trace_id != spans["intent slow"].context.trace_id
    )


def test_sync_agent_under_a_timeout_runs_on_a_thread_and_nests(
    store, provider, exporter
):
    """With timeoutMs the sync agent runs on a worker thread; its step still nests."""
    router = IntentRouter(store=store)
    threads = []

    @router.agent("echo")
    def echo(env, ctx):
        threads.append(threading.current_thread().name)
        return {"n": ctx.step("work", {}, lambda: 1)}

    instrument(router, tracer_provider=provider)
    with router:
        router.route_intent(envelope(timeoutMs=5000))
    assert threads[0].startswith("intentusnet-agent")
    spans = by_name(exporter.get_finished_spans())
    assert (
        parent_of(spans["execute_tool work"])
        == spans["invoke_agent echo"].context.span_id
    )


def test_root_span_joins_the_callers_current_span(store, provider, exporter):
    """An execution started inside a caller's span is its child, in its trace."""
    router = IntentRouter(store=store)
    router.agent("echo", name="echo")(lambda env, ctx: {})
    instrument(router, tracer_provider=provider)
    tracer = provider.get_tracer("caller")
    with router, tracer.start_as_current_span("request") as outer:
        router.route_intent(envelope())
    spans = by_name(exporter.get_finished_spans())
    assert parent_of(spans["intent echo"]) == outer.get_span_context().span_id


def test_instrumenting_twice_is_once_and_uninstrument_stops(store, provider, exporter):
    """A second instrument() returns the first; after uninstrument() no spans."""
    router = IntentRouter(store=store)
    router.agent("echo", name="echo")(lambda env, ctx: {})
    first = instrument(router, tracer_provider=provider)
    assert instrument(router) is first
    assert router.observers == (first,)
    with router:
        router.route_intent(envelope())
        assert len(exporter.get_finished_spans()) == 2
        first.uninstrument()
        assert router.observers == ()
        router.route_intent(envelope())
        assert len(exporter.get_finished_spans()) == 2
        again = instrument(router, tracer_provider=provider)
        assert again is not first
        router.route_intent(envelope())
        assert len(exporter.get_finished_spans()) == 4
        again.uninstrument()


def test_router_without_a_store_still_traces_attempts(provider, exporter):
    """No store: the execution and attempt spans, no hash, no steps."""
    router = IntentRouter()
    router.agent("echo", name="echo")(
        lambda env, ctx: {"n": ctx.step("s", {}, lambda: 1)}
    )
    instrument(router, tracer_provider=provider)
    with router:
        router.route_intent(envelope())
    spans = by_name(exporter.get_finished_spans())
    assert set(spans) == {"intent echo", "invoke_agent echo"}
    assert "intentusnet.envelope_hash" not in spans["intent echo"].attributes


@pytest.mark.parametrize(
    ("timeout_ms", "asynchronous"),
    [(None, False), (5000, False), (None, True)],
    ids=["caller-thread", "worker-thread", "route"],
)
def test_a_sync_agents_own_spans_nest_in_its_attempt_and_steps(
    store, provider, exporter, timeout_ms, asynchronous
):
    """Spans the agent's code starts nest in its attempt; in a step, in the step."""
    router = IntentRouter(store=store)
    tracer = provider.get_tracer("user code")
    threads = []

    @router.agent("echo")
    def echo(env, ctx):
        threads.append(threading.get_ident())
        with (
            tracer.start_as_current_span("fetch"),
            tracer.start_as_current_span("parse"),
        ):
            pass

        def tokenize(text):
            with tracer.start_as_current_span("split"):
                return text.split()

        return {"words": ctx.step("tokenize", {"text": "a b"}, tokenize)}

    instrument(router, tracer_provider=provider)
    with router:
        if asynchronous:
            response = asyncio.run(router.route(envelope(timeoutMs=timeout_ms)))
        else:
            response = router.route_intent(envelope(timeoutMs=timeout_ms))
    assert response.payload == {"words": ["a", "b"]}
    if timeout_ms is None and not asynchronous:
        assert threads == [threading.get_ident()]
    else:  # a worker thread
        assert threads[0] != threading.get_ident()
    spans = by_name(exporter.get_finished_spans())
    attempt, step = spans["invoke_agent echo"], spans["execute_tool tokenize"]
    assert parent_of(spans["fetch"]) == attempt.context.span_id
    assert parent_of(spans["parse"]) == spans["fetch"].context.span_id
    assert parent_of(step) == attempt.context.span_id
    assert parent_of(spans["split"]) == step.context.span_id
    assert {s.context.trace_id for s in spans.values()} == {attempt.context.trace_id}


def test_an_async_agents_own_spans_nest_across_awaits(store, provider, exporter):
    """An async agent's spans, and an astep's, nest in its attempt and the step."""
    router = IntentRouter(store=store)
    tracer = provider.get_tracer("user code")

    @router.agent("echo")
    async def echo(env, ctx):
        await asyncio.sleep(0)
        with tracer.start_as_current_span("fetch"):
            await asyncio.sleep(0)

        async def lookup():
            await asyncio.sleep(0)
            with tracer.start_as_current_span("query"):
                await asyncio.sleep(0)
            return 1

        n = await ctx.astep("lookup", {}, lookup)
        m = await ctx.astep("charge", {}, lookup, side_effect=True)  # its own task
        await asyncio.sleep(0)
        with tracer.start_as_current_span("answer"):
            return {"n": n + m}

    instrument(router, tracer_provider=provider)
    with router:
        response = router.route_intent(envelope())
    assert response.payload == {"n": 2}
    finished = exporter.get_finished_spans()
    queries = [s for s in finished if s.name == "query"]
    spans = by_name(tuple(s for s in finished if s.name != "query"))
    attempt = spans["invoke_agent echo"].context.span_id
    assert parent_of(spans["fetch"]) == attempt
    assert parent_of(spans["answer"]) == attempt
    assert sorted(parent_of(q) for q in queries) == sorted(
        [
            spans["execute_tool lookup"].context.span_id,
            spans["execute_tool charge"].context.span_id,
        ]
    )


def test_with_a_fallback_each_attempts_spans_are_its_own(store, provider, exporter):
    """The failed first agent's span is in its attempt; the second's in the second."""
    router = IntentRouter(store=store)
    tracer = provider.get_tracer("user code")

    @router.agent("echo", priority=1)
    def first(env, ctx):
        with tracer.start_as_current_span("first call"):
            raise RuntimeError("down")

    @router.agent("echo", priority=2)
    async def second(env, ctx):
        with tracer.start_as_current_span("second call"):
            return {"ok": True}

    instrument(router, tracer_provider=provider)
    with router:
        response = router.route_intent(envelope(strategy="FALLBACK"))
    assert response.status == "success"
    spans = by_name(exporter.get_finished_spans())
    assert parent_of(spans["first call"]) == spans["invoke_agent first"].context.span_id
    assert (
        parent_of(spans["second call"]) == spans["invoke_agent second"].context.span_id
    )
    # the attempt's status is the router's, not the user span's exception record
    assert spans["invoke_agent first"].status.status_code is StatusCode.ERROR
    assert spans["invoke_agent first"].attributes["intentusnet.outcome"] == "error"
    assert spans["invoke_agent second"].status.status_code is StatusCode.UNSET


def test_routing_leaves_the_callers_and_the_workers_current_span_as_it_was(
    store, provider, exporter
):
    """No context leaks: the caller's span stays current; worker threads keep none."""
    router = IntentRouter(store=store, max_workers=1)  # one worker: reused
    tracer = provider.get_tracer("caller")
    seen = []

    @router.agent("echo", name="sync")
    def sync(env, ctx):
        seen.append(trace.get_current_span())
        return {}

    @router.agent("later", name="later")
    async def later(env, ctx):
        seen.append(trace.get_current_span())
        return {}

    def both():
        router.route_intent(envelope(timeoutMs=5000))  # on the worker thread
        router.route_intent({"intent": {"name": "later"}, "payload": {}})  # loop

    instrumentation = instrument(router, tracer_provider=provider)
    with router:
        with tracer.start_as_current_span("request") as outer:
            both()
            assert trace.get_current_span() is outer
            asyncio.run(router.route(envelope()))
            assert trace.get_current_span() is outer
        assert trace.get_current_span() is trace.INVALID_SPAN
        both()
        assert trace.get_current_span() is trace.INVALID_SPAN
        attempts = [s for s in seen if s is not trace.INVALID_SPAN]
        assert len(attempts) == 5
        assert all(s.name.startswith("invoke_agent ") for s in attempts)
        instrumentation.uninstrument()
        seen.clear()
        both()  # the same worker thread and loop, nothing current any more
    assert seen == [trace.INVALID_SPAN, trace.INVALID_SPAN]


def test_a_child_intent_without_a_store_nests_in_the_parents_attempt(
    provider, exporter
):
    """No store, so no route: step span: the child's execution is in the attempt."""
    router = IntentRouter()

    @router.agent("echo")
    def echo(env, ctx):
        return {"child": ctx.route({"intent": {"name": "lookup"}}).payload}

    router.agent("lookup", name="lookup")(lambda env, ctx: {"found": 1})
    instrument(router, tracer_provider=provider)
    with router:
        response = router.route_intent(envelope())
    assert response.payload == {"child": {"found": 1}}
    spans = by_name(exporter.get_finished_spans())
    assert (
        parent_of(spans["intent lookup"]) == spans["invoke_agent echo"].context.span_id
    )
    assert (
        parent_of(spans["invoke_agent lookup"])
        == spans["intent lookup"].context.span_id
    )


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """The fake OpenAI-compatible API, running; stopped after the test."""
    with FakeAPI() as server:
        yield server


def openai_client(transport, url: str) -> openai.OpenAI:
    """The real OpenAI SDK for the API at ``url``, recording through ``transport``."""
    return openai.OpenAI(
        base_url=f"{url}/v1",
        api_key=API_KEY,
        max_retries=0,
        http_client=httpx.Client(transport=transport, timeout=TIMEOUT),
    )


def test_llm_call_from_an_agent_is_one_genai_span_a_hit_spends_nothing(
    tmp_path, api, provider, exporter
):
    """An agent's LLM call: one chat span (its step's); a hit has no usage."""
    store = FileExecutionStore(tmp_path / "records")
    transport = via_httpx.RecordingTransport(store)
    client = openai_client(transport, api.url)
    router = IntentRouter(store=store)

    @router.agent("echo")
    def echo(env, ctx):
        answer = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": "hello"}]
        )
        return {"text": answer.choices[0].message.content}

    instrument(router, tracer_provider=provider)
    with router:
        first = router.route_intent(envelope())
        router.route_intent(envelope({"text": "again"}))  # the call is a hit now
    client.close()
    transport.close()
    store.close()
    assert api.hits == 1
    finished = exporter.get_finished_spans()
    # one span per call: no HTTP step span beside it
    assert sorted(s.name for s in finished) == sorted(
        ["intent echo", "invoke_agent echo", "chat gpt-test"] * 2
    )
    calls = sorted(
        (s for s in finished if s.name == "chat gpt-test"), key=lambda s: s.start_time
    )
    attempts = sorted(
        (s for s in finished if s.name == "invoke_agent echo"),
        key=lambda s: s.start_time,
    )
    text = first.payload["text"]
    for call, attempt in zip(calls, attempts, strict=True):
        assert parent_of(call) == attempt.context.span_id
        assert call.kind.name == "CLIENT"
        attributes = call.attributes
        assert attributes["openinference.span.kind"] == "LLM"
        assert attributes["gen_ai.provider.name"] == "openai"
        assert attributes["gen_ai.system"] == "openai"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.request.model"] == "gpt-test"
        assert attributes["gen_ai.response.model"] == "gpt-test"
        assert attributes["llm.model_name"] == "gpt-test"
        assert attributes["http.response.status_code"] == 200
        assert attributes["url.full"] == f"{api.url}/v1/chat/completions"
        assert attributes["intentusnet.step.name"].startswith("http POST 127.0.0.1:")
        assert "gen_ai.tool.name" not in attributes
        assert "gen_ai.input.messages" not in attributes  # not captured by default
        assert "input.value" not in attributes
        assert API_KEY not in str(dict(attributes))
    miss, hit = (dict(c.attributes) for c in calls)
    assert miss["intentusnet.execution_id"] == first.metadata.execution_id
    assert miss["intentusnet.cache"] == "miss"
    assert miss["intentusnet.cache.hit"] is False
    # the fake counts words: "hello" asked, the text answered
    assert miss["gen_ai.usage.input_tokens"] == 1
    assert miss["gen_ai.usage.output_tokens"] == len(text.split())
    assert miss["llm.token_count.prompt"] == 1
    assert miss["llm.token_count.total"] == 1 + len(text.split())
    assert hit["intentusnet.cache"] == "hit"
    assert hit["intentusnet.cache.hit"] is True
    assert not [k for k in hit if k.startswith(("gen_ai.usage.", "llm.token_count."))]
    assert hit["intentusnet.cache.saved_input_tokens"] == 1
    assert hit["intentusnet.cache.saved_output_tokens"] == len(text.split())
    # both name the call's record: the one the hit was served from
    assert (
        miss["intentusnet.child_execution_id"] == hit["intentusnet.child_execution_id"]
    )


def test_streamed_other_and_failed_calls_in_an_agent_are_one_span_each(
    tmp_path, api, provider, exporter
):
    """A streamed LLM call, another HTTP call, a refused one: one span each."""
    store = FileExecutionStore(tmp_path / "records")
    transport = via_httpx.RecordingTransport(store)
    http = httpx.Client(transport=transport, timeout=TIMEOUT)
    client = openai.OpenAI(
        base_url=f"{api.url}/v1", api_key=API_KEY, max_retries=0, http_client=http
    )
    router = IntentRouter(store=store)

    @router.agent("echo")
    def echo(env, ctx):
        stream = client.chat.completions.create(
            model="gpt-stream",
            stream=True,
            messages=[{"role": "user", "content": "hi there"}],
        )
        text = "".join(c.choices[0].delta.content or "" for c in stream if c.choices)
        other = http.get(f"{api.url}/v1/models").status_code
        with pytest.raises(httpx.ConnectError):
            http.get("http://127.0.0.1:1/down")
        return {"text": text, "other": other}

    instrument(router, tracer_provider=provider)
    with router:
        response = router.route_intent(envelope())
    http.close()
    transport.close()
    store.close()
    assert response.status == "success", response.error
    assert router.observer_errors == 0
    spans = by_name(exporter.get_finished_spans())
    host = api.url.removeprefix("http://")
    attempt = spans["invoke_agent echo"].context.span_id
    assert set(spans) == {
        "intent echo",
        "invoke_agent echo",
        "chat gpt-stream",
        f"execute_tool http GET {host}/v1/models",
        "execute_tool http GET 127.0.0.1:1/down",
    }
    streamed = spans["chat gpt-stream"]
    assert parent_of(streamed) == attempt
    assert streamed.attributes["openinference.span.kind"] == "LLM"
    assert streamed.attributes["gen_ai.request.model"] == "gpt-stream"
    # passed through as it streamed: no body when told, so no counts
    assert "gen_ai.usage.input_tokens" not in streamed.attributes
    assert streamed.end_time >= streamed.start_time
    other = spans[f"execute_tool http GET {host}/v1/models"]
    assert other.kind.name == "CLIENT"
    assert other.attributes["openinference.span.kind"] == "TOOL"
    assert other.attributes["gen_ai.tool.name"] == f"http GET {host}/v1/models"
    assert other.attributes["http.response.status_code"] == response.payload["other"]
    refused = spans["execute_tool http GET 127.0.0.1:1/down"]
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.attributes["intentusnet.outcome"] == "error"
    assert refused.attributes["openinference.span.kind"] == "TOOL"
    assert "http.response.status_code" not in refused.attributes


def test_standalone_transport_instrumented_itself(tmp_path, api, provider, exporter):
    """instrument(transport): each call a root client span; an HTTP error is ERROR."""
    store = FileExecutionStore(tmp_path / "records")
    transport = via_httpx.RecordingTransport(store)
    instrumentation = instrument(transport, tracer_provider=provider)
    assert instrument(transport) is instrumentation
    client = openai_client(transport, api.url)
    reply = client.chat.completions.create(
        model="gpt-solo", messages=[{"role": "user", "content": "hi"}]
    )
    with pytest.raises(openai.RateLimitError):
        client.chat.completions.create(
            model="gpt-solo", messages=[{"role": "user", "content": "fail 429"}]
        )
    instrumentation.uninstrument()
    client.chat.completions.create(
        model="gpt-solo", messages=[{"role": "user", "content": "hi"}]
    )
    client.close()
    transport.close()
    ok, failed = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    assert ok.parent is None
    assert ok.name == "chat gpt-solo"
    assert ok.attributes["intentusnet.cache"] == "miss"
    assert reply.usage is not None
    assert ok.attributes["gen_ai.usage.input_tokens"] == reply.usage.prompt_tokens
    assert ok.attributes["gen_ai.usage.output_tokens"] == reply.usage.completion_tokens
    assert store.exists(ok.attributes["intentusnet.execution_id"])
    store.close()
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["http.response.status_code"] == 429


def test_with_prices_a_call_carries_its_cost_a_hit_zero(
    tmp_path, api, provider, exporter
):
    """prices=: a miss its cost, a hit 0 and its saving; USD only as llm.cost."""
    store = FileExecutionStore(tmp_path / "records")
    euros = PriceTable.from_json(
        {"currency": "EUR", "models": {"gpt-priced": {"input": 1.0, "output": 2.0}}}
    )
    transport = via_httpx.RecordingTransport(store)
    instrument(transport, tracer_provider=provider, prices=euros)
    client = openai_client(transport, api.url)
    replies = [
        client.chat.completions.create(
            model=model, messages=[{"role": "user", "content": "hi there"}]
        )
        for model in ("gpt-priced", "gpt-priced", "gpt-unpriced", "gpt-unpriced")
    ]
    client.close()
    transport.close()
    store.close()
    miss, hit, unpriced_miss, unpriced_hit = (
        dict(s.attributes)
        for s in sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    )
    usage = replies[0].usage
    assert usage is not None
    cost = (usage.prompt_tokens * 1.0 + usage.completion_tokens * 2.0) / 1_000_000
    assert miss["intentusnet.cache"] == "miss"
    assert miss["intentusnet.cost"] == pytest.approx(cost)
    assert miss["intentusnet.cost.currency"] == "EUR"
    assert "llm.cost.total" not in miss  # OpenInference's is in USD
    assert hit["intentusnet.cache"] == "hit"
    assert hit["intentusnet.cost"] == 0.0
    assert hit["intentusnet.cache.saved_cost"] == pytest.approx(cost)
    assert not [k for k in unpriced_miss if k.startswith("intentusnet.cost")]
    assert unpriced_hit["intentusnet.cost"] == 0.0  # a hit costs nothing anyway
    assert "intentusnet.cache.saved_cost" not in unpriced_hit
    dollars = PriceTable.from_json(
        {"currency": "USD", "models": {"gpt-priced": {"input": 1.0, "output": 2.0}}}
    )
    with FileExecutionStore(tmp_path / "records") as again:
        replaying = via_httpx.RecordingTransport(again, mode="replay")
        instrument(replaying, tracer_provider=provider, prices=dollars)
        with openai_client(replaying, api.url) as replay_client:
            replay_client.chat.completions.create(
                model="gpt-priced", messages=[{"role": "user", "content": "hi there"}]
            )
        replaying.close()
    last = max(exporter.get_finished_spans(), key=lambda s: s.start_time)
    assert last.attributes["llm.cost.total"] == 0.0
    assert last.attributes["intentusnet.cache.saved_cost"] == pytest.approx(cost)


def test_spans_reach_an_otlp_http_receiver(store):
    """The real OTLP/HTTP exporter sends an execution's spans to a loopback receiver."""
    with Receiver() as receiver:
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.url, timeout=TIMEOUT))
        )
        router = IntentRouter(store=store)

        @router.agent("echo")
        def echo(env, ctx):
            return {"n": ctx.step("work", {}, lambda: 1)}

        instrument(router, tracer_provider=tracer_provider)
        with router:
            response = router.route_intent(envelope())
        assert tracer_provider.force_flush(TIMEOUT * 1000)
        assert receiver.got.wait(TIMEOUT)
        tracer_provider.shutdown()
    spans = {
        span.name: span
        for request in receiver.requests
        for resource in request.resource_spans
        for scope in resource.scope_spans
        if scope.scope.name == "intentusnet"
        for span in scope.spans
    }
    assert set(spans) == {"intent echo", "invoke_agent echo", "execute_tool work"}
    execution = spans["intent echo"]
    attributes = {a.key: a.value for a in execution.attributes}
    assert attributes["intentusnet.execution_id"].string_value == (
        response.metadata.execution_id
    )
    assert attributes["intentusnet.envelope_hash"].string_value == (
        response.metadata.envelope_hash
    )
    assert attributes["intentusnet.status"].string_value == "success"
    assert attributes["intentusnet.cache"].string_value == "bypass"
    assert spans["invoke_agent echo"].parent_span_id == execution.span_id
    assert (
        spans["execute_tool work"].parent_span_id == spans["invoke_agent echo"].span_id
    )
    assert len({s.trace_id for s in spans.values()}) == 1


def test_genai_spans_with_captured_content_reach_an_otlp_receiver(tmp_path, api):
    """capture_content: kinds, GenAI names, redacted input and messages, over OTLP."""
    store = FileExecutionStore(tmp_path / "records")
    transport = via_httpx.RecordingTransport(store)
    client = openai_client(transport, api.url)
    router = IntentRouter(store=store, redactor=Redactor(b"k" * 16, payload=["pin"]))

    @router.agent("echo")
    def echo(env, ctx):
        words = ctx.step(
            "split", {"text": env.payload["text"]}, lambda text: text.split()
        )
        answer = client.chat.completions.create(
            model="gpt-test", messages=[{"role": "user", "content": words[0]}]
        )
        return {"text": answer.choices[0].message.content}

    with Receiver() as receiver:
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(
            BatchSpanProcessor(OTLPSpanExporter(endpoint=receiver.url, timeout=TIMEOUT))
        )
        instrument(router, tracer_provider=tracer_provider, capture_content=True)
        with router:
            response = router.route_intent(envelope({"text": "hello", "pin": "4321"}))
        assert tracer_provider.force_flush(TIMEOUT * 1000)
        tracer_provider.shutdown()
    client.close()
    transport.close()
    store.close()
    spans = received(receiver)
    assert sorted(spans) == [
        "chat gpt-test",
        "execute_tool split",
        "intent echo",
        "invoke_agent echo",
    ]
    ((execution, intent),) = spans["intent echo"]
    ((attempt, agent),) = spans["invoke_agent echo"]
    ((_, tool),) = spans["execute_tool split"]
    ((call, llm),) = spans["chat gpt-test"]
    assert intent["openinference.span.kind"] == "CHAIN"
    assert agent["openinference.span.kind"] == "AGENT"
    assert agent["gen_ai.operation.name"] == "invoke_agent"
    assert agent["gen_ai.agent.name"] == "echo"
    assert tool["openinference.span.kind"] == "TOOL"
    assert tool["gen_ai.tool.name"] == "split"
    assert llm["openinference.span.kind"] == "LLM"
    assert llm["gen_ai.operation.name"] == "chat"
    assert call.parent_span_id == attempt.span_id
    assert attempt.parent_span_id == execution.span_id
    # the execution's input and output as recorded: the pin a marker
    shown = json.loads(intent["input.value"])
    assert shown["text"] == "hello"
    assert shown["pin"].startswith("[redacted:hmac-sha256:")
    assert "4321" not in str(spans)
    assert intent["input.mime_type"] == "application/json"
    assert json.loads(intent["output.value"]) == response.payload
    assert json.loads(llm["gen_ai.input.messages"]) == [
        {"role": "user", "parts": [{"type": "text", "content": "hello"}]}
    ]
    assert json.loads(llm["gen_ai.output.messages"]) == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": response.payload["text"]}],
            "finish_reason": "stop",
        }
    ]
    assert json.loads(llm["input.value"])["model"] == "gpt-test"
    assert llm["gen_ai.usage.input_tokens"] == 1
    assert API_KEY not in str(spans)


BLOCKER = """
import importlib.abc
import sys


class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocked())
"""


def test_without_opentelemetry_routing_works_and_the_import_says_what_to_install(
    tmp_path,
):
    """Without opentelemetry, routing works and the integration names the extra."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    script = textwrap.dedent(
        """
        import intentusnet
        from intentusnet import IntentRouter, MemoryExecutionStore

        router = IntentRouter(store=MemoryExecutionStore())
        router.agent("echo", name="echo")(lambda env, ctx: {"ok": True})
        with router:
            answer = router.route_intent({"intent": {"name": "echo"}})
        print(answer.status)
        assert "opentelemetry" not in sys.modules
        try:
            import intentusnet.integrations.opentelemetry
        except ImportError as exc:
            print("ImportError:", exc)
        """
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + script],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "success"
    assert lines[1] == (
        "ImportError: intentusnet.integrations.opentelemetry needs OpenTelemetry: "
        "pip install 'intentusnet[otel]'"
    )
