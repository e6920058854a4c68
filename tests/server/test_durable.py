"""Durable executions over HTTP, in-process: Idempotency-Key, respond-async, ?wait."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from livekit import ROUTE_KEY, LiveServer, keyed_app, serving

from intentusnet import (
    AsyncIntentusClient,
    IntentEnvelope,
    IntentRouter,
    IntentusClient,
    RecordStatus,
)
from intentusnet.store import FileExecutionStore

PROBLEM = "application/problem+json"
HOLD = {"intent": {"name": "hold"}, "payload": {"n": 1}}
ASYNC = {"Prefer": "respond-async"}


class Shop:
    """A router whose ``hold`` agent waits for ``gate``; ``ran`` counts its runs."""

    def __init__(self, root: Path) -> None:
        self.gate = threading.Event()
        self.ran: list[object] = []
        self.router = IntentRouter(store=FileExecutionStore(root))

        @self.router.agent("hold", name="hold")
        def hold(env: object, ctx: object) -> dict[str, object]:
            self.ran.append(env.payload)  # type: ignore[attr-defined]
            assert self.gate.wait(20), "the test never opened the gate"
            return {"held": env.payload}  # type: ignore[attr-defined]


@pytest.fixture
def shop(tmp_path: Path) -> Iterator[Shop]:
    """The shop, its router closed after the test."""
    made = Shop(tmp_path / "records")
    with made.router:
        yield made
    made.gate.set()


@pytest.fixture
def live(shop: Shop) -> Iterator[LiveServer]:
    """The shop served on loopback with keys."""
    with serving(keyed_app(shop.router)) as server:
        yield server
        shop.gate.set()  # let every execution end before the server stops


@pytest.fixture
def http(live: LiveServer) -> Iterator[httpx.Client]:
    """A client sending the route key."""
    headers = {"Authorization": f"Bearer {ROUTE_KEY}"}
    with httpx.Client(
        base_url=live.url, headers=headers, trust_env=False, timeout=30
    ) as client:
        yield client


def _problem(answer: httpx.Response, status: int, code: str) -> dict[str, object]:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == PROBLEM
    body = dict(answer.json())
    assert body["code"] == code
    return body


# -- Idempotency-Key ------------------------------------------------------------------


@pytest.mark.parametrize("repeated", ['"order-7"', "order-7"])
def test_a_repeated_key_runs_the_agent_once(
    shop: Shop, http: httpx.Client, repeated: str
) -> None:
    """The quoted (sf-string) and bare forms name one key: one run, then a replay."""
    shop.gate.set()
    first = http.post("/v1/intents", json=HOLD, headers={"Idempotency-Key": "order-7"})
    again = http.post("/v1/intents", json=HOLD, headers={"Idempotency-Key": repeated})
    assert first.status_code == again.status_code == 200
    assert shop.ran == [{"n": 1}]
    assert again.json()["metadata"]["fromReplay"] is True
    original = first.json()["metadata"]["executionId"]
    assert again.json()["metadata"]["originalExecutionId"] == original


def test_escapes_in_a_quoted_key_are_read(shop: Shop, http: httpx.Client) -> None:
    r"""``"a\"b\\c"`` is the key ``a"b\c``: the same as the client sends it."""
    shop.gate.set()
    quoted = {"Idempotency-Key": '"a\\"b\\\\c"'}
    http.post("/v1/intents", json=HOLD, headers=quoted)
    http.post("/v1/intents", json=HOLD, headers=quoted)
    assert len(shop.ran) == 1
    [summary] = shop.router.store.list()  # type: ignore[union-attr]
    record = shop.router.store.load(summary.execution_id)  # type: ignore[union-attr]
    assert record.events[0].data["idempotencyKey"] == 'a"b\\c'


