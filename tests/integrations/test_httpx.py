"""The httpx transports: record, replay and cache HTTP calls, never storing secrets."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import orjson
import pytest

from intentusnet import FileExecutionStore, Redactor
from intentusnet.errors import CacheMiss
from intentusnet.integrations.httpx import (
    CACHE_HEADER,
    DEFAULT_HASH_HEADERS,
    RECORD_HEADER,
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


def client(store, mode="cache", **options) -> httpx.Client:
    return httpx.Client(transport=RecordingTransport(store, mode, **options))


def block_network(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("tried to open a network connection")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_cache_mode_calls_once(store, llm):
    """The second identical request is answered from the record."""
    with client(store) as http:
        first = http.post(f"{llm.url}/v1/chat/completions", json=CHAT, headers=BEARER)
        second = http.post(f"{llm.url}/v1/chat/completions", json=CHAT, headers=BEARER)
    assert llm.calls == 1
    assert first.status_code == second.status_code == 200
    assert second.json() == first.json()
    assert second.json()["choices"][0]["message"]["content"] == "echo: hello"
    assert second.headers["content-type"] == "application/json"
    assert second.headers["x-request-id"] == "req-fake"
    assert second.request.url == f"{llm.url}/v1/chat/completions"


def test_secrets_are_never_hashed_nor_stored(store, llm, tmp_path):
    """Keys, cookies, named headers and key parameters reach no file of the store."""
    custom = "org-SECRET-value"
    with client(store, secret_headers=["X-Org"]) as http:
        http.post(
            f"{llm.url}/v1/chat/completions?api_key={API_KEY}",
            json=CHAT,
            headers={**BEARER, "x-org": custom, "cookie": f"c={COOKIE}"},
        )
        anthropic = {"x-api-key": API_KEY, "anthropic-version": "2023-06-01"}
        http.post(f"{llm.url}/v1/messages", json=CHAT, headers=anthropic)
        again = http.post(  # another key: the same request, so a hit
            f"{llm.url}/v1/chat/completions?api_key=other",
            json=CHAT,
            headers={"authorization": "Bearer other", "x-org": "other"},
        )
    assert again.json()["choices"][0]["message"]["content"] == "echo: hello"
    assert llm.calls == 2
    files = [p for p in store.root.rglob("*") if p.is_file()]
    assert any(p.suffix == ".jsonl" for p in files)
    for path in files:
        data = path.read_bytes()
        for secret in (API_KEY, COOKIE, custom):
            assert secret.encode() not in data, f"{secret} found in {path}"


def test_credential_in_hash_headers_is_refused(store):
    """Listing a credential header among the hashed ones is a ValueError."""
    with pytest.raises(ValueError, match="authorization"):
        RecordingTransport(store, hash_headers=["accept", "Authorization"])
    with pytest.raises(ValueError, match="x-mine"):
        RecordingTransport(store, hash_headers=["x-mine"], secret_headers=["X-Mine"])


def test_bad_mode_lists_the_valid_ones(store):
    """An unknown mode names 'record', 'replay' and 'cache'."""
    with pytest.raises(ValueError, match="'record', 'replay', 'cache'"):
        RecordingTransport(store, mode="playback")
    assert RecordingTransport(store, mode="replay").mode is TransportMode.REPLAY


def test_json_body_is_hashed_in_canonical_form(store, llm):
    """Key order and spacing of a JSON body do not matter; its values do."""
    url = f"{llm.url}/echo"
    with client(store) as http:
        http.post(url, content=b'{"a": 1, "b": [1.0, 2]}')
        same = http.post(url, content=b'{"b":[1,2],"a":1}')
        other = http.post(url, content=b'{"b":[1,2],"a":2}')
    assert llm.calls == 2
    assert same.content == b'{"a": 1, "b": [1.0, 2]}'
    assert other.content == b'{"b":[1,2],"a":2}'


def test_raw_body_is_hashed_as_bytes(store, llm):
    """A body that is not JSON counts by its bytes, which are not stored."""
    url = f"{llm.url}/echo"
    with client(store) as http:
        http.post(url, content=b"\x00\x01binary")
        again = http.post(url, content=b"\x00\x01binary")
        http.post(url, content=b"\x00\x02binary")
    assert llm.calls == 2
    assert again.content == b"\x00\x01binary"
    (record,) = [
        store.load(s.execution_id)
        for s in store.list()
        if store.load(s.execution_id).envelope["payload"].get("bodySize") == 8
        and store.load(s.execution_id).envelope["payload"]["url"].endswith("/echo")
    ][:1]
    assert "bodySha256" in record.envelope["payload"]


def test_hashed_headers_and_query_order(store, llm):
    """An allow-listed header is part of the request; query order is not."""
    url = f"{llm.url}/v1/messages"
    key = {"x-api-key": API_KEY}
    with client(store) as http:
        http.post(
            f"{url}?a=1&b=2", json=CHAT, headers={**key, "anthropic-version": "1"}
        )
        http.post(
            f"{url}?b=2&a=1", json=CHAT, headers={**key, "anthropic-version": "1"}
        )
        http.post(
            url + "?a=1&b=2", json=CHAT, headers={**key, "anthropic-version": "2"}
        )
        http.post(
            url + "?a=1&b=2",
            json=CHAT,
            headers={**key, "x-stainless-retry": "3", "anthropic-version": "2"},
        )
    assert llm.calls == 2


def test_stream_recorded_whole_and_replayed_as_a_stream(store, llm):
    """An event stream is passed through live, recorded whole, replayed by event."""
    ask = {**CHAT, "stream": True}
    chunks = []
    for _ in range(2):
        with (
            client(store) as http,
            http.stream(
                "POST", f"{llm.url}/v1/chat/completions", json=ask, headers=BEARER
            ) as response,
        ):
            assert response.headers["content-type"] == "text/event-stream"
            chunks.append(list(response.iter_bytes()))
    assert llm.calls == 1
    assert b"".join(chunks[0]) == b"".join(chunks[1])  # live: as the server wrote it
    assert len(chunks[1]) == 4  # replayed: three events and [DONE]
    assert chunks[1][-1] == b"data: [DONE]\n\n"


def test_replay_mode_with_the_network_blocked(store, llm, monkeypatch):
    """Replay mode answers recorded requests without any connection."""
    url = f"{llm.url}/v1/chat/completions"
    with client(store, "record") as http:
        recorded = http.post(url, json=CHAT, headers=BEARER).json()
    block_network(monkeypatch)
    with client(store, "replay") as http:
        assert http.post(url, json=CHAT, headers=BEARER).json() == recorded
    assert llm.calls == 1


def test_replay_mode_miss_names_the_request(store, monkeypatch):
    """A request nobody recorded raises CacheMiss with method and URL."""
    block_network(monkeypatch)
    with client(store, "replay") as http, pytest.raises(CacheMiss) as caught:
        http.post("https://api.example.com/v1/chat?api_key=SECRET", json=CHAT)
    message = str(caught.value)
    assert "POST https://api.example.com/v1/chat" in message
    assert "SECRET" not in message
    assert caught.value.envelope_hash.startswith("sha256:")


def test_record_mode_always_calls_and_refreshes(store, llm):
    """record mode calls every time; its latest answer is the one cached."""
    url = f"{llm.url}/v1/chat/completions"
    with client(store, "record") as http:
        http.post(url, json=CHAT, headers=BEARER)
        latest = http.post(url, json=CHAT, headers=BEARER)
    with client(store) as http:
        assert http.post(url, json=CHAT, headers=BEARER).json() == latest.json()
    assert llm.calls == 2
    assert latest.json()["id"] == "chatcmpl-2"


def test_error_statuses_are_not_served_from_the_cache(store, llm):
    """A 429 is returned as it came but asked again next time; replay replays it."""
    url = f"{llm.url}/v1/fail/429"
    with client(store) as http:
        assert http.post(url, json=CHAT).status_code == 429
        assert http.post(url, json=CHAT).status_code == 429
    assert llm.calls == 2
    with client(store, "replay") as http:
        assert http.post(url, json=CHAT).status_code == 429
    assert llm.calls == 2


def test_connection_errors_reach_the_client(store):
    """A refused connection raises httpx's own error, and is not cached."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with client(store) as http:
        for _ in range(2):
            with pytest.raises(httpx.ConnectError):
                http.post(f"http://127.0.0.1:{port}/v1", json=CHAT)
    assert [s.status.value for s in store.list()] == ["failed", "failed"]


