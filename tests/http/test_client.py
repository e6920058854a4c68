"""IntentusClient and AsyncIntentusClient: library types and library errors."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import httpx
import pytest
from livekit import READ_KEY, ROUTE_KEY, LiveServer, echo_router, keyed_app, serving

from intentusnet import (
    EnvelopeValidationError,
    InvalidExecutionId,
    ListFilters,
    RecordIntegrityError,
    RecordNotFound,
    ReplayHashMismatch,
    ReplayNotAllowed,
)
from intentusnet.errors import (
    Forbidden,
    IntentusNetError,
    RequestInvalid,
    RequestTooLarge,
    ResumeRefused,
    ServiceError,
    ServiceUnavailable,
    Unauthorized,
)
from intentusnet.http.client import AsyncIntentusClient, IntentusClient
from intentusnet.http.problem import REFUSALS, from_error
from intentusnet.replay import ReplayEngine
from intentusnet.store import FileExecutionStore

ECHO = {"intent": {"name": "echo"}, "payload": {"text": "hi"}}


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The store of the live router."""
    return tmp_path / "records"


@pytest.fixture
def live(root: Path) -> Iterator[LiveServer]:
    """The echo router served on loopback with keys."""
    with (
        echo_router(root) as router,
        serving(keyed_app(router, max_body_bytes=4096)) as server,
    ):
        yield server


@pytest.fixture
def client(live: LiveServer) -> Iterator[IntentusClient]:
    """A client with the route key."""
    with IntentusClient(live.url, api_key=ROUTE_KEY, trust_env=False) as c:
        yield c


def _execution(client: IntentusClient, **payload: object) -> str:
    answer = client.route({"intent": {"name": "echo"}, "payload": payload})
    assert answer.metadata.execution_id is not None
    return answer.metadata.execution_id


def test_route_and_read_back(client: IntentusClient, root: Path) -> None:
    """route, get_execution and verify give what the library gives in-process."""
    answer = client.route(ECHO)
    assert answer.status == "success"
    assert answer.payload == {"echo": {"text": "hi"}}
    execution_id = answer.metadata.execution_id
    assert execution_id is not None
    with FileExecutionStore(root) as store:
        assert client.get_execution(execution_id) == store.load(execution_id)
        assert client.verify(execution_id) == store.verify(execution_id)
        engine = ReplayEngine(store.load(execution_id))
        assert client.replay(execution_id) == engine.replay()
        assert client.replay(execution_id, envelope=ECHO) == engine.replay()


def test_list_and_iterate(client: IntentusClient, root: Path) -> None:
    """list_executions pages; iter_executions walks every page."""
    ids = [_execution(client, n=n) for n in range(5)]
    page = client.list_executions(ListFilters(limit=2))
    assert [s.execution_id for s in page.items] == ids[::-1][:2]
    assert page.next_cursor is not None
    walked = list(client.iter_executions(ListFilters(limit=2)))
    with FileExecutionStore(root) as store:
        assert walked == store.list()
    assert [s.execution_id for s in walked] == ids[::-1]
    assert client.list_executions(ListFilters(intent="nobody")).items == ()
    assert client.list_executions(ListFilters(status="failed")).next_cursor is None


def test_list_filters_reach_the_store(client: IntentusClient, root: Path) -> None:
    """until, replayable, id_prefix and envelope_hash filter as store.list() does."""
    first = _execution(client, n=1)
    again = _execution(client, n=1)
    other = _execution(client, n=2)
    with FileExecutionStore(root) as store:
        summaries = {s.execution_id: s for s in store.list()}
        filters = ListFilters(
            until=datetime.fromisoformat(summaries[other].created_utc),
            replayable=True,
            envelope_hash=summaries[first].envelope_hash,
        )
        expected = store.list(filters)
    page = client.list_executions(filters)
    assert list(page.items) == expected
    assert [s.execution_id for s in page.items] == [again, first]
    walked = client.iter_executions(
        ListFilters(limit=1, id_prefix=first[:-1], replayable=True)
    )
    assert [s.execution_id for s in walked] == [first]
    assert client.list_executions(ListFilters(replayable=False)).items == ()
    assert page.next_cursor is None
    with pytest.raises(RequestInvalid, match="cursor"):
        client.list_executions(cursor="not-a-cursor")


def test_library_errors_come_back_as_library_errors(
    client: IntentusClient, root: Path
) -> None:
    """Not found, hash mismatch, invalid envelope: the same classes as in-process."""
    with pytest.raises(RecordNotFound, match="exec-nope"):
        client.get_execution("exec-nope")
    with pytest.raises(InvalidExecutionId):
        client.replay("../etc/passwd")
    with pytest.raises(InvalidExecutionId):
        client.verify(".hidden")
    execution_id = _execution(client, text="one")
    with pytest.raises(ReplayHashMismatch) as mismatch:
        client.replay(
            execution_id, envelope={"intent": {"name": "echo"}, "payload": {}}
        )
    assert mismatch.value.paths == ["payload.text"]
    assert mismatch.value.expected.startswith("sha256:")
    with pytest.raises(EnvelopeValidationError) as invalid:
        client.route({"intent": {"name": "echo"}, "surprise": 1})
    assert invalid.value.path == "surprise"


