"""``intentusnet gateway``: real processes, the real SDKs and curl, one format."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from click.testing import CliRunner
from integrations.fakeapi import API_KEY, FakeAPI
from livekit import CliProcess, free_port

from intentusnet.cli import cli
from intentusnet.errors import CacheMiss
from intentusnet.integrations.httpx import RecordingTransport
from intentusnet.server.gateway import tenant_key, tenant_of
from intentusnet.store import FileExecutionStore

pytestmark = pytest.mark.slow
#: The checkout under test, first on a subprocess's path.
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 10
ASK = {"model": "m", "messages": [{"role": "user", "content": "hello there"}]}
BEARER = {"authorization": f"Bearer {API_KEY}"}


class Gateway(CliProcess):
    """``intentusnet gateway`` in a subprocess on a free loopback port."""

    def __init__(
        self,
        store: Path | str,
        upstream: str,
        *args: str,
        env: dict[str, str] | None = None,
    ) -> None:
        self.port = free_port()
        command = [
            sys.executable,
            "-m",
            "intentusnet.cli",
            "gateway",
            "--listen",
            f"127.0.0.1:{self.port}",
            "--upstream",
            f"fake={upstream}",
            "--store",
            str(store),
            "--log-level",
            "warning",
            *args,
        ]
        super().__init__(command, f"http://127.0.0.1:{self.port}", env=env)


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """The fake OpenAI/Anthropic API, running."""
    with FakeAPI() as server:
        yield server


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """The store directory the gateway records to."""
    return tmp_path / "records"


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    """A plain HTTP client (no proxy from the environment)."""
    with httpx.Client(trust_env=False, timeout=TIMEOUT) as client:
        yield client


def _sdk_calls(url: str) -> list[bytes]:
    """OpenAI and Anthropic SDK calls, plain and streamed: each raw body."""
    oa = openai.OpenAI(
        base_url=f"{url}/fake/v1", api_key=API_KEY, max_retries=0, timeout=TIMEOUT
    )
    an = anthropic.Anthropic(
        base_url=f"{url}/fake", api_key=API_KEY, max_retries=0, timeout=TIMEOUT
    )
    messages = [{"role": "user", "content": "say hi"}]
    bodies = []
    with oa, an:
        raw = oa.chat.completions.with_raw_response.create(model="m", messages=messages)  # type: ignore[arg-type]
        assert raw.parse().choices[0].message.content == "echo say hi t=None"
        bodies.append(raw.http_response.content)
        with oa.chat.completions.with_streaming_response.create(
            model="m",
            messages=messages,  # type: ignore[arg-type]
            stream=True,
        ) as streamed:
            bodies.append(b"".join(streamed.iter_bytes()))
        raw2 = an.messages.with_raw_response.create(
            model="c",
            max_tokens=16,
            messages=messages,  # type: ignore[arg-type]
        )
        assert raw2.parse().content[0].text == "echo say hi t=None"  # type: ignore[union-attr]
        bodies.append(raw2.http_response.content)
        with an.messages.stream(model="c", max_tokens=16, messages=messages) as events:  # type: ignore[arg-type]
            assert "".join(events.text_stream) == "echo say hi t=None"
    return bodies


def _files_holding(root: Path, secret: bytes) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret in p.read_bytes()]


def test_sdks_record_then_replay_with_the_upstream_stopped(root: Path) -> None:
    """The SDKs' answers, recorded, replay byte for byte with no upstream."""
    with FakeAPI() as api:
        gateway = Gateway(root, api.url, "--mode", "record")
        try:
            recorded = _sdk_calls(gateway.url)
        finally:
            assert gateway.stop() in (0, -signal.SIGTERM)
        upstream = api.url
        assert api.hits == 4
    gateway = Gateway(root, upstream, "--mode", "replay")
    try:
        assert _sdk_calls(gateway.url) == recorded
    finally:
        gateway.stop()
    assert b"data: " in recorded[1]
    assert _files_holding(root, API_KEY.encode()) == []