def test_a_served_connection_error_is_cached_call_error_in_the_same_process(store):
    """Once a failed call is served from its record, it is CachedCallError here too."""
    from intentusnet.cache.replay_cache import CachePolicy, ReplayCache
    from intentusnet.errors import CachedCallError

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1"
    cache = ReplayCache(policy=CachePolicy(serve_errors=True))
    with client(store, cache=cache) as http:
        with pytest.raises(httpx.ConnectError):
            http.post(url, json=CHAT)
        with pytest.raises(CachedCallError, match="ConnectError"):
            http.post(url, json=CHAT)
    with client(store, "replay") as http, pytest.raises(CachedCallError):
        http.post(url, json=CHAT)
    assert [s.status.value for s in store.list()] == ["failed"]


def test_concurrent_identical_requests_call_once(store, llm):
    """Ten threads asking the same at once make one call."""
    start = threading.Barrier(10)
    url = f"{llm.url}/v1/chat/completions"

    with client(store) as http:

        def ask(_n: int) -> str:
            start.wait()
            return http.post(url, json=CHAT, headers=BEARER).json()["id"]

        with ThreadPoolExecutor(10) as pool:
            ids = set(pool.map(ask, range(10)))
    assert len(ids) == 1
    assert llm.calls == 1


def test_async_transport(store, llm):
    """The async twin records, serves hits and replays streams the same way."""
    url = f"{llm.url}/v1/chat/completions"

    async def main() -> tuple[dict[str, object], dict[str, object], list[bytes]]:
        transport = AsyncRecordingTransport(store)
        async with httpx.AsyncClient(transport=transport) as http:
            first = (await http.post(url, json=CHAT, headers=BEARER)).json()
            second = (await http.post(url, json=CHAT, headers=BEARER)).json()
            ask = {**CHAT, "stream": True}
            async with http.stream("POST", url, json=ask, headers=BEARER) as r:
                await r.aread()
            async with http.stream("POST", url, json=ask, headers=BEARER) as r:
                chunks = [chunk async for chunk in r.aiter_bytes()]
        return first, second, chunks

    first, second, chunks = asyncio.run(main())
    assert first == second
    assert len(chunks) == 4
    assert llm.calls == 2


