"""The clients' idempotency keys and asynchronous submit, end to end and on the wire."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from livekit import ROUTE_KEY, LiveServer, keyed_app, serving

from intentusnet import (
    AsyncSubmission,
    ExecutionPending,
    IdempotencyConflict,
    IntentEnvelope,
    IntentRouter,
    InvalidIdempotencyKey,
    Submission,
)
from intentusnet.errors import ServiceUnavailable
from intentusnet.http.client import AsyncIntentusClient, IntentusClient
from intentusnet.store import FileExecutionStore

ORDER = {"intent": {"name": "order"}, "payload": {"n": 1}}


class Gated:
    """A router whose ``order`` agent waits for ``gate``; ``ran`` counts runs."""

    def __init__(self, root: Path) -> None:
        self.gate = threading.Event()
        self.ran: list[int] = []
        self.router = IntentRouter(store=FileExecutionStore(root))

        @self.router.agent("order", name="order")
        def order(env: IntentEnvelope, ctx: object) -> dict[str, object]:
            self.ran.append(1)
            assert self.gate.wait(20), "the test never opened the gate"
            return {"total": env.payload["n"] * 10}


@pytest.fixture
def gated(tmp_path: Path) -> Iterator[Gated]:
    """The gated router, closed after the test."""
    made = Gated(tmp_path / "records")
    with made.router:
        yield made
    made.gate.set()


@pytest.fixture
def live(gated: Gated) -> Iterator[LiveServer]:
    """The gated router served on loopback."""
    with serving(keyed_app(gated.router)) as server:
        yield server
        gated.gate.set()


def test_submit_returns_before_the_agent_ends_and_result_waits(
    gated: Gated, live: LiveServer
) -> None:
    """submit() returns a handle while the agent runs; result() gets the answer."""
    with IntentusClient(live.url, ROUTE_KEY, trust_env=False) as client:
        handle = client.submit(ORDER)
        assert isinstance(handle, Submission)
        assert gated.ran == [1]
        with pytest.raises(ExecutionPending) as pending:
            handle.result(timeout=0.2)
        assert pending.value.execution_id == handle.execution_id
        assert pending.value.status == "in_progress"
        gated.gate.set()
        answer = handle.result(timeout=30)
    assert answer.status == "success"
    assert answer.payload == {"total": 10}
    assert answer.metadata.execution_id == handle.execution_id


def test_async_submit_and_result(gated: Gated, live: LiveServer) -> None:
    """The async client: await submit(), await result()."""

    async def main() -> object:
        async with AsyncIntentusClient(live.url, ROUTE_KEY, trust_env=False) as client:
            handle = await client.submit(ORDER, idempotency_key="a-1")
            assert isinstance(handle, AsyncSubmission)
            gated.gate.set()
            return (await handle.result(timeout=30)).payload

    assert asyncio.run(main()) == {"total": 10}
    assert gated.ran == [1]


def test_route_with_a_key_runs_once_and_submit_finds_it(
    gated: Gated, live: LiveServer
) -> None:
    """route(idempotency_key=) twice runs once; submit() with it answers at once."""
    gated.gate.set()
    with IntentusClient(live.url, ROUTE_KEY, trust_env=False) as client:
        first = client.route(ORDER, idempotency_key='quote " and \\ slash')
        again = client.route(ORDER, idempotency_key='quote " and \\ slash')
        handle = client.submit(ORDER, idempotency_key='quote " and \\ slash')
        answer = handle.result(timeout=0)
    assert gated.ran == [1]
    assert again.metadata.from_replay
    assert answer.metadata.from_replay
    assert answer.payload == first.payload


def test_a_conflicting_key_raises_the_library_error(
    gated: Gated, live: LiveServer
) -> None:
    """Key reused with another envelope: IdempotencyConflict with both hashes."""
    gated.gate.set()
    other = {"intent": {"name": "order"}, "payload": {"n": 2}}

    async def other_async() -> None:
        async with AsyncIntentusClient(live.url, ROUTE_KEY, trust_env=False) as client:
            await client.route(other, idempotency_key="k")

    with IntentusClient(live.url, ROUTE_KEY, trust_env=False) as client:
        first = client.route(ORDER, idempotency_key="k")
        with pytest.raises(IdempotencyConflict) as conflict:
            client.route(other, idempotency_key="k")
    with pytest.raises(IdempotencyConflict):
        asyncio.run(other_async())
    router = gated.router
    assert conflict.value.key == "k"
    assert conflict.value.recorded_hash == router.envelope_hash(
        IntentEnvelope.model_validate(ORDER)
    )
    assert conflict.value.given_hash == router.envelope_hash(
        IntentEnvelope.model_validate(other)
    )
    assert conflict.value.execution_id == first.metadata.execution_id
    assert gated.ran == [1]


def test_the_key_goes_out_as_a_structured_field_string() -> None:
    """Idempotency-Key is an RFC 8941 string: quoted, with " and \\ escaped."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(
            202,
            json={"executionId": "exec-1", "location": "/v1/executions/exec-1"},
        )

    with IntentusClient("http://svc", transport=httpx.MockTransport(answer)) as client:
        handle = client.submit(ORDER, idempotency_key='a"b\\c')
    assert handle.execution_id == "exec-1"
    assert sent[0].headers["idempotency-key"] == '"a\\"b\\\\c"'
    assert sent[0].headers["prefer"] == "respond-async"