@pytest.mark.parametrize(
    ("value", "why"),
    [
        ('"unterminated', "no closing quote"),
        ('"a\\x"', "escapes only"),
        ('"k";a=1', "nothing may follow the closing quote"),
        ('""', "may not be empty"),
        ("two words", "character 3 is ' '"),
        ("caf\u00e9", "character 3 is"),
        ('"caf\u00e9"', "character 3 is"),
        ("k" * 256, "at most 255 characters, not 256"),
        ('"' + "k" * 300 + '"', "at most 255 characters, not 300"),
    ],
)
def test_a_malformed_key_is_400_naming_the_header(
    shop: Shop, http: httpx.Client, value: str, why: str
) -> None:
    """Malformed or oversized keys: 400, the header and the fault named, no run."""
    headers = {"Idempotency-Key": value.encode("latin-1")}
    answer = http.post("/v1/intents", json=HOLD, headers=headers)  # type: ignore[arg-type]
    body = _problem(answer, 400, "invalid_idempotency_key")
    assert "the Idempotency-Key header" in str(body["detail"])
    assert why in str(body["detail"])
    assert shop.ran == []
    assert shop.router.store.list() == []  # type: ignore[union-attr]


def test_the_key_sent_twice_is_400(shop: Shop, http: httpx.Client) -> None:
    """Two Idempotency-Key fields are ambiguous: refused, nothing runs."""
    headers = [("Idempotency-Key", "a"), ("Idempotency-Key", "b")]
    answer = http.post("/v1/intents", json=HOLD, headers=headers)
    body = _problem(answer, 400, "invalid_idempotency_key")
    assert "sent 2 times" in str(body["detail"])
    assert shop.ran == []


@pytest.mark.parametrize("value", [b"a\rX-Injected: 1", b"a\x00b", b"a\nb"])
def test_header_injection_is_refused_before_the_app(
    shop: Shop, live: LiveServer, value: bytes
) -> None:
    """CR, LF or NUL inside the header never reach routing: 400, no record."""
    body = b'{"intent": {"name": "hold"}}'
    request = (
        b"POST /v1/intents HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Authorization: Bearer " + ROUTE_KEY.encode() + b"\r\n"
        b"Content-Type: application/json\r\n"
        b"Idempotency-Key: " + value + b"\r\n"
        b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
    )
    with socket.create_connection(("127.0.0.1", live.port), timeout=10) as sock:
        sock.sendall(request)
        status_line = sock.recv(4096).split(b"\r\n", 1)[0]
    assert status_line.startswith(b"HTTP/1.1 400"), status_line
    assert shop.ran == []
    assert shop.router.store.list() == []  # type: ignore[union-attr]


def test_a_key_reused_with_another_envelope_is_422(
    shop: Shop, http: httpx.Client
) -> None:
    """Same key, other envelope: 422 naming both hashes; the agent does not run."""
    shop.gate.set()
    key = {"Idempotency-Key": '"k-1"'}
    first = http.post("/v1/intents", json=HOLD, headers=key)
    other = {"intent": {"name": "hold"}, "payload": {"n": 2}}
    answer = http.post("/v1/intents", json=other, headers=key)
    body = _problem(answer, 422, "idempotency_conflict")
    recorded = shop.router.envelope_hash(IntentEnvelope.model_validate(HOLD))
    given = shop.router.envelope_hash(IntentEnvelope.model_validate(other))
    assert body["recordedHash"] == recorded
    assert body["givenHash"] == given
    assert recorded in str(body["detail"])
    assert given in str(body["detail"])
    assert body["executionId"] == first.json()["metadata"]["executionId"]
    assert body["key"] == "k-1"
    assert shop.ran == [{"n": 1}]


# -- Prefer: respond-async and GET ?wait ---------------------------------------------