def test_a_stream_reaches_the_client_as_it_comes_and_replays_event_by_event(
    root: Path, http: httpx.Client
) -> None:
    """A miss streams before the upstream ends; a hit yields the same events."""
    body = {**ASK, "stream": True}
    with FakeAPI(held=True) as api:
        gateway = Gateway(root, api.url)
        try:
            url = f"{gateway.url}/fake/v1/chat/completions"
            with http.stream("POST", url, json=body, headers=BEARER) as live:
                assert live.headers["x-intentusnet-cache"] == "miss"
                chunks = live.iter_raw()
                first = next(chunks)
                assert first.startswith(b"data: ")
                assert api.finished == 0
                api.release.set()
                events = [first, *chunks]
            with http.stream("POST", url, json=body, headers=BEARER) as hit:
                assert hit.headers["x-intentusnet-cache"] == "hit"
                replayed = list(hit.iter_raw())
        finally:
            gateway.stop()
    assert api.hits == 1
    assert b"".join(replayed) == b"".join(events)
    assert len(replayed) == len(events) == 5  # 3 words, the first chunk, [DONE]


def test_the_python_transport_and_the_gateway_answer_each_others_records(
    root: Path, api: FakeAPI, http: httpx.Client
) -> None:
    """Recorded through the gateway, a hit for RecordingTransport; and the reverse."""
    gateway = Gateway(root, api.url, "--shared-cache")
    store = FileExecutionStore(root)
    direct = httpx.Client(transport=RecordingTransport(store), timeout=TIMEOUT)
    try:
        via = f"{gateway.url}/fake/v1/chat/completions"
        to = f"{api.url}/v1/chat/completions"
        first = http.post(via, json=ASK, headers=BEARER)
        assert first.headers["x-intentusnet-cache"] == "miss"
        again = direct.post(to, json=ASK, headers=BEARER)
        assert again.headers["x-intentusnet-cache"] == "hit"
        assert (
            again.headers["x-intentusnet-record"]
            == first.headers["x-intentusnet-record"]
        )
        assert again.content == first.content
        other = {**ASK, "temperature": 0.5}
        mine = direct.post(to, json=other, headers=BEARER)
        assert mine.headers["x-intentusnet-cache"] == "miss"
        theirs = http.post(via, json=other, headers=BEARER)
        assert theirs.headers["x-intentusnet-cache"] == "hit"
        assert theirs.content == mine.content
    finally:
        direct.close()
        store.close()
        gateway.stop()
    assert api.hits == 2


def test_each_credential_has_its_own_answers_by_default(
    root: Path, api: FakeAPI, http: httpx.Client
) -> None:
    """Two credentials do not share answers; a transport with the tenant does."""
    gateway = Gateway(root, api.url)
    url = f"{gateway.url}/fake/v1/chat/completions"
    other_key = {"x-api-key": API_KEY}  # the fake takes it too: another caller
    try:
        assert (
            http.post(url, json=ASK, headers=BEARER).headers["x-intentusnet-cache"]
            == "miss"
        )
        assert (
            http.post(url, json=ASK, headers=other_key).headers["x-intentusnet-cache"]
            == "miss"
        )
        assert (
            http.post(url, json=ASK, headers=BEARER).headers["x-intentusnet-cache"]
            == "hit"
        )
    finally:
        gateway.stop()
    assert api.hits == 2
    key = tenant_key(root / "gateway-tenant.key")
    tenant = tenant_of(key, [(b"authorization", f"Bearer {API_KEY}".encode())])
    store = FileExecutionStore(root)
    transport = RecordingTransport(store, tenant=tenant)
    with httpx.Client(transport=transport, timeout=TIMEOUT) as direct:
        hit = direct.post(f"{api.url}/v1/chat/completions", json=ASK, headers=BEARER)
    store.close()
    assert hit.headers["x-intentusnet-cache"] == "hit"
    assert _files_holding(root, API_KEY.encode()) == []


