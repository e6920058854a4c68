"""The HTTP API against a real uvicorn on loopback: every endpoint and error."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from integrations.fakeapi import FakeAPI
from livekit import READ_KEY, ROUTE_KEY, LiveServer, echo_router, keyed_app, serving
from llmkit import record_calls

from intentusnet import IntentEnvelope, IntentRouter, PriceTable, compute_hash
from intentusnet.record.model import EventType
from intentusnet.server import create_app
from intentusnet.server.schemas import Savings
from intentusnet.store import FileExecutionStore

PROBLEM = "application/problem+json"


# Most tests here need a live server, not an empty store: they share one server
# per module (the conftest's fixtures of these names, at module scope). Those that
# count what is stored or served get their own: ``empty_http`` and its store.


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store directory of the module's live server."""
    return tmp_path_factory.mktemp("shared") / "records"


@pytest.fixture(scope="module")
def live_router(store_root: Path) -> Iterator[IntentRouter]:
    """The module's echo router, closed after the module's tests."""
    with echo_router(store_root) as router:
        yield router


@pytest.fixture(scope="module")
def live(live_router: IntentRouter) -> Iterator[LiveServer]:
    """The module's live server: a route key, a read-only key, 64 KiB bodies."""
    with serving(keyed_app(live_router, max_body_bytes=64 * 1024)) as server:
        yield server


@pytest.fixture
def empty_root(tmp_path: Path) -> Path:
    """The store directory of a test's own live server."""
    return tmp_path / "records"


@pytest.fixture
def empty_live(empty_root: Path) -> Iterator[LiveServer]:
    """A live server of its own, recording to ``empty_root``, for one test."""
    with (
        echo_router(empty_root) as router,
        serving(keyed_app(router, max_body_bytes=64 * 1024)) as server,
    ):
        yield server


@pytest.fixture
def empty_http(empty_live: LiveServer) -> Iterator[httpx.Client]:
    """An httpx client of ``empty_live``, sending the route key."""
    headers = {"Authorization": f"Bearer {ROUTE_KEY}"}
    with httpx.Client(
        base_url=empty_live.url, headers=headers, trust_env=False
    ) as client:
        yield client


def envelope(intent: str = "echo", **payload: object) -> dict[str, object]:
    """A wire envelope."""
    return {"intent": {"name": intent}, "payload": payload}


def route(http: httpx.Client, env: dict[str, object]) -> dict[str, object]:
    """Route one envelope and return the AgentResponse wire dict."""
    answer = http.post("/v1/intents", json=env)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert isinstance(body, dict)
    return body


def execution_id(answer: dict[str, object]) -> str:
    """The execution id of an AgentResponse wire dict."""
    metadata = answer["metadata"]
    assert isinstance(metadata, dict)
    return str(metadata["executionId"])


def problem(answer: httpx.Response, status: int, code: str) -> dict[str, object]:
    """Check that ``answer`` is a problem document with this status and code."""
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == PROBLEM
    body = answer.json()
    assert body["code"] == code
    assert body["status"] == status
    assert body["type"] == f"urn:intentusnet:problem:{code}"
    return dict(body)


def record_path(root: Path, execution_id: str) -> Path:
    """The file of one record."""
    return next(root.glob(f"*/{execution_id}.jsonl"))


def incomplete_record(root: Path) -> str:
    """Write a record whose execution never finished; return its id."""
    wire = IntentEnvelope.model_validate(envelope(text="crashed")).to_wire()
    with FileExecutionStore(root) as store:
        writer = store.open(wire, envelope_hash=compute_hash(wire))
        writer.append(EventType.AGENT_ATTEMPT_START, {"agent": "echo", "attempt": 1})
        writer.append(
            EventType.AGENT_ATTEMPT_END,
            {
                "agent": "echo",
                "attempt": 1,
                "outcome": "success",
                "durationMs": 1.0,
                "output": {"echo": "partial"},
                "error": None,
                "traceback": None,
            },
        )
        writer.close()
        return writer.execution_id


def test_route_answers_and_records(http: httpx.Client, store_root: Path) -> None:
    """POST /v1/intents answers an AgentResponse and the execution is recorded."""
    answer = route(http, envelope(text="hi"))
    assert answer["status"] == "success"
    assert answer["payload"] == {"echo": {"text": "hi"}}
    with FileExecutionStore(store_root) as store:
        record = store.load(execution_id(answer))
    assert record.header.status == "completed"
    assert record.final_response == answer