def test_respond_async_answers_202_once_recorded_before_the_agent_ends(
    shop: Shop, http: httpx.Client
) -> None:
    """202, Location and Preference-Applied while the agent still runs; then ?wait."""
    answer = http.post("/v1/intents", json=HOLD, headers=ASYNC)
    assert answer.status_code == 202, answer.text
    execution_id = answer.json()["executionId"]
    where = f"/v1/executions/{execution_id}"
    assert answer.headers["location"] == where
    assert answer.json()["location"] == where
    assert answer.headers["preference-applied"] == "respond-async"
    store = shop.router.store
    assert store is not None
    record = store.load(execution_id)  # on disk, with the envelope a resumer needs
    assert record.header.status is RecordStatus.IN_PROGRESS
    assert record.envelope["payload"] == {"n": 1}

    running = http.get(where, params={"wait": "0.2"})
    assert running.status_code == 200
    assert running.json()["header"]["status"] == "in_progress"
    assert running.json()["finalResponse"] is None
    assert running.headers["retry-after"] == "1"

    shop.gate.set()
    done = http.get(where, params={"wait": "20"})
    assert done.json()["header"]["status"] == "completed"
    assert done.json()["finalResponse"]["payload"] == {"held": {"n": 1}}
    assert "retry-after" not in done.headers
    assert "content-location" not in done.headers


def test_respond_async_with_a_finished_key_answers_at_once(
    shop: Shop, http: httpx.Client
) -> None:
    """A finished key's answer is ready: 200 from replay, no Preference-Applied."""
    shop.gate.set()
    key = {"Idempotency-Key": '"k-2"'}
    first = http.post("/v1/intents", json=HOLD, headers=key)
    again = http.post("/v1/intents", json=HOLD, headers={**key, **ASYNC})
    assert again.status_code == 200
    assert "preference-applied" not in again.headers
    assert again.json()["metadata"]["fromReplay"] is True
    assert again.json()["payload"] == first.json()["payload"]
    assert len(shop.ran) == 1


def test_respond_async_with_a_running_key_names_its_execution(
    shop: Shop, http: httpx.Client
) -> None:
    """A second submit of a running key gets 202 with the first's Location."""
    key = {"Idempotency-Key": '"k-3"', **ASYNC}
    first = http.post("/v1/intents", json=HOLD, headers=key)
    second = http.post("/v1/intents", json=HOLD, headers=key)
    assert first.status_code == second.status_code == 202
    assert second.headers["location"] == first.headers["location"]
    shop.gate.set()
    done = http.get(first.headers["location"], params={"wait": "20"})
    assert done.json()["header"]["status"] == "completed"
    assert shop.ran == [{"n": 1}]


def test_a_conflicting_submit_is_422_not_202(shop: Shop, http: httpx.Client) -> None:
    """An error before the record opens is the answer, even with respond-async."""
    shop.gate.set()
    http.post("/v1/intents", json=HOLD, headers={"Idempotency-Key": "k-4"})
    other = {"intent": {"name": "hold"}, "payload": {"n": 9}}
    answer = http.post(
        "/v1/intents", json=other, headers={"Idempotency-Key": "k-4", **ASYNC}
    )
    _problem(answer, 422, "idempotency_conflict")
    assert len(shop.ran) == 1


@pytest.mark.parametrize("wait", ["-1", "60.5", "soon"])
def test_wait_is_bounded(http: httpx.Client, wait: str) -> None:
    """?wait takes 0 to 60 seconds; anything else is 422 naming it."""
    answer = http.get("/v1/executions/x", params={"wait": wait})
    body = _problem(answer, 422, "request_invalid")
    assert "query.wait" in str(body["detail"])


def test_get_of_an_unknown_execution_is_404(http: httpx.Client) -> None:
    """No record, even waiting: 404 at once."""
    answer = http.get("/v1/executions/exec-none", params={"wait": "30"})
    _problem(answer, 404, "record_not_found")


# -- lookup by key -------------------------------------------------------------------