@pytest.mark.parametrize("key", ["", "k" * 256, "line\r\nX-Injected: 1", "caf\u00e9"])
def test_a_bad_key_is_refused_before_sending(key: str) -> None:
    """A key the router would refuse raises InvalidIdempotencyKey; nothing is sent."""
    sent: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(500)

    with IntentusClient("http://svc", transport=httpx.MockTransport(answer)) as client:
        with pytest.raises(InvalidIdempotencyKey):
            client.route(ORDER, idempotency_key=key)
        with pytest.raises(InvalidIdempotencyKey):
            client.submit(ORDER, idempotency_key=key)
    assert sent == []


def test_result_polls_with_bounded_waits() -> None:
    """result() asks ?wait= of at most 60 s per request until the record is done."""
    asked: list[str] = []
    states = iter(["in_progress", "incomplete", "completed"])

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(202, json={"executionId": "exec-1"})
        asked.append(request.url.params["wait"])
        status = next(states)
        final = (
            {"status": "success", "payload": {"ok": 1}}
            if status == "completed"
            else None
        )
        return httpx.Response(
            200, json={"header": {"status": status}, "finalResponse": final}
        )

    with IntentusClient("http://svc", transport=httpx.MockTransport(answer)) as client:
        answer_ = client.submit(ORDER).result()
    assert answer_.payload == {"ok": 1}
    assert asked == ["60.000", "60.000", "60.000"]


def test_result_polls_again_after_a_lost_connection() -> None:
    """A poll with no answer (a worker killed) is tried again, until the timeout."""
    calls: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            return httpx.Response(202, json={"executionId": "exec-1"})
        calls.append("GET")
        if len(calls) == 1:
            raise httpx.ReadError("connection reset by peer")
        final = {"status": "success", "payload": {"ok": 1}}
        return httpx.Response(
            200, json={"header": {"status": "completed"}, "finalResponse": final}
        )

    async def lost(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused")

    with IntentusClient("http://svc", transport=httpx.MockTransport(answer)) as client:
        assert client.submit(ORDER).result(timeout=30).payload == {"ok": 1}
    assert calls == ["GET", "GET"]

    async def main() -> None:
        transport = httpx.MockTransport(lost)
        async with AsyncIntentusClient("http://svc", transport=transport) as client:
            handle = AsyncSubmission("exec-1", client._poll)
            with pytest.raises(ServiceUnavailable):
                await handle.result(timeout=0.6)

    asyncio.run(main())