def test_agent_faults_are_data(http: httpx.Client) -> None:
    """A failing agent is a 200 error answer; FALLBACK moves on to the next agent."""
    direct = route(http, envelope("flaky"))
    assert direct["status"] == "error"
    assert direct["error"]["code"] == "AGENT_ERROR"  # type: ignore[index]
    env = {**envelope("flaky"), "routing": {"strategy": "FALLBACK"}}
    assert route(http, env)["payload"] == {"n": 2}
    nobody = route(http, envelope("nobody"))
    assert nobody["error"]["code"] == "NO_AGENT"  # type: ignore[index]


def test_list_pages_with_cursor(empty_http: httpx.Client, empty_root: Path) -> None:
    """Pages of 3 walk every record once, newest first, and end with no cursor."""
    for n in range(7):
        route(empty_http, envelope(n=n))
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params: dict[str, str | int] = {"limit": 3}
        if cursor:
            params["cursor"] = cursor
        page = empty_http.get("/v1/executions", params=params).json()
        seen += [item["executionId"] for item in page["items"]]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    with FileExecutionStore(empty_root) as store:
        assert seen == [s.execution_id for s in store.list()]
    assert pages == 3
    assert len(set(seen)) == 7


def test_list_cursor_survives_new_records(empty_http: httpx.Client) -> None:
    """Records routed between two pages neither repeat nor shift the next page."""
    ids = [execution_id(route(empty_http, envelope(n=n))) for n in range(4)]
    first = empty_http.get("/v1/executions", params={"limit": 2}).json()
    for n in range(5):
        route(empty_http, envelope(late=n))
    params = {"limit": 2, "cursor": first["nextCursor"]}
    second = empty_http.get("/v1/executions", params=params).json()
    got = [i["executionId"] for i in first["items"] + second["items"]]
    assert got == ids[::-1]


def test_list_filters(empty_http: httpx.Client) -> None:
    """intent and status filter as ``records list`` does."""
    route(empty_http, envelope(text="a"))
    route(empty_http, envelope("nobody"))
    echo = listed(empty_http, intent="echo")
    assert [i["intent"]["name"] for i in echo] == ["echo"]
    failed = listed(empty_http, status="failed")
    assert [i["intent"]["name"] for i in failed] == ["nobody"]
    since = empty_http.get("/v1/executions", params={"since": "2999-01-01T00:00:00Z"})
    assert since.json() == {"items": [], "nextCursor": None}


@pytest.mark.parametrize(
    "params",
    [{"cursor": "not-a-cursor"}, {"limit": 0}, {"limit": 5000}, {"status": "x"}],
)
def test_list_refuses_bad_parameters(
    http: httpx.Client, params: dict[str, object]
) -> None:
    """A bad cursor, limit or status is a 422 request_invalid problem."""
    answer = http.get("/v1/executions", params=params)  # type: ignore[arg-type]
    body = problem(answer, 422, "request_invalid")
    assert body["errors"] or "cursor" in str(body["detail"])


def listed(http: httpx.Client, **params: object) -> list[dict[str, object]]:
    """The items of one page of GET /v1/executions with these parameters."""
    answer = http.get("/v1/executions", params=params)  # type: ignore[arg-type]
    assert answer.status_code == 200, answer.text
    items = answer.json()["items"]
    assert isinstance(items, list)
    return items


def test_list_new_filters(empty_http: httpx.Client, empty_root: Path) -> None:
    """until, replayable, id_prefix and envelope_hash filter as store.list does."""
    env = envelope(text="twice")
    first = execution_id(route(empty_http, env))
    second = execution_id(route(empty_http, env))
    other = execution_id(route(empty_http, envelope(text="other")))
    crashed = incomplete_record(empty_root)
    every = listed(empty_http)
    assert [i["executionId"] for i in every] == [crashed, other, second, first]
    created = {str(i["executionId"]): str(i["createdUtc"]) for i in every}
    # until is exclusive: the record created at that very time is left out.
    before_other = listed(empty_http, until=created[other])
    assert [i["executionId"] for i in before_other] == [second, first]
    assert listed(empty_http, until=created[first]) == []
    assert len(listed(empty_http, until="2999-01-01T00:00:00Z")) == 4
    no = listed(empty_http, replayable="false")
    assert [i["executionId"] for i in no] == [crashed]
    yes = listed(empty_http, replayable="true")
    assert [i["executionId"] for i in yes] == [other, second, first]
    prefix = listed(empty_http, id_prefix=second[:-1])
    assert [i["executionId"] for i in prefix] == [second]
    assert listed(empty_http, id_prefix="exec-zzz") == []
    same = compute_hash(env)
    by_hash = listed(empty_http, envelope_hash=same)
    assert [i["executionId"] for i in by_hash] == [second, first]
    assert all(i["envelopeHash"] == same for i in by_hash)
    both = listed(
        empty_http, envelope_hash=same, until=created[second], replayable="true"
    )
    assert [i["executionId"] for i in both] == [first]
    assert listed(empty_http, envelope_hash="sha256:" + "0" * 64) == []