def test_an_execution_is_found_by_its_key(
    shop: Shop, http: httpx.Client, live: LiveServer
) -> None:
    """GET /v1/idempotency-keys/{key} answers the key's record; the client too."""
    shop.gate.set()
    key = "order 7/b?%"
    sent = http.post("/v1/intents", json=HOLD, headers={"Idempotency-Key": f'"{key}"'})
    execution_id = sent.json()["metadata"]["executionId"]
    found = http.get("/v1/idempotency-keys/order%207%2Fb%3F%25", params={"wait": 1})

    assert found.status_code == 200, found.text
    assert found.json()["header"]["executionId"] == execution_id
    assert found.headers["content-location"] == f"/v1/executions/{execution_id}"
    with IntentusClient(live.url, api_key=ROUTE_KEY, trust_env=False) as client:
        assert client.get_execution_by_key(key).execution_id == execution_id

    async def by_async_client() -> str:
        async with AsyncIntentusClient(
            live.url, api_key=ROUTE_KEY, trust_env=False
        ) as client:
            return (await client.get_execution_by_key(key)).execution_id

    assert asyncio.run(by_async_client()) == execution_id


def test_the_openapi_key_limits_are_the_servers(shop: Shop, http: httpx.Client) -> None:
    """The documented maxLength of the key (path and header) is where refusal starts."""
    shop.gate.set()
    doc = http.get("/openapi.json").json()
    by_key = doc["paths"]["/v1/idempotency-keys/{key}"]["get"]["parameters"]
    (path_limit,) = [p["schema"]["maxLength"] for p in by_key if p["name"] == "key"]
    route = doc["paths"]["/v1/intents"]["post"]["parameters"]
    (header_limit,) = [
        p["schema"]["maxLength"] for p in route if p["name"] == "Idempotency-Key"
    ]
    longest = "k" * path_limit
    assert header_limit == len(f'"{longest}"')
    kept = http.post("/v1/intents", json=HOLD, headers={"Idempotency-Key": longest})
    assert kept.status_code == 200
    found = http.get(f"/v1/idempotency-keys/{longest}")
    assert found.status_code == 200
    quoted = {"Idempotency-Key": f'"{longest}"'}
    assert http.post("/v1/intents", json=HOLD, headers=quoted).status_code == 200
    over = longest + "k"
    refused = http.post("/v1/intents", json=HOLD, headers={"Idempotency-Key": over})
    _problem(refused, 400, "invalid_idempotency_key")
    _problem(http.get(f"/v1/idempotency-keys/{over}"), 400, "invalid_idempotency_key")
    assert len(shop.ran) == 1


def test_an_unknown_or_malformed_key_is_404_or_400(http: httpx.Client) -> None:
    """A key no execution has is 404; a key that is not a key is 400."""
    _problem(http.get("/v1/idempotency-keys/never-sent"), 404, "record_not_found")
    _problem(http.get("/v1/idempotency-keys/caf%C3%A9"), 400, "invalid_idempotency_key")


# -- Operators' decisions -----------------------------------------------------------


