"""Remote agents: RemoteAgent over httpx, agent_app as the other end."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx
import pytest
from livekit import serving

from intentusnet import (
    AgentRegistrationError,
    AgentResponse,
    ErrorCode,
    ErrorInfo,
    IntentEnvelope,
    IntentRouter,
)
from intentusnet.http.agent_app import RemoteContext, agent_app
from intentusnet.http.remote import RemoteAgent, RemotePool
from intentusnet.record.model import EventType
from intentusnet.store import FileExecutionStore

ECHO = {"intent": {"name": "echo"}, "payload": {"text": "hi"}}
Handler = Callable[[httpx.Request], Awaitable[httpx.Response]]


def route_with(
    agent: RemoteAgent, envelope: dict[str, object] = ECHO, **options: object
) -> AgentResponse:
    """Route ``envelope`` through a router holding only ``agent``."""
    with IntentRouter(**options) as router:  # type: ignore[arg-type]
        router.register(agent.definition, agent)

        async def go() -> AgentResponse:
            try:
                return await router.route(envelope)
            finally:
                await agent.pool.aclose()

        return asyncio.run(go())


def mocked(handler: Handler, **options: object) -> RemoteAgent:
    """A RemoteAgent whose HTTP calls go to ``handler``."""
    pool = RemotePool(transport=httpx.MockTransport(handler), trust_env=False)
    return RemoteAgent(
        "remote",
        "http://agent.test/",
        intents=["echo"],
        pool=pool,
        **options,  # type: ignore[arg-type]
    )


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


def error_of(answer: AgentResponse) -> ErrorInfo:
    """The error of an error answer."""
    assert answer.status == "error"
    assert answer.error is not None
    return answer.error


def test_round_trip_through_agent_app(tmp_path: Path) -> None:
    """A real agent_app on loopback answers; the context carries the execution."""
    seen: list[RemoteContext] = []

    async def handler(env: IntentEnvelope, ctx: RemoteContext) -> dict[str, object]:
        seen.append(ctx)
        return {"echo": env.payload}

    pool = RemotePool(trust_env=False)
    with serving(agent_app(handler)) as live:
        agent = RemoteAgent("far", live.url + "/", intents=["echo"], pool=pool)
        env = {**ECHO, "routing": {"timeoutMs": 5000}}
        store = FileExecutionStore(tmp_path)
        answer = route_with(agent, env, store=store)
    assert answer.status == "success"
    assert answer.payload == {"echo": {"text": "hi"}}
    assert answer.metadata.agent == "far"
    assert seen[0].execution_id == answer.metadata.execution_id
    assert (seen[0].agent, seen[0].attempt) == ("far", 1)
    assert seen[0].remaining_ms is not None
    assert 0 < seen[0].remaining_ms <= 5000
    record = store.load(str(answer.metadata.execution_id))
    assert record.header.status == "completed"
    store.close()


def test_sync_handler_and_handler_errors() -> None:
    """Sync handlers run; one that raises answers AGENT_ERROR under the local name."""

    def handler(env: IntentEnvelope, ctx: RemoteContext) -> dict[str, object]:
        if env.payload.get("fail"):
            raise RuntimeError("boom")
        return {"sync": True}

    pool = RemotePool(trust_env=False)
    with serving(agent_app(handler)) as live:
        agent = RemoteAgent("far", live.url, intents=["echo"], pool=pool)
        assert route_with(agent).payload == {"sync": True}
        failed = route_with(agent, {"intent": {"name": "echo"}, "payload": {"fail": 1}})
    error = error_of(failed)
    assert error.code is ErrorCode.AGENT_ERROR
    assert error.agent == "far"
    assert "RuntimeError: boom" in error.message


def test_connection_refused_feeds_fallback(tmp_path: Path) -> None:
    """A refused connection is AGENT_UNAVAILABLE, and FALLBACK moves on."""
    pool = RemotePool(trust_env=False)
    url = f"http://127.0.0.1:{closed_port()}/"
    agent = RemoteAgent("gone", url, intents=["echo"], pool=pool, priority=1)
    assert error_of(route_with(agent)).code is ErrorCode.AGENT_UNAVAILABLE
    store = FileExecutionStore(tmp_path)
    with IntentRouter(store=store) as router:
        router.register(agent.definition, agent)
        router.agent("echo", name="local", priority=2)(lambda env, ctx: {"ok": 1})
        env = {**ECHO, "routing": {"strategy": "FALLBACK"}}
        answer = router.route_intent(env)
        pool.close()
    assert answer.payload == {"ok": 1}
    record = store.load(str(answer.metadata.execution_id))
    fallback = [e for e in record.events if e.type is EventType.FALLBACK_TRIGGERED]
    assert fallback[0].data["reason"] == "AGENT_UNAVAILABLE"
    store.close()


def test_timeout_is_agent_timeout() -> None:
    """No answer within timeout_ms is AGENT_TIMEOUT, retryable."""
    release = threading.Event()

    async def slow(env: IntentEnvelope, ctx: RemoteContext) -> dict[str, object]:
        await asyncio.to_thread(release.wait, 30)  # answers only after the route
        return {}

    pool = RemotePool(trust_env=False)
    with serving(agent_app(slow)) as live:
        agent = RemoteAgent(
            "slow", live.url, intents=["echo"], timeout_ms=100, pool=pool
        )
        try:
            error = error_of(route_with(agent))
        finally:
            release.set()
    assert error.code is ErrorCode.AGENT_TIMEOUT
    assert error.retryable


@pytest.mark.parametrize(
    ("status", "code", "retryable"),
    [
        (503, ErrorCode.AGENT_UNAVAILABLE, True),
        (500, ErrorCode.AGENT_UNAVAILABLE, True),
        (429, ErrorCode.AGENT_UNAVAILABLE, True),
        (404, ErrorCode.AGENT_UNAVAILABLE, False),
        (504, ErrorCode.AGENT_TIMEOUT, True),
        (408, ErrorCode.AGENT_TIMEOUT, True),
    ],
)
def test_non_2xx(status: int, code: ErrorCode, retryable: bool) -> None:
    """Statuses outside 2xx map to error codes, with the status in details."""

    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(status, text="nope")

    error = error_of(route_with(mocked(answer)))
    assert error.code is code
    assert error.retryable is retryable
    assert error.details["status"] == status
    assert error.details["body"] == "nope"


@pytest.mark.parametrize(
    "exception",
    [
        httpx.ReadTimeout("slow"),
        httpx.ConnectError("refused"),
        httpx.ConnectTimeout("x"),
    ],
)
def test_transport_failures(exception: Exception) -> None:
    """Read timeouts are AGENT_TIMEOUT; connect failures AGENT_UNAVAILABLE."""

    async def fail(request: httpx.Request) -> httpx.Response:
        raise exception

    error = error_of(route_with(mocked(fail)))
    expected = (
        ErrorCode.AGENT_TIMEOUT
        if isinstance(exception, httpx.ReadTimeout)
        else ErrorCode.AGENT_UNAVAILABLE
    )
    assert error.code is expected


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[1, 2]",
        b'{"status": "success", "payload": "not an object"}',
        b'{"status": "error", "error": {"code": "NOPE", "message": "x"}}',
        b'{"big": "' + b"x" * 2048 + b'"}',
    ],
)
def test_invalid_bodies(body: bytes) -> None:
    """Bodies that are not JSON objects or valid answers are INVALID_RESPONSE."""

    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body)

    agent = mocked(answer, max_response_bytes=1024)
    assert error_of(route_with(agent)).code is ErrorCode.INVALID_RESPONSE


def test_plain_objects_are_payloads_and_headers_are_sent() -> None:
    """Any other JSON object is the payload; configured headers are sent."""
    requests: list[httpx.Request] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={"status": "ok", "answer": 42})

    agent = mocked(answer, headers={"Authorization": "Bearer agent-key"})
    env = {**ECHO, "routing": {"timeoutMs": 2000}}
    assert route_with(agent, env).payload == {"status": "ok", "answer": 42}
    sent = requests[0]
    assert sent.headers["authorization"] == "Bearer agent-key"
    assert sent.headers["x-intentusnet-agent"] == "remote"
    assert sent.headers["x-intentusnet-attempt"] == "1"
    assert 0 < int(sent.headers["x-intentusnet-timeout-ms"]) <= 2000
    assert IntentEnvelope.model_validate_json(sent.content).payload == {"text": "hi"}


def test_remote_error_answers_keep_their_code() -> None:
    """An AgentResponse error from the remote keeps its code, under the local name."""

    async def answer(request: httpx.Request) -> httpx.Response:
        error = {"code": "AGENT_ERROR", "message": "no", "agent": "theirs"}
        return httpx.Response(200, json={"status": "error", "error": error})

    error = error_of(route_with(mocked(answer)))
    assert (error.code, error.agent, error.message) == (
        ErrorCode.AGENT_ERROR,
        "remote",
        "no",
    )


def test_route_intent_uses_the_router_loop() -> None:
    """The synchronous path works too, and close() releases the pool's clients."""

    async def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"n": 1})

    agent = mocked(answer)
    with IntentRouter() as router:
        router.register(agent.definition, agent)
        assert router.route_intent(ECHO).payload == {"n": 1}
        assert router.route_intent(ECHO).payload == {"n": 1}
        agent.pool.close()