def test_a_wrong_tenant_key_says_so_in_the_replay_miss(
    root: Path, api: FakeAPI, http: httpx.Client
) -> None:
    """The key file read with its newline: a miss naming the tenant that has it."""
    gateway = Gateway(root, api.url)
    try:
        first = http.post(
            f"{gateway.url}/fake/v1/chat/completions", json=ASK, headers=BEARER
        )
    finally:
        gateway.stop()
    assert first.headers["x-intentusnet-cache"] == "miss"
    path = root / "gateway-tenant.key"
    raw = path.read_bytes()
    assert raw.endswith(b"\n")
    assert tenant_key(path) == raw.strip()
    assert len(tenant_key(str(path))) == 64
    sent = [(b"authorization", f"Bearer {API_KEY}".encode())]
    right, wrong = tenant_of(tenant_key(path), sent), tenant_of(raw, sent)
    assert right != wrong
    url = f"{api.url}/v1/chat/completions"
    with FileExecutionStore(root) as store:
        for tenant in (wrong, right):
            transport = RecordingTransport(store, mode="replay", tenant=tenant)
            with httpx.Client(transport=transport, timeout=TIMEOUT) as direct:
                if tenant == wrong:
                    with pytest.raises(CacheMiss) as missed:
                        direct.post(url, json=ASK, headers=BEARER)
                    # another request, recorded for nobody: no tenant named
                    with pytest.raises(CacheMiss) as unrecorded:
                        direct.post(url, json={**ASK, "n": 2}, headers=BEARER)
                else:
                    hit = direct.post(url, json=ASK, headers=BEARER)
    assert (
        f"this request is recorded for tenant {right!r}, not for this "
        f"transport's {wrong!r}"
    ) in str(missed.value)
    assert "tenant_of(tenant_key(path), ...)" in str(missed.value)
    assert "recorded for tenant" not in str(unrecorded.value)
    assert hit.headers["x-intentusnet-cache"] == "hit"
    assert hit.headers["x-intentusnet-record"] == first.headers["x-intentusnet-record"]
    # the gateway serves many tenants: it never tells one of another's records
    replaying = Gateway(root, api.url, "--mode", "replay", "--log-level", "info")
    try:
        other = http.post(
            f"{replaying.url}/fake/v1/chat/completions",
            json=ASK,
            headers={"x-api-key": API_KEY},
        )
    finally:
        replaying.stop()
    assert other.status_code == 404
    assert other.json()["error"]["type"] == "intentusnet_cache_miss"
    said = other.text + "".join(replaying.lines)
    assert "cache_miss" in "".join(replaying.lines)
    assert "recorded for tenant" not in said
    assert right not in said
    assert api.hits == 1


def test_a_python_client_shares_a_query_credentials_records(
    root: Path, http: httpx.Client
) -> None:
    """A transport keyed by tenant_of with the query string hits the gateway's."""
    with FakeAPI(any_key=True) as api:
        gateway = Gateway(root, api.url)
        try:
            first = http.post(
                f"{gateway.url}/fake/v1/chat/completions",
                json=ASK,
                params={"key": "AIza-query-credential-1"},
            )
        finally:
            gateway.stop()
        key = tenant_key(root / "gateway-tenant.key")
        store = FileExecutionStore(root)
        url = f"{api.url}/v1/chat/completions"
        answers = []
        for given in ("AIza-query-credential-1", "AIza-query-credential-2"):
            tenant = tenant_of(key, [], f"key={given}")
            transport = RecordingTransport(store, tenant=tenant)
            with httpx.Client(transport=transport, timeout=TIMEOUT) as direct:
                answers.append(direct.post(url, json=ASK, params={"key": given}))
        store.close()
    assert first.headers["x-intentusnet-cache"] == "miss"
    assert [a.headers["x-intentusnet-cache"] for a in answers] == ["hit", "miss"]
    assert answers[0].content == first.content
    assert api.hits == 2


def test_shared_cache_answers_every_credential(
    root: Path, api: FakeAPI, http: httpx.Client
) -> None:
    """With --shared-cache another credential gets the recorded answer."""
    gateway = Gateway(root, api.url, "--shared-cache")
    url = f"{gateway.url}/fake/v1/chat/completions"
    try:
        http.post(url, json=ASK, headers=BEARER)
        again = http.post(url, json=ASK, headers={"x-api-key": API_KEY})
    finally:
        gateway.stop()
    assert again.headers["x-intentusnet-cache"] == "hit"
    assert api.hits == 1


# -- tenancy: every place a credential sits ------------------------------------------