def test_a_parked_execution_is_resolved_over_http(tmp_path: Path) -> None:
    """POST .../resolution recorded with the key's name; POST .../resume serves it."""
    import hashlib

    from livekit import READ_KEY

    from server.ui.long_sample import capture, parked_execution

    store = FileExecutionStore(tmp_path / "records")
    parked = parked_execution(store)
    router = IntentRouter(store=store)
    router.agent("payments.capture", name="capturer")(capture)
    url = f"/v1/executions/{parked}/resolution"
    with (
        router,
        serving(keyed_app(router)) as server,
        httpx.Client(base_url=server.url, trust_env=False, timeout=30) as client,
    ):
        full = {"Authorization": f"Bearer {ROUTE_KEY}"}
        read_only = {"Authorization": f"Bearer {READ_KEY}"}
        body = {"step": 1, "happened": True, "output": {"charged": 20}}
        _problem(client.post(url, json=body, headers=read_only), 403, "forbidden")
        wrong = {**body, "step": 2}
        refused = _problem(
            client.post(url, json=wrong, headers=full), 409, "resolve_refused"
        )
        assert "wrong_step" in str(refused["detail"])
        _problem(
            client.post(url, json={"step": 1}, headers=full), 422, "request_invalid"
        )
        assert len(store.list()) == 2  # nothing written

        answer = client.post(url, json=body, headers=full)
        again = client.post(url, json=body, headers=full)
        metrics = client.get("/metrics", headers=full).text

        assert answer.status_code == 200, answer.text
        decision = answer.json()["decision"]
        assert "(resolved)" in str(_problem(again, 409, "resolve_refused")["detail"])
        resume = f"/v1/executions/{parked}/resume"
        _problem(client.post(resume, headers=read_only), 403, "forbidden")
        finished = client.post(resume, headers=full)
        twice = client.post(resume, headers=full)
    assert finished.status_code == 200, finished.text
    assert finished.json()["status"] == "success"
    assert finished.json()["payload"] == {"charged": 20}
    assert "(complete)" in str(_problem(twice, 409, "resume_refused")["detail"])
    [event] = [
        e for e in store.load(decision).events if e.type.value == "OPERATOR_DECISION"
    ]
    name = hashlib.sha256(ROUTE_KEY.encode()).hexdigest()[:12]
    assert (event.data["by"], event.data["via"]) == (f"api-key:{name}", "http")
    assert 'intentusnet_operator_decisions_total{action="resolve"} 1.0' in metrics
    store.close()


def test_an_execution_is_cancelled_over_http(tmp_path: Path) -> None:
    """POST .../cancel: a parked execution closed cancelled; a second one is 409."""
    from livekit import READ_KEY

    from server.ui.long_sample import capture, parked_execution

    store = FileExecutionStore(tmp_path / "records")
    parked = parked_execution(store)
    router = IntentRouter(store=store)
    router.agent("payments.capture", name="capturer")(capture)
    url = f"/v1/executions/{parked}/cancel"
    with (
        router,
        serving(keyed_app(router)) as server,
        httpx.Client(base_url=server.url, trust_env=False, timeout=30) as client,
    ):
        full = {"Authorization": f"Bearer {ROUTE_KEY}"}
        _problem(
            client.post(url, headers={"Authorization": f"Bearer {READ_KEY}"}),
            403,
            "forbidden",
        )
        answer = client.post(url, headers=full)
        again = client.post(url, headers=full)
        read = client.get(f"/v1/executions/{parked}", headers=full)
        metrics = client.get("/metrics", headers=full).text

    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["closed"] is True
    assert store.load(body["record"]).header.status is RecordStatus.CANCELLED
    assert "(finished)" in str(_problem(again, 409, "cancel_refused")["detail"])
    assert read.json()["header"]["status"] == "cancelled"
    assert 'intentusnet_operator_decisions_total{action="cancel"} 1.0' in metrics
    store.close()


class _Order:
    """``order``: fetch, e-mail (a side effect), charge; ``calls`` counts each."""

    def __init__(self, store: object) -> None:
        from collections import Counter

        self.calls: Counter[str] = Counter()
        self.price = 10
        self.router = IntentRouter(store=store)  # type: ignore[arg-type]

        @self.router.agent("order", name="order")
        def order(env: object, ctx: object) -> dict[str, object]:
            def run(name: str, value: object, **kw: bool) -> object:
                def call() -> object:
                    self.calls[name] += 1
                    return value

                return ctx.step(name, {}, call, **kw)  # type: ignore[attr-defined]

            price = run("fetch", self.price)
            run("email", "sent", side_effect=True)
            return {"total": run("charge", price)}


@pytest.fixture(params=["file", "postgres"])
def order_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[object]:
    """A file store, or a PostgreSQL one on the suite's real server."""
    from intentusnet.store import PostgresExecutionStore

    if request.param == "file":
        store: object = FileExecutionStore(tmp_path / "records")
    else:
        store = PostgresExecutionStore(request.getfixturevalue("pg_dsn"))
    yield store
    store.close()  # type: ignore[attr-defined]