def test_list_filters_combine_with_cursor(empty_http: httpx.Client) -> None:
    """A filtered listing pages by cursor: every match once, newest first, no other."""
    env = envelope(text="paged")
    wanted = [execution_id(route(empty_http, env)) for _ in range(7)]
    for n in range(3):
        route(empty_http, envelope(noise=n))
    cut = execution_id(route(empty_http, env))  # matches the hash, but not until
    created = {str(i["executionId"]): str(i["createdUtc"]) for i in listed(empty_http)}
    filters = {
        "envelope_hash": compute_hash(env),
        "until": created[cut],
        "replayable": "true",
        "id_prefix": "exec-",
        "limit": 2,
    }
    seen: list[str] = []
    cursor = None
    pages = 0
    while pages < 10:
        params = dict(filters) if cursor is None else {**filters, "cursor": cursor}
        page = empty_http.get("/v1/executions", params=params).json()  # type: ignore[arg-type]
        seen += [item["executionId"] for item in page["items"]]
        pages += 1
        cursor = page["nextCursor"]
        if cursor is None:
            break
    assert seen == wanted[::-1]
    assert pages == 4


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"until": "tomorrow"}, "query.until"),
        ({"replayable": "maybe"}, "query.replayable"),
        ({"id_prefix": "a/b"}, "query.id_prefix"),
        ({"id_prefix": ""}, "query.id_prefix"),
        ({"id_prefix": "x" * 129}, "query.id_prefix"),
        ({"envelope_hash": "sha256:abc"}, "query.envelope_hash"),
        ({"envelope_hash": "SHA256:" + "A" * 64}, "query.envelope_hash"),
        ({"envelope_hash": "sha256:" + "0" * 64 + "\n"}, "query.envelope_hash"),
    ],
)
def test_list_refuses_bad_new_filters(
    http: httpx.Client, params: dict[str, str], where: str
) -> None:
    """A bad until, replayable, id_prefix or envelope_hash is a 422 naming it."""
    answer = http.get("/v1/executions", params=params)
    body = problem(answer, 422, "request_invalid")
    assert [e["location"] for e in body["errors"]] == [where]  # type: ignore[attr-defined]
    assert where in str(body["detail"])


def test_show_returns_the_record(http: httpx.Client, store_root: Path) -> None:
    """GET /v1/executions/{id} is the record's to_json()."""
    eid = execution_id(route(http, envelope(text="show me")))
    shown = http.get(f"/v1/executions/{eid}").json()
    with FileExecutionStore(store_root) as store:
        assert shown == store.load(eid).to_json()


def test_show_unknown_and_invalid_ids(http: httpx.Client) -> None:
    """Unknown ids are record_not_found, malformed ones invalid_execution_id: 404."""
    problem(http.get("/v1/executions/exec-nope"), 404, "record_not_found")
    problem(http.get("/v1/executions/.hidden"), 404, "invalid_execution_id")
    problem(http.get("/v1/executions/a%2F..%2Fb"), 404, "not_found")


def test_replay_returns_the_recorded_answer(http: httpx.Client) -> None:
    """Replay gives the recorded payload; with the same envelope it still matches."""
    env = envelope(text="again")
    answer = route(http, env)
    eid = execution_id(answer)
    replayed = http.post(f"/v1/executions/{eid}/replay").json()
    assert replayed["payload"] == answer["payload"]
    assert replayed["fromReplay"] is True
    assert replayed["originalExecutionId"] == eid
    checked = http.post(f"/v1/executions/{eid}/replay", json={"envelope": env})
    assert checked.status_code == 200