#: Where a caller's credential sits: ``(header|query, name, how the value is written)``.
POSITIONS = [
    ("header", "authorization", "Bearer {}"),
    ("header", "x-api-key", "{}"),
    ("header", "api-key", "{}"),
    ("header", "x-goog-api-key", "{}"),
    ("header", "cookie", "session={}; theme=dark"),
    ("header", "X-Auth-Token", "{}"),
    ("header", "Proxy-Authorization", "Basic {}"),
    ("query", "key", "{}"),
    ("query", "api_key", "{}"),
    ("query", "auth", "{}"),
    ("query", "X-Goog-Signature", "{}"),
    ("query", "id_token", "{}"),
    ("query", "secret", "{}"),
    ("query", "client_assertion", "{}"),
    ("query", "private_token", "{}"),
]
Position = tuple[str, str, str]


@pytest.fixture(params=["file", "postgresql"])
def stored(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[str, list[str]]:
    """A gateway's store (a directory, or a PostgreSQL database) and its options."""
    if request.param == "file":
        return str(tmp_path / "records"), []
    key = tmp_path / "tenant.key"
    key.write_text("k" * 32)
    return request.getfixturevalue("pg_dsn"), ["--tenant-key-file", str(key)]


def _ask_with(
    http: httpx.Client,
    url: str,
    credentials: list[tuple[Position, str]],
    body: dict[str, object] = ASK,
) -> httpx.Response:
    """POST ``body`` to ``url`` carrying each secret at its position."""
    headers: dict[str, str] = {}
    params: list[tuple[str, str]] = [("q", "1")]
    for (where, name, form), secret in credentials:
        if where == "header":
            headers[name] = form.format(secret)
        else:
            params.append((name, form.format(secret)))
    return http.post(url, json=body, headers=headers, params=params)


def test_no_answer_crosses_callers_wherever_their_credential_sits(
    stored: tuple[str, list[str]], http: httpx.Client
) -> None:
    """15 credential positions x 2 callers, and none: each misses, then hits its own."""
    store, options = stored
    callers: list[list[tuple[Position, str]]] = [
        [(position, f"{position[1]}-{who}-s3cr3t")]
        for position in POSITIONS
        for who in ("alice", "bob")
    ]
    callers.append([])  # no credential at all: the anonymous tenant
    with FakeAPI(any_key=True) as api:
        gateway = Gateway(store, api.url, *options)
        url = f"{gateway.url}/fake/v1/chat/completions"
        try:
            first = [_ask_with(http, url, caller) for caller in callers]
            again = [_ask_with(http, url, caller) for caller in callers]
        finally:
            gateway.stop()
    assert [r.status_code for r in first + again] == [200] * (2 * len(callers))
    assert [r.headers["x-intentusnet-cache"] for r in first] == ["miss"] * len(callers)
    assert [r.headers["x-intentusnet-cache"] for r in again] == ["hit"] * len(callers)
    assert [r.json()["id"] for r in again] == [r.json()["id"] for r in first]
    assert len({r.json()["id"] for r in first}) == len(callers) == api.hits == 31


def _files_holding_any(root: Path, secrets: list[str]) -> list[str]:
    return [
        f"{secret} in {path}"
        for path in root.rglob("*")
        if path.is_file()
        for data in [path.read_bytes()]
        for secret in secrets
        if secret.encode() in data
    ]


def _tables_holding_any(dsn: str, secrets: list[str]) -> tuple[int, list[str]]:
    """How many tables the database has, and the secrets any row of them holds."""
    import psycopg

    with psycopg.connect(dsn) as conn:
        tables = [
            name
            for (name,) in conn.execute(
                "SELECT format('%I.%I', table_schema, table_name) FROM "
                "information_schema.tables WHERE table_schema NOT IN "
                "('pg_catalog', 'information_schema')"
            )
        ]
        dump = "\n".join(
            text
            for table in tables
            for (text,) in conn.execute(f"SELECT t::text FROM {table} t")
        )
    return len(tables), [
        secret for secret in secrets if secret in dump or secret.encode().hex() in dump
    ]


def test_no_planted_secret_reaches_a_byte_the_gateway_wrote(
    stored: tuple[str, list[str]], http: httpx.Client, tmp_path: Path
) -> None:
    """120 secrets in every position, on hits, misses, streams, errors: none written."""
    store, options = stored
    callers = [
        [(position, f"planted{n:02d}-{position[1]}-Zq9") for position in POSITIONS]
        for n in range(8)
    ]
    planted = [secret for caller in callers for _, secret in caller]
    assert len(set(planted)) == 120
    log = tmp_path / "access.log"
    temporary = tmp_path / "tmp"  # a store without a directory caches here
    temporary.mkdir()
    down = f"down=http://127.0.0.1:{free_port()}"
    with FakeAPI(any_key=True) as api:
        gateway = Gateway(
            store,
            api.url,
            *options,
            *("--upstream", down, "--access-log", str(log), "--log-level", "debug"),
            env={"TMPDIR": str(temporary)},
        )
        url = f"{gateway.url}/fake/v1/chat/completions"
        try:
            for caller in callers:
                asks = [
                    ASK,
                    ASK,
                    {**ASK, "stream": True},
                    {**ASK, "messages": [{"role": "user", "content": "fail 500"}]},
                ]
                answers = [_ask_with(http, url, caller, body) for body in asks]
                broken = _ask_with(http, f"{gateway.url}/down/v1/x", caller)
                assert [a.status_code for a in answers] == [200, 200, 200, 500]
                assert answers[1].headers["x-intentusnet-cache"] == "hit"
                assert broken.status_code == 502
            while_running = _files_holding_any(tmp_path, planted)
        finally:
            gateway.stop()
    assert api.hits == 8 * 3
    assert while_running == []
    assert _files_holding_any(tmp_path, planted) == []
    assert [s for s in planted if any(s in line for line in gateway.lines)] == []
    assert log.read_text().count("\n") == 8 * 5
    if store.startswith("postgresql://"):
        tables, found = _tables_holding_any(store, planted)
        assert tables >= 3
        assert found == []


def test_cache_directives_and_replay_misses(
    root: Path, api: FakeAPI, http: httpx.Client
) -> None:
    """bypass calls again; replay of an unrecorded request names the nearest one."""
    gateway = Gateway(root, api.url)
    url = f"{gateway.url}/fake/v1/chat/completions"
    try:
        first = http.post(url, json=ASK, headers=BEARER)
        bypass = http.post(
            url, json=ASK, headers={**BEARER, "x-intentusnet-cache": "bypass"}
        )
        bad = http.post(url, json=ASK, headers={**BEARER, "x-intentusnet-cache": "x"})
    finally:
        gateway.stop()
    assert bypass.headers["x-intentusnet-cache"] == "bypass"
    assert api.hits == 2
    assert bad.status_code == 400
    assert bad.json()["error"]["type"] == "bad_cache_header"
    gateway = Gateway(root, api.url, "--mode", "replay")
    try:
        changed = {**ASK, "messages": [{"role": "user", "content": "other"}]}
        miss = http.post(
            f"{gateway.url}/fake/v1/chat/completions", json=changed, headers=BEARER
        )
    finally:
        gateway.stop()
    assert miss.status_code == 404
    error = miss.json()["error"]
    assert error["type"] == "intentusnet_cache_miss"
    recorded = {
        first.headers["x-intentusnet-record"],
        bypass.headers["x-intentusnet-record"],
    }
    assert {n.split()[0] for n in error["nearest"]} == recorded
    assert all("body differs at messages[0].content" in n for n in error["nearest"])
    assert error["request"].endswith("/v1/chat/completions")
    assert api.hits == 2
    # for the caller: the nearest request's hash, the mode in the gateway's words
    with FileExecutionStore(root) as store:
        hashes = {store.load(r).header.envelope_hash for r in recorded}
    assert all(f"request hash {h}" in miss.text for h in hashes)
    assert error["mode"] == "replay"
    assert "this gateway runs in replay mode" in error["message"]
    assert str(root) not in miss.text
    assert str(root.resolve()) not in miss.text
    assert "mode=" not in miss.text
    assert "Traceback" not in miss.text
    # for the operator: where it looked
    assert any(str(root) in line for line in gateway.lines)


def _raw(url: str, request: bytes) -> tuple[int, bytes]:
    """Send raw HTTP/1.1 bytes; the status and the body."""
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=TIMEOUT) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