def test_hits_are_listed_as_cache_hits(store, llm):
    """Transport hits leave CACHE_HIT entries naming the recorded call."""
    url = f"{llm.url}/v1/chat/completions"
    with client(store) as http:
        http.post(url, json=CHAT, headers=BEARER)
        http.post(url, json=CHAT, headers=BEARER)
    (record,) = store.list()
    (hit,) = store.cache_hits()
    assert hit.source_execution_id == record.execution_id
    assert hit.intent_name == "http.request"


def test_example_runs(tmp_path):
    """examples/llm_cache.py runs end to end against its own fake server."""
    example = Path(__file__).parents[2] / "examples" / "llm_cache.py"
    done = subprocess.run(
        [sys.executable, str(example), "--store", str(tmp_path / "records")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("the model was called 1 time(s)") == 1
    assert "the model was called 2 time(s)" in done.stdout
    assert "CacheMiss: POST http://127.0.0.1:" in done.stdout
    assert "2 calls recorded, 3 answered from records." in done.stdout


# -- redaction -----------------------------------------------------------------------

KEY = b"r" * 32
SSN = "123-45-6789"


def leaked(root: Path, *secrets: str) -> list[str]:
    """Every file under ``root`` holding one of ``secrets``, byte for byte."""
    return [
        f"{secret} in {path}"
        for path in root.rglob("*")
        if path.is_file()
        for secret in secrets
        if secret.encode() in path.read_bytes()
    ]


@pytest.mark.parametrize(
    "name",
    [
        "key",
        "sig",
        "signature",
        "X-Amz-Signature",
        "X-Amz-Credential",
        "X-Amz-Security-Token",
        "client_secret",
        "password",
        "token",
        "access_token",
        "refresh_token",
        "code",
        "Api-Key",
        "API_KEY",
    ],
)
def test_credential_query_parameters_are_scrubbed(store, llm, name):
    """A credential parameter, in any case, is left out of the hash and the record."""
    secret = f"SECRET-{name}-0123"
    with client(store) as http:
        first = http.post(f"{llm.url}/echo?{name}={secret}&q=1", json=CHAT)
        again = http.post(f"{llm.url}/echo?q=1&{name}=other-value", json=CHAT)
    assert first.json() == again.json() == CHAT
    assert llm.calls == 1  # the parameter is not part of the request's identity
    assert leaked(store.root, secret) == []
    (summary,) = store.list()
    url = store.load(summary.execution_id).envelope["payload"]["url"]
    assert url == f"{llm.url}/echo?q=1"


class QuotingTransport(httpx.BaseTransport):
    """A real transport whose errors quote the URL, as some clients' do."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return self.inner.handle_request(request)
        except httpx.ConnectError as exc:
            auth = request.headers.get("authorization")
            raise httpx.ConnectError(
                f"{exc} while calling {request.url} as {auth}", request=request
            ) from exc

    def close(self) -> None:
        self.inner.close()


def test_error_text_quoting_the_url_is_stored_without_its_key(store):
    """An error quoting the URL and key reaches the client; the record has markers."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"http://127.0.0.1:{port}/v1?key={API_KEY}&q=1"
    transport = RecordingTransport(store, wrapped=QuotingTransport())
    with (
        httpx.Client(transport=transport) as http,
        pytest.raises(httpx.ConnectError) as caught,
    ):
        http.post(url, json=CHAT, headers=BEARER)
    assert API_KEY in str(caught.value)  # the caller sees what happened
    assert leaked(store.root, API_KEY) == []
    (summary,) = store.list()
    data = store.raw(summary.execution_id).decode()
    assert "while calling http://127.0.0.1" in data
    assert data.count("[redacted:hmac-sha256:") >= 4  # message and traceback, twice


def test_redactor_body_paths_and_headers(store, llm):
    """Body paths and named headers are hashed and recorded as markers."""
    redactor = Redactor(KEY, http_body=["user.ssn"], http_headers=["x-org"])
    hashed = [*DEFAULT_HASH_HEADERS, "x-org"]
    url = f"{llm.url}/echo"

    def ask(ssn: str, org: str = "org-SECRET-1") -> httpx.Response:
        body = {"user": {"ssn": ssn, "name": "Ada"}}
        return http.post(url, json=body, headers={"x-org": org})

    with client(store, redactor=redactor, hash_headers=hashed) as http:
        live = ask(SSN)
        hit = ask(SSN)
        ask("987-65-4321")  # another secret: another request
        ask(SSN, org="org-SECRET-2")  # another org: another request
    assert llm.calls == 3
    assert live.json()["user"]["ssn"] == SSN  # the client gets what came
    assert hit.json() == {"user": {"ssn": redactor.marker(SSN), "name": "Ada"}}
    assert leaked(store.root, SSN, "987-65-4321", "org-SECRET-1", "org-SECRET-2") == []
    record = store.load(store.list()[-1].execution_id)
    headers = record.envelope["payload"]["headers"]
    assert headers["x-org"] == redactor.marker("org-SECRET-1")


def test_named_credential_header_is_hashed_as_its_marker(store, llm):
    """Named by the redactor, a credential header may be hashed: one answer per key."""
    redactor = Redactor(KEY, http_headers=["authorization"])
    hashed = [*DEFAULT_HASH_HEADERS, "authorization"]
    url = f"{llm.url}/v1/chat/completions"
    with client(store, redactor=redactor, hash_headers=hashed) as http:
        http.post(url, json=CHAT, headers=BEARER)
        http.post(url, json=CHAT, headers=BEARER)
        other = http.post(url, json=CHAT, headers={"authorization": "Bearer x-1234"})
    assert llm.calls == 2
    assert other.status_code == 401
    assert leaked(store.root, API_KEY, "x-1234") == []


def test_async_transport_redacts_too(store, llm):
    """The async twin applies the same redactor."""
    redactor = Redactor(KEY, http_body=["user.ssn"])

    async def main() -> list[dict[str, object]]:
        transport = AsyncRecordingTransport(store, redactor=redactor)
        async with httpx.AsyncClient(transport=transport) as http:
            body = {"user": {"ssn": SSN}}
            return [
                (await http.post(f"{llm.url}/echo", json=body)).json() for _ in range(2)
            ]

    live, hit = asyncio.run(main())
    assert live == {"user": {"ssn": SSN}}
    assert hit == {"user": {"ssn": redactor.marker(SSN)}}
    assert llm.calls == 1
    assert leaked(store.root, SSN) == []


def test_transport_secrets_never_reach_postgres(pg_dsn, llm):
    """Over PostgreSQL, no row holds a key, a cookie or a redacted body value."""
    import psycopg

    from intentusnet.store import PostgresExecutionStore

    redactor = Redactor(KEY, http_body=["user.ssn"])
    with PostgresExecutionStore(pg_dsn) as pg:
        with client(pg, redactor=redactor) as http:
            for _ in range(2):
                http.post(
                    f"{llm.url}/echo?api_key={API_KEY}",
                    json={"user": {"ssn": SSN}},
                    headers={**BEARER, "cookie": f"c={COOKIE}"},
                )
        assert llm.calls == 1
    with psycopg.connect(pg_dsn) as conn:
        for table in (
            "intentusnet_records",
            "intentusnet_lines",
            "intentusnet_cache_hits",
        ):
            query = f"SELECT count(*) FROM {table} t WHERE t::text LIKE %s"
            for secret in (API_KEY, COOKIE, SSN):
                for form in (secret, secret.encode().hex()):
                    (found,) = conn.execute(query, (f"%{form}%",)).fetchone()
                    assert found == 0, f"{secret} in {table}"


def test_responses_say_hit_or_miss_and_name_their_record(store, llm):
    """A miss and its hit carry the cache state and the same record id."""
    url = f"{llm.url}/v1/chat/completions"
    with client(store) as http:
        miss = http.post(url, json=CHAT, headers=BEARER)
        hit = http.post(url, json=CHAT, headers=BEARER)
    (record,) = store.list()
    assert miss.headers[CACHE_HEADER] == "miss"
    assert hit.headers[CACHE_HEADER] == "hit"
    assert miss.headers[RECORD_HEADER] == hit.headers[RECORD_HEADER]
    assert hit.headers[RECORD_HEADER] == record.execution_id
    assert hit.extensions["intentusnet_cache"] == "hit"
    assert miss.extensions["intentusnet_record"] == record.execution_id
    assert hit.content == miss.content  # the headers are added, the body is as it came


def test_record_and_replay_modes_say_bypass_and_hit(store, llm):
    """record mode answers are bypass; replay mode answers are hits."""
    url = f"{llm.url}/v1/chat/completions"
    with client(store, "record") as http:
        recorded = http.post(url, json=CHAT, headers=BEARER)
    with client(store, "replay") as http:
        replayed = http.post(url, json=CHAT, headers=BEARER)
    assert recorded.headers[CACHE_HEADER] == "bypass"
    assert replayed.headers[CACHE_HEADER] == "hit"
    assert replayed.headers[RECORD_HEADER] == recorded.headers[RECORD_HEADER]


def test_a_request_header_asks_for_bypass_and_is_not_sent(store, llm):
    """x-intentusnet-cache: bypass calls again, refreshes, and never leaves."""
    url = f"{llm.url}/v1/chat/completions"
    with client(store) as http:
        http.post(url, json=CHAT, headers=BEARER)
        fresh = http.post(url, json=CHAT, headers={**BEARER, CACHE_HEADER: "bypass"})
        hit = http.post(url, json=CHAT, headers=BEARER)
    assert llm.calls == 2
    assert fresh.headers[CACHE_HEADER] == "bypass"
    assert fresh.json()["id"] == "chatcmpl-2"
    assert hit.json()["id"] == "chatcmpl-2"  # the refresh became the cached answer
    assert all(CACHE_HEADER not in seen for seen in llm.headers)


def test_a_request_header_asks_for_no_store(store, llm):
    """no-store reads the cache but its own answer is never served later."""
    url = f"{llm.url}/v1/chat/completions"
    no_store = {**BEARER, CACHE_HEADER: "no-store"}
    with client(store) as http:
        first = http.post(url, json=CHAT, headers=no_store)
        second = http.post(url, json=CHAT, headers=BEARER)
        third = http.post(url, json=CHAT, headers=no_store)
    with client(store) as http:  # a fresh cache: not adopted from the store either
        fourth = http.post(url, json=CHAT, headers=BEARER)
    assert [first.headers[CACHE_HEADER], second.headers[CACHE_HEADER]] == [
        "miss",
        "miss",
    ]
    assert third.headers[CACHE_HEADER] == "hit"  # no-store still reads
    assert fourth.json()["id"] == second.json()["id"] == "chatcmpl-2"
    assert llm.calls == 2
    assert all(CACHE_HEADER not in seen for seen in llm.headers)


def test_an_unknown_cache_request_header_is_refused(store, llm):
    """A value that is no directive raises ValueError listing the valid ones."""
    with (
        client(store) as http,
        pytest.raises(ValueError, match="'bypass', 'no-store', 'default'"),
    ):
        http.post(f"{llm.url}/echo", content=b"x", headers={CACHE_HEADER: "never"})
    assert llm.calls == 0


def test_async_transport_says_hit_or_miss(store, llm):
    """The async transport marks its responses the same way."""
    url = f"{llm.url}/v1/chat/completions"

    async def main() -> list[str]:
        async with httpx.AsyncClient(transport=AsyncRecordingTransport(store)) as h:
            miss = await h.post(url, json=CHAT, headers=BEARER)
            hit = await h.post(url, json=CHAT, headers=BEARER)
            fresh = await h.post(
                url, json=CHAT, headers={**BEARER, CACHE_HEADER: "bypass"}
            )
        return [r.headers[CACHE_HEADER] for r in (miss, hit, fresh)]

    assert asyncio.run(main()) == ["miss", "hit", "bypass"]
    assert llm.calls == 2


@pytest.mark.parametrize("is_async", [False, True], ids=["sync", "async"])
def test_closing_the_transport_writes_the_counts(store, llm, is_async):
    """Three calls through a closed client show 2 hits and 1 miss in stats."""
    from click.testing import CliRunner

    from intentusnet.cli import cli

    url = f"{llm.url}/echo"
    if is_async:

        async def main() -> None:
            async with httpx.AsyncClient(
                transport=AsyncRecordingTransport(store)
            ) as http:
                for _ in range(3):
                    await http.post(url, content=b"x")

        asyncio.run(main())
    else:
        with client(store) as http:
            for _ in range(3):
                http.post(url, content=b"x")
    done = CliRunner().invoke(cli, ["--store", str(store.root), "stats", "--json"])
    assert done.exit_code == 0, done.output
    (counts,) = orjson.loads(done.stdout)["caches"]
    assert (counts["hits"], counts["misses"]) == (2, 1)


def test_closing_keeps_a_shared_cache_open(store, llm):
    """A cache the user gave gets its counts written and stays usable."""
    from intentusnet.cache.replay_cache import ReplayCache

    cache = ReplayCache(store=store)
    with client(store, cache=cache) as http:
        http.post(f"{llm.url}/echo", content=b"y")
        http.post(f"{llm.url}/echo", content=b"y")
    assert cache.stats().hits == 1
    with client(store, cache=cache) as http:  # still serves
        assert http.post(f"{llm.url}/echo", content=b"y").headers[CACHE_HEADER] == "hit"
    assert llm.calls == 1
    cache.close()


def test_ignored_body_paths_do_not_count(store, llm):
    """Requests differing only at ignored paths are one request; others differ."""
    url = f"{llm.url}/v1/chat/completions"
    ask = {**CHAT, "user": "alice", "metadata": {"session": "s1", "team": "a"}}
    ignore = ["user", "metadata.session", "messages[*].name"]
    with client(store, ignore_body_paths=ignore) as http:
        first = http.post(url, json=ask, headers=BEARER)
        other_user = {**ask, "user": "bob", "metadata": {"session": "s2", "team": "a"}}
        same = http.post(url, json=other_user, headers=BEARER)
        other_team = {**ask, "metadata": {"session": "s1", "team": "b"}}
        differs = http.post(url, json=other_team, headers=BEARER)
    assert same.headers[CACHE_HEADER] == "hit"
    assert same.content == first.content
    assert differs.headers[CACHE_HEADER] == "miss"
    assert llm.calls == 2
    record = store.load(first.headers[RECORD_HEADER])
    sent = record.envelope["payload"]["json"]
    assert sent["user"] == "(ignored)"
    assert sent["metadata"] == {"session": "(ignored)", "team": "a"}
    assert "alice" not in str(record.envelope)


def test_a_bad_ignored_path_is_refused(store):
    """A path that does not parse is a ValueError when the transport is made."""
    with pytest.raises(ValueError, match=r"messages\["):
        RecordingTransport(store, ignore_body_paths=["messages["])


def test_identical_multipart_uploads_hit(store, llm):
    """The random multipart boundary does not count; the files do."""
    url = f"{llm.url}/upload"
    with client(store) as http:
        first = http.post(url, files={"file": ("a.txt", b"hello")}, data={"k": "v"})
        again = http.post(url, files={"file": ("a.txt", b"hello")}, data={"k": "v"})
        other = http.post(url, files={"file": ("a.txt", b"world")}, data={"k": "v"})
    assert (
        first.request.headers["content-type"] != again.request.headers["content-type"]
    )  # httpx drew two boundaries
    assert again.headers[CACHE_HEADER] == "hit"
    assert other.headers[CACHE_HEADER] == "miss"
    assert llm.calls == 2
    record = store.load(first.headers[RECORD_HEADER])
    sent = record.envelope["payload"]["headers"]["content-type"]
    assert sent == "multipart/form-data; boundary=(boundary)"


def test_before_record_request_shapes_the_hash(store, llm):
    """A request hook's payload is what is hashed and recorded."""
    url = f"{llm.url}/v1/chat/completions"
    seen = []

    def drop_seed(payload):
        seen.append(payload)
        body = dict(payload["json"])
        body.pop("seed", None)
        return {**payload, "json": body}

    with client(store, before_record_request=drop_seed) as http:
        first = http.post(url, json={**CHAT, "seed": 1}, headers=BEARER)
        again = http.post(url, json={**CHAT, "seed": 2}, headers=BEARER)
    assert again.headers[CACHE_HEADER] == "hit"
    assert llm.calls == 1
    assert seen[0]["json"]["seed"] == 1  # the hook sees the body as JSON
    assert set(seen[0]) == {"method", "url", "headers", "json"}
    record = store.load(first.headers[RECORD_HEADER])
    assert "seed" not in record.envelope["payload"]["json"]


def test_a_request_seen_before_keeps_its_key_and_nothing_else(store, llm):
    """Repeats are keyed from their bytes; any hashed difference is another key."""
    url = f"{llm.url}/echo"
    ask = {"content-type": "application/json", "accept": "application/json"}
    with client(store) as http:
        first = http.post(url, content=b'{"a":1}', headers=ask)
        states = [
            http.post(url, content=b'{"a":1}', headers=ask),
            http.post(url, content=b'{"a":1}', headers={**ask, "x-trace": "2"}),
            http.post(url, content=b'{"a":2}', headers=ask),
            http.post(url, content=b'{"a":1}', headers={**ask, "accept": "*/*"}),
            http.post(url + "?q=1", content=b'{"a":1}', headers=ask),
            http.put(url, content=b'{"a":1}', headers=ask),
            http.post(url, content=b'{"a": 1}', headers=ask),
        ]
    assert [r.headers[CACHE_HEADER] for r in states] == [
        *["hit", "hit"],
        *["miss", "miss", "miss", "miss"],
        "hit",  # other bytes, the same JSON: keyed anew, the same key
    ]
    assert states[-1].headers[RECORD_HEADER] == first.headers[RECORD_HEADER]
    with client(store) as fresh:  # a transport that never saw it keys it alike
        again = fresh.post(url, content=b'{"a":1}', headers=ask)
    assert again.headers[CACHE_HEADER] == "hit"
    assert again.headers[RECORD_HEADER] == first.headers[RECORD_HEADER]


def test_a_request_hook_sees_every_request(store, llm):
    """With before_record_request, repeats are keyed anew: the hook sees each."""
    seen = []

    def note(payload):
        seen.append(payload["url"])
        return payload

    with client(store, before_record_request=note) as http:
        states = [
            http.post(f"{llm.url}/echo", content=b"x").headers[CACHE_HEADER]
            for _ in range(3)
        ]
    assert states == ["miss", "hit", "hit"]
    assert len(seen) == 3


def test_before_record_response_shapes_what_is_replayed(store, llm):
    """A response hook changes the record; the live client gets it as it came."""
    url = f"{llm.url}/v1/chat/completions"

    def scrub(data):
        headers = [pair for pair in data["headers"] if pair[0] != "x-request-id"]
        return {
            **data,
            "headers": headers,
            "body": data["body"].replace("echo", "ECHO"),
        }

    with client(store, before_record_response=scrub) as http:
        live = http.post(url, json=CHAT, headers=BEARER)
        hit = http.post(url, json=CHAT, headers=BEARER)
    assert live.headers["x-request-id"] == "req-fake"
    assert live.json()["choices"][0]["message"]["content"] == "echo: hello"
    assert "x-request-id" not in hit.headers
    assert hit.json()["choices"][0]["message"]["content"] == "ECHO: hello"


def test_a_failing_request_hook_reaches_the_caller_before_any_call(store, llm):
    """An exception in before_record_request reaches the caller; nothing is sent."""

    def broken(payload):
        raise KeyError("no such field")

    with client(store, before_record_request=broken) as http, pytest.raises(KeyError):
        http.post(f"{llm.url}/echo", content=b"x")
    assert llm.calls == 0


def test_a_tenant_function_keys_each_request_by_its_tenant(store, llm):
    """One transport serves many tenants: each its own answers, recorded as its."""

    def tenant(request: httpx.Request) -> str | None:
        return request.headers.get("x-team")

    url = f"{llm.url}/v1/chat/completions"
    with client(store, tenant=tenant) as http:
        for team in ("red", "blue", "red", "blue"):
            answer = http.post(url, json=CHAT, headers={**BEARER, "x-team": team})
            assert answer.status_code == 200
        assert answer.headers[CACHE_HEADER] == "hit"
    assert llm.calls == 2
    tenants = sorted(
        store.load(s.execution_id).envelope["context"]["tenant"] for s in store.list()
    )
    assert tenants == ["blue", "red"]
    with pytest.raises(TypeError, match="tenant must be"):
        RecordingTransport(store, tenant=3)  # type: ignore[arg-type]