def test_an_execution_is_forked_over_http(order_store: object) -> None:
    """POST .../fork: the steps before it served (one e-mail); a refusal writes none."""
    from livekit import READ_KEY

    shop = _Order(order_store)
    with shop.router as router:
        old = router.route_intent({"intent": {"name": "order"}, "payload": {}})
        first = old.metadata.execution_id
        shop.price = 99  # today's code fetches another price: fetch is served
        url = f"/v1/executions/{first}/fork"
        with (
            serving(keyed_app(router)) as server,
            httpx.Client(base_url=server.url, trust_env=False, timeout=30) as client,
        ):
            full = {"Authorization": f"Bearer {ROUTE_KEY}"}
            read_only = {"Authorization": f"Bearer {READ_KEY}"}
            body = {"from": "charge"}
            _problem(client.post(url, json=body, headers=read_only), 403, "forbidden")
            _problem(client.post(url, json={}, headers=full), 422, "request_invalid")
            _problem(
                client.post(url, json={"from": 0}, headers=full), 422, "request_invalid"
            )
            missing = _problem(
                client.post(url, json={"from": "refund"}, headers=full),
                422,
                "invalid_rerun_option",
            )
            assert "refund" in str(missing["detail"])
            _problem(
                client.post("/v1/executions/exec-0000/fork", json=body, headers=full),
                404,
                "record_not_found",
            )
            assert len(router.store.list()) == 1  # nothing written  # type: ignore[union-attr]

            answer = client.post(url, json=body, headers=full)
            assert answer.status_code == 200, answer.text
            forked = answer.json()
            read = client.get(forked["links"]["self"], headers=read_only)
            metrics = client.get("/metrics", headers=full).text

    new = forked["executionId"]
    assert forked == {
        "executionId": new,
        "forkOf": first,
        "fromStep": 3,
        "status": "success",
        "links": {"self": f"/v1/executions/{new}", "forkOf": f"/v1/executions/{first}"},
    }
    assert answer.headers["location"] == f"/v1/executions/{new}"
    assert read.json()["finalResponse"]["payload"] == {"total": 10}
    assert dict(shop.calls) == {"fetch": 1, "email": 1, "charge": 2}
    assert router.store.load(new).replay_of == first  # type: ignore[union-attr]
    assert 'intentusnet_operator_decisions_total{action="fork"} 1.0' in metrics


def test_decisions_from_the_cli_and_python_are_in_metrics(tmp_path: Path) -> None:
    """/metrics counts what the store holds: a CLI resolve, a Python fork and cancel."""
    from click.testing import CliRunner

    from intentusnet import fork
    from intentusnet.cli import cli
    from server.ui.long_sample import capture, parked_execution

    root = tmp_path / "records"
    store = FileExecutionStore(root)
    parked = parked_execution(store)
    router = IntentRouter(store=store)
    router.agent("payments.capture", name="capturer")(capture)
    with (
        router,
        serving(keyed_app(router)) as server,
        httpx.Client(base_url=server.url, trust_env=False, timeout=30) as client,
    ):
        full = {"Authorization": f"Bearer {ROUTE_KEY}"}
        before = client.get("/metrics", headers=full).text
        resolved = CliRunner().invoke(
            cli,
            ["--store", str(root), "resolve", parked, "--step", "1", "--happened"],
            catch_exceptions=False,
        )
        assert resolved.exit_code == 0, resolved.stderr
        # the parked envelope kills its process in the charge: fork another
        done = router.route_intent({"intent": {"name": "payments.capture"}})
        assert fork(router, str(done.metadata.execution_id), 1).ok
        router.cancel(resolved.stdout.strip(), by="ann")
        after = client.get("/metrics", headers=full).text
    for action in ("resolve", "cancel", "fork"):
        line = f'intentusnet_operator_decisions_total{{action="{action}"}}'
        assert f"{line} 0.0" in before
        assert f"{line} 1.0" in after
    store.close()
