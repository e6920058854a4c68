"""API keys: parsing, constant-time lookup, refusals, read-only keys, loopback."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import httpx
import pytest
from livekit import READ_KEY, ROUTE_KEY, LiveServer, echo_router, keyed_app

from intentusnet import IntentRouter
from intentusnet.server import Access, KeyRing, create_app
from intentusnet.server.auth import check_bind, is_loopback

ECHO = {"intent": {"name": "echo"}, "payload": {"text": "hi"}}


def client(live: LiveServer, key: str | None) -> httpx.Client:
    """A client of the live server sending ``key`` (if any) as a bearer token."""
    headers = {} if key is None else {"Authorization": f"Bearer {key}"}
    return httpx.Client(base_url=live.url, headers=headers, trust_env=False)


def test_parse_keys_and_read_only_prefix() -> None:
    """Entries split on commas, whitespace and lines; # comments; ro: is read-only."""
    ring = KeyRing.parse(
        "# keys\nfirst-key-0123456789, ro:second-key-0123456789\n"
        "third-key-0123456789  # the last\n"
    )
    assert len(ring) == 3
    assert ring.access_of("first-key-0123456789") is Access.ROUTE
    assert ring.access_of("second-key-0123456789") is Access.READ
    assert ring.access_of("ro:second-key-0123456789") is None
    assert ring.access_of("unknown-key-0123456789") is None
    assert not KeyRing.parse("  # none\n")


def test_short_keys_are_refused() -> None:
    """A key under 16 characters is a configuration error."""
    with pytest.raises(ValueError, match="at least 16"):
        KeyRing.parse("short")


def test_keys_from_env_and_file(tmp_path: Path) -> None:
    """Keys come from INTENTUSNET_API_KEYS and the key file together."""
    file = tmp_path / "keys"
    file.write_text("ro:file-key-0123456789abcdef\n")
    os.chmod(file, 0o600)
    env = {"INTENTUSNET_API_KEYS": "env-key-0123456789abcdef"}
    ring = KeyRing.from_env(env, keys_file=str(file))
    assert ring.access_of("env-key-0123456789abcdef") is Access.ROUTE
    assert ring.access_of("file-key-0123456789abcdef") is Access.READ
    env["INTENTUSNET_API_KEYS_FILE"] = str(file)
    assert len(KeyRing.from_env(env)) == 2


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.3.2.1", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("0.0.0.0", False),
        ("::", False),
        ("example.com", False),
    ],
)
def test_is_loopback(host: str, loopback: bool) -> None:
    """Only 127.0.0.0/8, ::1 and localhost count as loopback."""
    assert is_loopback(host) is loopback


def test_no_key_means_loopback_only() -> None:
    """Without keys, binding anything but loopback is refused; with keys it is not."""
    check_bind("127.0.0.1", KeyRing())
    with pytest.raises(ValueError, match="without an API key"):
        check_bind("0.0.0.0", KeyRing())
    check_bind("0.0.0.0", KeyRing.parse(ROUTE_KEY))


def test_no_key_refuses_non_loopback_requests() -> None:
    """An app without keys refuses a request that arrived on another address."""

    async def ask() -> httpx.Response:
        # In-process ASGI: no connection is made; only the scope's server differs.
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(
            transport=transport, base_url="http://service.example"
        ) as http:
            return await http.get("/v1/executions")

    with IntentRouter() as router:
        app = create_app(router)
        answer = asyncio.run(ask())
    assert answer.status_code == 403
    assert answer.json()["code"] == "forbidden"


def test_missing_and_unknown_keys(live: LiveServer) -> None:
    """No key or an unknown key is 401 with WWW-Authenticate: Bearer."""
    for key in (None, "wrong-key-0123456789abcdef"):
        with client(live, key) as http:
            for answer in (
                http.post("/v1/intents", json=ECHO),
                http.get("/v1/executions"),
                http.get("/metrics"),
            ):
                assert answer.status_code == 401
                assert answer.json()["code"] == "unauthorized"
                assert answer.headers["www-authenticate"].startswith("Bearer")
    with httpx.Client(
        base_url=live.url, headers={"Authorization": "Basic abc"}, trust_env=False
    ) as http:
        assert http.get("/v1/executions").status_code == 401


def test_every_secured_operation_checks_the_key(tmp_path: Path) -> None:
    """Each operation the OpenAPI document secures refuses no key and a wrong one."""

    async def ask(method: str, path: str, key: str | None) -> httpx.Response:
        headers = {} if key is None else {"Authorization": f"Bearer {key}"}
        transport = httpx.ASGITransport(app=app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(
            transport=transport, base_url="http://127.0.0.1", headers=headers
        ) as http:
            return await http.request(method, path)

    with echo_router(tmp_path) as router:
        app = keyed_app(router)
        secured = [
            (method.upper(), path.replace("{execution_id}", "x").replace("{key}", "k"))
            for path, operations in app.openapi()["paths"].items()  # type: ignore[attr-defined]
            for method, operation in operations.items()
            if operation.get("security")
        ]
        assert len(secured) == 13  # with resume, resolution, cancel, fork and signals
        for method, path in secured:
            for key in (None, "wrong-key-0123456789abcdef"):
                answer = asyncio.run(ask(method, path, key))
                assert answer.status_code == 401, (method, path, key)
                assert answer.json()["code"] == "unauthorized"
        answer = asyncio.run(ask("GET", "/healthz", None))
        assert answer.status_code == 200


def test_read_only_key(live: LiveServer) -> None:
    """A read-only key lists, shows, verifies and replays, but may not route."""
    with client(live, ROUTE_KEY) as writer:
        eid = writer.post("/v1/intents", json=ECHO).json()["metadata"]["executionId"]
    with client(live, READ_KEY) as reader:
        refused = reader.post("/v1/intents", json=ECHO)
        assert refused.status_code == 403
        assert refused.json()["code"] == "forbidden"
        assert reader.get("/v1/executions").json()["items"][0]["executionId"] == eid
        assert reader.get(f"/v1/executions/{eid}").status_code == 200
        assert reader.get(f"/v1/executions/{eid}/verify").json()["valid"] is True
        replayed = reader.post(f"/v1/executions/{eid}/replay")
        assert replayed.json()["payload"] == {"echo": {"text": "hi"}}
        assert reader.get("/metrics").status_code == 200