def test_hostile_requests_get_clear_errors(
    root: Path, api: FakeAPI, http: httpx.Client
) -> None:
    """Huge bodies, traversal, unknown upstreams and bad JSON: JSON errors, no trace."""
    gateway = Gateway(root, api.url, "--max-body-size", "1KiB")
    try:
        big = http.post(
            f"{gateway.url}/fake/v1/chat/completions",
            content=b"x" * 5000,
            headers=BEARER,
        )
        unknown = http.post(f"{gateway.url}/nope/v1/x", json=ASK)
        bad_json = http.post(
            f"{gateway.url}/fake/v1/chat/completions",
            content=b"{not json",
            headers={**BEARER, "content-type": "application/json"},
        )
        traversals = [
            _raw(
                gateway.url,
                b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
            )
            for path in (
                b"/fake/../other/x",
                b"/fake/v1/%2e%2e/%2E%2E/x",
                b"/fake/v1%2f..%2fx",
                b"/..%2ffake/x",
            )
        ]
    finally:
        gateway.stop()
    assert big.status_code == 413
    assert big.json()["error"]["type"] == "body_too_large"
    assert unknown.status_code == 404
    assert unknown.json()["error"]["upstreams"] == ["fake"]
    # the fake drops the connection on bad JSON: the gateway says so
    assert bad_json.status_code == 502
    assert bad_json.json()["error"]["type"] == "upstream_unreachable"
    assert [status for status, _ in traversals] == [400, 400, 400, 404]
    for _, body in traversals:
        assert json.loads(body)["error"]["message"]
    assert api.hits == 1  # only the bad JSON reached it
    assert "Traceback" not in "".join(gateway.lines)