@pytest.mark.parametrize("url", ["ftp://x/", "not a url", "http://"])
def test_bad_urls_are_refused(url: str) -> None:
    """Only http(s) URLs with a host make a RemoteAgent."""
    with pytest.raises(AgentRegistrationError):
        RemoteAgent("bad", url, intents=["echo"])


async def _asgi(
    app: object, method: str, path: str, **kwargs: object
) -> httpx.Response:
    transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
    async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
        return await http.request(method, path, **kwargs)  # type: ignore[arg-type]


def test_agent_app_refusals() -> None:
    """agent_app answers problems for bad paths, methods, bodies and keys."""

    def handler(env: IntentEnvelope, ctx: RemoteContext) -> AgentResponse:
        return AgentResponse(payload={"ok": True})

    app = agent_app(handler, api_key="agent-key-0123456789", max_body_bytes=100)
    key = {"Authorization": "Bearer agent-key-0123456789"}

    def call(method: str, path: str, **kwargs: object) -> httpx.Response:
        return asyncio.run(_asgi(app, method, path, **kwargs))

    assert call("GET", "/healthz").json() == {"status": "ok"}
    cases = [
        (call("GET", "/nope"), 404, "not_found"),
        (call("GET", "/"), 405, "method_not_allowed"),
        (call("POST", "/", json=ECHO), 401, "unauthorized"),
        (call("POST", "/", content=b"x" * 200, headers=key), 413, "request_too_large"),
        (call("POST", "/", content=b"{", headers=key), 400, "malformed_request"),
        (call("POST", "/", json={"x": 1}, headers=key), 422, "envelope_invalid"),
    ]
    for answer, status, code in cases:
        assert answer.status_code == status
        assert answer.headers["content-type"] == "application/problem+json"
        assert answer.json()["code"] == code
    ok = call("POST", "/", json=ECHO, headers=key).json()
    assert ok == {"status": "success", "payload": {"ok": True}, "error": None}


def test_agent_app_refuses_what_is_not_an_answer() -> None:
    """A handler returning neither a dict nor an AgentResponse: INVALID_RESPONSE."""
    app = agent_app(lambda env, ctx: [1, 2])  # type: ignore[arg-type,return-value]
    answer = asyncio.run(_asgi(app, "POST", "/", json=ECHO)).json()
    assert answer["error"]["code"] == "INVALID_RESPONSE"