def test_not_replayable_and_damaged(client: IntentusClient, root: Path) -> None:
    """ReplayNotAllowed carries the reason; a damaged record RecordIntegrityError."""
    execution_id = _execution(client, text="x")
    with FileExecutionStore(root) as store:
        store.invalidate(execution_id, "wrong answer")
    with pytest.raises(ReplayNotAllowed) as refused:
        client.replay(execution_id)
    assert refused.value.reason == "manually_invalidated"
    assert refused.value.execution_id == execution_id
    assert client.replay(execution_id, force=True).forced
    damaged = _execution(client, text="y")
    path = next(root.glob(f"*/{damaged}.jsonl"))
    data = bytearray(path.read_bytes())
    data[data.index(b"\n") + 30] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(RecordIntegrityError) as broken:
        client.get_execution(damaged)
    assert broken.value.execution_id == damaged
    assert not client.verify(damaged).valid


def test_service_errors(live: LiveServer) -> None:
    """No key, a read-only key routing, a large body: ServiceError subclasses."""
    with IntentusClient(live.url, trust_env=False) as anonymous:
        with pytest.raises(Unauthorized) as refused:
            anonymous.list_executions()
        assert refused.value.status == 401
        assert refused.value.problem["code"] == "unauthorized"
        assert anonymous.health()["status"] == "ok"
    with IntentusClient(live.url, api_key=READ_KEY, trust_env=False) as reader:
        with pytest.raises(Forbidden):
            reader.route(ECHO)
        assert reader.list_executions().items == ()
    with IntentusClient(live.url, api_key=ROUTE_KEY, trust_env=False) as writer:
        big = {"intent": {"name": "echo"}, "payload": {"text": "x" * 5000}}
        with pytest.raises(RequestTooLarge):
            writer.route(big)


def test_unreachable_service() -> None:
    """Nothing listening is ServiceUnavailable (a ConnectionError)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with IntentusClient(f"http://127.0.0.1:{port}", trust_env=False) as client:
        with pytest.raises(ServiceUnavailable) as down:
            client.route(ECHO)
        assert isinstance(down.value, ConnectionError)


def test_answers_that_are_not_problems() -> None:
    """A 502 page from a proxy is ServiceUnavailable; unknown codes ServiceError."""

    def handler(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/intents":
            return httpx.Response(502, text="<html>bad gateway</html>")
        return httpx.Response(418, json={"code": "teapot", "detail": "short and stout"})

    transport = httpx.MockTransport(handler)
    with IntentusClient("http://service.test", transport=transport) as client:
        with pytest.raises(ServiceUnavailable):
            client.route(ECHO)
        with pytest.raises(ServiceError, match="short and stout") as odd:
            client.list_executions()
        assert odd.value.status == 418


def _error_tree() -> list[type[IntentusNetError]]:
    found, pending = [], [IntentusNetError]
    while pending:
        cls = pending.pop()
        found.append(cls)
        pending.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", _error_tree(), ids=lambda cls: cls.__name__)
def test_every_error_code_comes_back_as_an_error(cls: type[IntentusNetError]) -> None:
    """Every code of the tree is raised as its class, or a ServiceError keeping it."""
    body = {"code": cls.code, "detail": "what happened", "executionId": "x"}

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(409, json={**body, "reason": "owned"})

    transport = httpx.MockTransport(handler)
    client = IntentusClient("http://service.test", transport=transport)
    with client, pytest.raises(IntentusNetError) as raised:
        client.list_executions()
    assert str(raised.value) == "what happened"
    if type(raised.value) is not cls:
        assert type(raised.value) is ServiceError
        assert raised.value.problem["code"] == cls.code
        assert raised.value.status == 409


@pytest.mark.parametrize("cls", REFUSALS, ids=lambda cls: cls.__name__)
def test_a_refusal_keeps_its_reason_over_http(cls: type[ResumeRefused]) -> None:
    """An operator's refusal arrives as its class, with its reason and execution id."""
    refusal = cls("owned", "0" * 32, "another process holds it")
    problem = from_error(refusal)

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(409, json=problem)

    transport = httpx.MockTransport(handler)
    client = IntentusClient("http://service.test", transport=transport)
    with client, pytest.raises(cls) as raised:
        client.list_executions()
    assert (raised.value.reason, raised.value.execution_id) == ("owned", "0" * 32)
    assert str(raised.value) == str(refusal)


def test_async_client(live: LiveServer, root: Path) -> None:
    """AsyncIntentusClient mirrors the blocking client."""

    async def go() -> None:
        async with AsyncIntentusClient(
            live.url, api_key=ROUTE_KEY, trust_env=False
        ) as client:
            answers = await asyncio.gather(
                *(client.route({**ECHO, "payload": {"n": n}}) for n in range(5))
            )
            ids = {a.metadata.execution_id for a in answers}
            pages = client.iter_executions(ListFilters(limit=2))
            walked = [s.execution_id async for s in pages]
            assert set(walked) == ids
            some = walked[0]
            assert (await client.get_execution(some)).execution_id == some
            assert (await client.verify(some)).valid
            assert (await client.replay(some)).from_replay
            assert (await client.list_executions(ListFilters(limit=1))).next_cursor
            assert (await client.health())["status"] == "ok"
            with pytest.raises(RecordNotFound):
                await client.replay("exec-nope")

    asyncio.run(go())


def test_same_code_in_process_and_over_http(tmp_path: Path) -> None:
    """One function, given a router or a client, behaves the same."""
    root = tmp_path / "records"

    def look_up(load: object, execution_id: str) -> str:
        try:
            load(execution_id)  # type: ignore[operator]
        except RecordNotFound as exc:
            return type(exc).__name__
        return "found"

    with echo_router(root) as router, serving(keyed_app(router)) as live:
        with IntentusClient(live.url, api_key=ROUTE_KEY, trust_env=False) as client:
            remote = look_up(client.get_execution, "exec-missing")
        with FileExecutionStore(root) as store:
            local = look_up(store.load, "exec-missing")
    assert remote == local == "RecordNotFound"