def test_replay_envelope_mismatch(http: httpx.Client) -> None:
    """Another envelope is 422 replay_hash_mismatch naming both hashes and paths."""
    eid = execution_id(route(http, envelope(text="one")))
    answer = http.post(
        f"/v1/executions/{eid}/replay", json={"envelope": envelope(text="two")}
    )
    body = problem(answer, 422, "replay_hash_mismatch")
    assert body["paths"] == ["payload.text"]
    assert str(body["expected"]).startswith("sha256:")
    assert body["expected"] != body["actual"]


def test_replay_force(live: LiveServer, http: httpx.Client, store_root: Path) -> None:
    """An unfinished record is 409 unless forced; forced, it is partial."""
    eid = incomplete_record(store_root)
    body = problem(http.post(f"/v1/executions/{eid}/replay"), 409, "replay_not_allowed")
    assert body["reason"] == "execution_incomplete"
    forced = http.post(f"/v1/executions/{eid}/replay", json={"force": True}).json()
    assert forced["forced"] is True
    assert forced["partial"] is True
    assert forced["payload"] == {"echo": "partial"}
    assert forced["warnings"]


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({"force": "yes"}, "request_invalid"),
        ({"bogus": 1}, "request_invalid"),
        ({"envelope": {"intent": {"name": "echo"}, "bogus": 1}}, "envelope_invalid"),
        ([1, 2], "request_invalid"),
    ],
)
def test_replay_refuses_bad_bodies(http: httpx.Client, body: object, code: str) -> None:
    """Unknown fields and wrong types in a replay body are 422 problems."""
    eid = execution_id(route(http, envelope(text="x")))
    problem(http.post(f"/v1/executions/{eid}/replay", json=body), 422, code)


def test_verify(http: httpx.Client, store_root: Path) -> None:
    """Verify reports a valid chain, and a flipped byte as invalid (show: 409)."""
    eid = execution_id(route(http, envelope(text="verify")))
    report = http.get(f"/v1/executions/{eid}/verify").json()
    assert report["valid"] is True
    assert report["eventsVerified"] == report["eventsTotal"]
    path = record_path(store_root, eid)
    data = bytearray(path.read_bytes())
    second = data.index(b"\n") + 1
    data[second + 20] ^= 0x01
    path.write_bytes(bytes(data))
    report = http.get(f"/v1/executions/{eid}/verify").json()
    assert report["valid"] is False
    assert report["failures"]
    problem(http.get(f"/v1/executions/{eid}"), 409, "integrity_failure")


def test_malformed_json(http: httpx.Client) -> None:
    """A body that is not JSON (or names a key twice) is a 400 malformed_request."""
    answer = http.post("/v1/intents", content=b'{"intent": ')
    problem(answer, 400, "malformed_request")
    problem(http.post("/v1/intents", content=b""), 400, "malformed_request")
    deep = b"[" * 5000 + b"]" * 5000
    problem(http.post("/v1/intents", content=deep), 400, "malformed_request")
    twice = b'{"intent": {"name": "echo"}, "payload": {"a": 1, "a": 2}}'
    said = problem(http.post("/v1/intents", content=twice), 400, "malformed_request")
    assert "'a' is given twice" in said["detail"]
    nul = b'{"intent": {"name": "echo"}, "payload": {"a\\u0000": 1}}'
    said = problem(http.post("/v1/intents", content=nul), 400, "malformed_request")
    assert "NUL" in said["detail"]


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"intent": {"name": "echo"}, "surprise": 1}, "surprise"),
        ({"intent": {"name": "echo", "colour": "red"}}, "intent.colour"),
        ({"intent": {"name": "echo"}, "routing": {"strategy": "NOPE"}}, ""),
        ({"payload": {}}, "intent"),
        ([1], ""),
    ],
)
def test_invalid_envelopes(http: httpx.Client, body: object, path: str) -> None:
    """Unknown fields and invalid values are 422 envelope_invalid naming the path."""
    found = problem(http.post("/v1/intents", json=body), 422, "envelope_invalid")
    assert str(found["path"]).startswith(path)


def test_oversized_bodies(http: httpx.Client) -> None:
    """A body over the limit is 413, whether declared or streamed in chunks."""
    big = envelope(text="x" * (65 * 1024))
    problem(http.post("/v1/intents", json=big), 413, "request_too_large")

    def chunks() -> Iterator[bytes]:
        yield b'{"intent": {"name": "echo"}, "payload": {"text": "'
        for _ in range(80):
            yield b"y" * 1024
        yield b'"}}'

    problem(http.post("/v1/intents", content=chunks()), 413, "request_too_large")
    route(http, envelope(text="still fine"))