def test_an_upstream_down_or_silent_is_a_502_or_504(
    root: Path, http: httpx.Client
) -> None:
    """A refused connection answers 502, an upstream that never answers 504."""
    with socket.socket() as silent:
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)  # accepts connections, never answers
        port = silent.getsockname()[1]
        gateway = Gateway(root, f"http://127.0.0.1:{port}", "--timeout", "0.5")
        try:
            slow = http.post(f"{gateway.url}/fake/v1/x", json=ASK)
        finally:
            gateway.stop()
    gateway = Gateway(root, f"http://127.0.0.1:{free_port()}")
    try:
        down = http.post(f"{gateway.url}/fake/v1/x", json=ASK)
    finally:
        gateway.stop()
    assert slow.status_code == 504
    assert slow.json()["error"]["type"] == "upstream_timeout"
    assert down.status_code == 502
    assert down.json()["error"]["type"] == "upstream_unreachable"


def test_gateway_keys_guard_it_and_are_not_forwarded(
    root: Path, api: FakeAPI, http: httpx.Client, tmp_path: Path
) -> None:
    """With --api-keys-file a request needs x-intentusnet-key, never sent upstream."""
    keys = tmp_path / "keys"
    keys.write_text("gateway-key-0123456789\n")
    keys.chmod(0o600)
    gateway = Gateway(root, api.url, "--api-keys-file", str(keys))
    url = f"{gateway.url}/fake/v1/chat/completions"
    try:
        refused = http.post(url, json=ASK, headers=BEARER)
        wrong = http.post(
            url, json=ASK, headers={**BEARER, "x-intentusnet-key": "nope" * 5}
        )
        let = http.post(
            url,
            json=ASK,
            headers={**BEARER, "x-intentusnet-key": "gateway-key-0123456789"},
        )
    finally:
        gateway.stop()
    assert refused.status_code == wrong.status_code == 401
    assert let.status_code == 200
    assert api.hits == 1
    assert "x-intentusnet-key" not in api.seen[0]
    assert "connection" not in api.seen[0] or api.seen[0]["connection"] != "close"


@pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not on PATH")
def test_curl_records_and_replays(root: Path, tmp_path: Path) -> None:
    """curl through the gateway: recorded, then replayed byte for byte."""
    body = json.dumps({**ASK, "stream": True})

    def curl(url: str) -> bytes:
        done = subprocess.run(
            [
                "curl",
                "-sS",
                "-N",
                "--noproxy",
                "*",
                "-H",
                f"Authorization: Bearer {API_KEY}",
                "-H",
                "content-type: application/json",
                "-d",
                body,
                f"{url}/fake/v1/chat/completions",
            ],
            capture_output=True,
            check=True,
            timeout=30,
        )
        return done.stdout

    with FakeAPI() as api:
        gateway = Gateway(root, api.url, "--mode", "record")
        try:
            recorded = curl(gateway.url)
        finally:
            gateway.stop()
    gateway = Gateway(root, api.url, "--mode", "replay")
    try:
        replayed = curl(gateway.url)
    finally:
        gateway.stop()
    assert recorded.endswith(b"data: [DONE]\n\n")
    assert replayed == recorded


#: Command lines the gateway refuses, and what its one line of error says.
USAGE_ERRORS = [
    ([], "Missing option '--upstream'"),
    (["--upstream", "bad name=http://x"], "NAME=URL"),
    (["--upstream", "a=ftp://x"], "not an http(s) URL"),
    (["--upstream", "a=http://x", "--upstream", "a=http://y"], "given twice"),
    (["--upstream", "a=http://x", "--listen", "0.0.0.0:1"], "without an API key"),
    (["--upstream", "a=http://x", "--listen", "nowhere"], "HOST:PORT"),
    (["--upstream", "a=http://x", "--redact", "user"], "--redact-key-file"),
]


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_usage_errors_exit_2(
    args: list[str], message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bad upstreams, listen addresses and redaction options exit 2, named."""
    monkeypatch.delenv("INTENTUSNET_API_KEYS", raising=False)
    result = CliRunner().invoke(
        cli, ["gateway", "--store", str(tmp_path / "s"), *args], env=dict(os.environ)
    )
    assert result.exit_code == 2, result.output
    assert message in result.output


#: Runs the command line in a fresh Python and prints the server packages loaded.
_LOADED = """
import sys
from intentusnet.cli import main
try:
    main(sys.argv[1:])
finally:
    heavy = ("fastapi", "starlette", "uvicorn", "httpx", "pydantic")
    print(",".join(m for m in heavy if m in sys.modules))
"""


@pytest.mark.parametrize(("args", "message"), USAGE_ERRORS)
def test_a_usage_error_imports_no_server_package(
    args: list[str], message: str, tmp_path: Path
) -> None:
    """A refused command line is said before FastAPI, Starlette or httpx load."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("INTENTUSNET_API_KEYS", None)
    store = str(tmp_path / "s")
    done = subprocess.run(
        [sys.executable, "-c", _LOADED, "gateway", "--store", store, *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert message in done.stderr
    assert done.stdout == "\n"  # none of them was imported


@pytest.mark.parametrize(
    ("upstream", "message"),
    [
        ("a=http://user:hunter2-pw@api.example", "user info"),
        ("a=http://:hunter2-pw@api.example/v1", "user info"),
        ("a=http://api.example/v1?key=hunter2-pw", "without query"),
        ("bad name=http://user:hunter2-pw@api.example", "NAME=URL"),
    ],
)
def test_a_refused_upstream_is_quoted_without_its_secrets(
    upstream: str, message: str, tmp_path: Path
) -> None:
    """An upstream URL refused for its user info or query: exit 2, never the secret."""
    result = CliRunner().invoke(
        cli, ["gateway", "--store", str(tmp_path / "s"), "--upstream", upstream]
    )
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert "api.example" in result.output or "bad name" in result.output
    assert "hunter2" not in result.output


def test_a_port_in_use_is_one_line_and_exit_2(tmp_path: Path) -> None:
    """Another process on the port: one line naming it, exit 2, no server log."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "intentusnet.cli",
                "gateway",
                "--store",
                str(tmp_path / "s"),
                "--upstream",
                "a=http://127.0.0.1:9",
                "--listen",
                f"127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"Error: cannot listen on 127.0.0.1:{port}: the port is in use; "
        "choose another with --listen HOST:PORT"
    ]