def test_unknown_path_and_method(http: httpx.Client) -> None:
    """Unknown paths and methods answer problems too."""
    problem(http.get("/v1/nothing"), 404, "not_found")
    problem(http.get("/v1/executions/"), 404, "not_found")
    problem(http.delete("/v1/intents"), 405, "method_not_allowed")


def test_healthz_needs_no_key(live: LiveServer) -> None:
    """/healthz answers without a key."""
    with httpx.Client(base_url=live.url, trust_env=False) as client:
        assert client.get("/healthz").json()["status"] == "ok"


def test_metrics(empty_http: httpx.Client) -> None:
    """/metrics counts routed intents, error codes, cache misses and latency."""
    route(empty_http, envelope(text="m"))
    route(empty_http, envelope("nobody"))
    empty_http.post("/v1/intents", content=b"nope")
    text = empty_http.get("/metrics").text
    assert 'intentusnet_intents_routed_total{status="success"} 1' in text
    assert 'intentusnet_intents_routed_total{status="error"} 1' in text
    assert 'intentusnet_intent_errors_total{code="NO_AGENT"} 1' in text
    assert 'intentusnet_http_problems_total{code="malformed_request"} 1' in text
    assert "intentusnet_cache_misses_total 2" in text
    assert 'intentusnet_route_duration_seconds_bucket{le="+Inf"} 2' in text
    assert "intentusnet_route_duration_seconds_count 2" in text


def test_without_a_store(tmp_path: Path) -> None:
    """A router with no store routes, lists nothing and finds no record."""
    with IntentRouter() as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"ok": True})
        with (
            serving(create_app(router)) as live,
            httpx.Client(base_url=live.url, trust_env=False) as http,
        ):
            assert route(http, envelope())["payload"] == {"ok": True}
            page = http.get("/v1/executions").json()
            assert page == {"items": [], "nextCursor": None}
            problem(http.get("/v1/executions/exec-x"), 404, "record_not_found")


def test_shutdown_finishes_executions_in_flight(tmp_path: Path) -> None:
    """Stopping the server while slow intents run answers them all, records whole."""
    root = tmp_path / "records"
    answers: list[httpx.Response] = []
    with echo_router(root) as router:
        live = LiveServer(create_app(router)).start()
        headers = {"Authorization": f"Bearer {ROUTE_KEY}"}

        def call() -> None:
            with httpx.Client(
                base_url=live.url, headers=headers, trust_env=False, timeout=10
            ) as client:
                answers.append(client.post("/v1/intents", json=envelope("slow")))

        threads = [threading.Thread(target=call) for _ in range(5)]
        for thread in threads:
            thread.start()
        service = live.server.config.app.state.intentusnet  # type: ignore[attr-defined]
        deadline = time.monotonic() + 10
        while service.metrics.in_flight < 5 and time.monotonic() < deadline:
            time.sleep(0.01)
        live.stop()
        for thread in threads:
            thread.join(10)
    assert [a.status_code for a in answers] == [200] * 5
    with FileExecutionStore(root) as store:
        summaries = store.list()
        assert len(summaries) == 5
        assert {s.status for s in summaries} == {"completed"}
        for s in summaries:
            assert store.verify(s.execution_id).valid


def test_integers_beyond_2_53_are_refused_as_in_the_library(
    empty_http: httpx.Client, empty_root: Path
) -> None:
    """A 30-digit integer is 422 with the library's error, and nothing is recorded."""
    huge = 123456789012345678901234567890
    with pytest.raises(ValueError, match="beyond") as library:
        IntentEnvelope.model_validate(
            {"intent": {"name": "echo"}, "payload": {"n": huge}}
        )
    for text in (str(huge), f"-{huge}"):
        body = b'{"intent": {"name": "echo"}, "payload": {"n": %s}}' % text.encode()
        found = problem(
            empty_http.post("/v1/intents", content=body), 422, "envelope_invalid"
        )
        assert found["path"] == "payload.n"
        if text == str(huge):
            assert found["detail"] == str(library.value)
    with FileExecutionStore(empty_root) as store:
        assert store.list() == []


def test_a_client_hanging_up_mid_body_is_a_client_error(
    empty_live: LiveServer, empty_http: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    """A body cut short by the client is counted as its doing: one line, no trace."""
    caplog.set_level(logging.INFO)
    with socket.create_connection(("127.0.0.1", empty_live.port)) as sock:
        sock.sendall(
            b"POST /v1/intents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Authorization: Bearer " + ROUTE_KEY.encode() + b"\r\n"
            b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
            b'{"intent": {"name": "echo"}, "payload": {"text": "'
        )
        time.sleep(0.2)  # the server is reading the body now
    deadline = time.monotonic() + 10
    counted = 'intentusnet_http_problems_total{code="client_disconnected"} 1'
    while counted not in (text := empty_http.get("/metrics").text):
        assert time.monotonic() < deadline, text
        time.sleep(0.05)
    assert 'code="internal_error"' not in text
    logged = [
        r for r in caplog.records if r.name.startswith(("intentusnet", "uvicorn"))
    ]
    assert [r for r in logged if r.exc_info or r.levelno >= logging.ERROR] == []
    hung_up = [r.getMessage() for r in logged if "client" in r.getMessage()]
    assert len(hung_up) == 1, hung_up
    assert "\n" not in hung_up[0]
    route(empty_http, envelope(text="still serving"))


def test_error_bodies_do_not_reveal_server_paths(
    empty_http: httpx.Client, empty_root: Path
) -> None:
    """404 and 500 problem documents name no directory of the server."""
    from intentusnet.store.file.layout import relative_path

    eid = execution_id(route(empty_http, envelope(text="here")))
    missing = problem(
        empty_http.get("/v1/executions/exec-nope"), 404, "record_not_found"
    )
    assert missing["detail"] == "no record exec-nope"
    looping = empty_root / relative_path("exec-loop")
    looping.parent.mkdir(exist_ok=True)
    looping.symlink_to(looping.name)  # a link to itself: opening it fails
    broken = problem(empty_http.get("/v1/executions/exec-loop"), 500, "store_error")
    answers = [
        missing,
        broken,
        problem(
            empty_http.get("/v1/executions/exec-nope/verify"), 404, "record_not_found"
        ),
        problem(
            empty_http.post("/v1/executions/exec-nope/replay"), 404, "record_not_found"
        ),
        problem(empty_http.get("/v1/executions/exec-loop/verify"), 500, "store_error"),
    ]
    for body in answers:
        text = str(body)
        assert str(empty_root) not in text
        assert str(empty_root.parent) not in text
    assert empty_http.get(f"/v1/executions/{eid}").status_code == 200


def test_savings_endpoint(tmp_path: Path) -> None:
    """GET /v1/savings reports the store's LLM calls, tokens and costs."""
    store_root = tmp_path / "records"
    with FakeAPI() as api:
        store = FileExecutionStore(store_root)
        expected = record_calls(
            store, api.url, [("openai", "gpt-4o", "what is up")] * 3
        )
        store.close()
    ((_, want),) = expected.items()
    prices = PriceTable.from_json(
        {"currency": "USD", "models": {"gpt-4o": {"input": 2.5, "output": 10}}}
    )
    router = echo_router(store_root)
    app = keyed_app(router, prices=prices)
    with serving(app) as live, router:
        reader = {"Authorization": f"Bearer {READ_KEY}"}
        with httpx.Client(base_url=live.url, trust_env=False) as http:
            refused = http.get("/v1/savings")
            answer = http.get("/v1/savings", headers=reader)
    assert refused.status_code == 401
    assert answer.status_code == 200, answer.text
    doc = answer.json()
    assert (doc["calls"], doc["hits"], doc["misses"]) == (3, 2, 1)
    assert doc["inputTokens"] == {"spent": want.spent[0], "avoided": want.avoided[0]}
    assert doc["currency"] == "USD"
    (model,) = doc["models"]
    assert (model["provider"], model["model"]) == ("openai", "gpt-4o")
    assert model["cost"]["avoided"] == pytest.approx(
        (want.avoided[0] * 2.5 + want.avoided[1] * 10) / 1e6
    )
    Savings.model_validate(doc)  # the OpenAPI schema describes it exactly


def test_savings_without_a_store_is_404() -> None:
    """A service recording nowhere has no savings to report: 404, a problem."""
    with IntentRouter() as router, serving(keyed_app(router)) as live:
        reader = {"Authorization": f"Bearer {READ_KEY}"}
        with httpx.Client(base_url=live.url, trust_env=False) as http:
            answer = http.get("/v1/savings", headers=reader)
            metrics = http.get("/metrics", headers=reader)
    assert answer.status_code == 404
    assert answer.headers["content-type"] == PROBLEM
    assert answer.json()["code"] == "record_not_found"
    assert metrics.status_code == 200
    assert "intentusnet_llm_" not in metrics.text
