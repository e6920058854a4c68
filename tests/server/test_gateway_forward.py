"""``server/gateway/forward``: a request handed to its recording transport as sent."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from intentusnet.server.gateway import GatewaySettings, Upstream, create_gateway
from intentusnet.server.gateway.forward import URLS_KEPT
from intentusnet.server.gateway.metrics import GatewayMetrics
from intentusnet.store import FileExecutionStore


class FakeUpstream:
    """An upstream answering every POST with one answer; it notes what reached it."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.seen: list[dict[str, str]] = []
        self.paths: list[str] = []
        self.connections = 0
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet

            def setup(self) -> None:
                owner.connections += 1
                super().setup()

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                owner.seen.append({k.lower(): v for k, v in self.headers.items()})
                owner.paths.append(self.path)
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    @classmethod
    @contextlib.contextmanager
    def serving(
        cls, status: int, headers: dict[str, str], body: bytes
    ) -> Iterator[FakeUpstream]:
        """One on an ephemeral loopback port, stopped after."""
        made = cls(status, headers, body)
        thread = threading.Thread(target=made.server.serve_forever, daemon=True)
        thread.start()
        try:
            yield made
        finally:
            made.server.shutdown()
            made.server.server_close()


@pytest.fixture
def upstream() -> Iterator[FakeUpstream]:
    """An upstream answering with a redirect that sets a cookie."""
    redirect = {
        "location": "/elsewhere",
        "set-cookie": "session=upstream-secret; Path=/",
    }
    with FakeUpstream.serving(302, redirect, b'{"moved": true}') as made:
        yield made


def test_a_redirect_is_passed_on_and_no_upstream_cookie_is_kept(
    upstream: FakeUpstream, tmp_path: Path
) -> None:
    """The gateway follows no redirect and sends no cookie an upstream set."""
    store = FileExecutionStore(tmp_path / "records")
    settings = GatewaySettings(
        {"up": Upstream.parse(f"up={upstream.url}")}, tenant_key=b"k" * 32
    )
    app = create_gateway(store, settings)

    async def two_calls() -> list[httpx.Response]:
        answers = []
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://gateway"
            ) as client:
                for n in range(2):
                    answers.append(
                        await client.post(
                            "/up/v1/x",
                            json={"n": n},
                            headers={"x-intentusnet-cache": "bypass"},
                        )
                    )
        return answers

    try:
        answers = asyncio.run(two_calls())
    finally:
        store.close()
    assert [a.status_code for a in answers] == [302, 302]
    assert answers[0].headers["location"] == "/elsewhere"
    assert answers[0].headers["x-intentusnet-cache"] == "bypass"
    assert len(upstream.seen) == 2  # each forwarded once, the redirect not followed
    assert "cookie" not in upstream.seen[1]


@pytest.fixture
def counting() -> Iterator[FakeUpstream]:
    """An upstream answering with JSON, counting its connections."""
    with FakeUpstream.serving(200, {}, b'{"ok": true}') as made:
        yield made


def _misses(
    upstream: FakeUpstream, tmp_path: Path, targets: list[str]
) -> list[httpx.Response]:
    """One new request per target through a gateway over ``upstream``."""
    store = FileExecutionStore(tmp_path / "records")
    settings = GatewaySettings(
        {"up": Upstream.parse(f"up={upstream.url}")}, tenant_key=b"k" * 32
    )
    app = create_gateway(store, settings)

    async def calls() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(
                transport=transport, base_url="http://gateway"
            ) as client:
                return [
                    await client.post("/up" + target, json={"n": n})
                    for n, target in enumerate(targets)
                ]

    try:
        return asyncio.run(calls())
    finally:
        store.close()


def test_misses_reuse_one_upstream_connection(
    counting: FakeUpstream, tmp_path: Path
) -> None:
    """Misses one after another go over one kept-alive upstream connection."""
    answers = _misses(counting, tmp_path, ["/v1/x"] * 5)
    assert [a.headers["x-intentusnet-cache"] for a in answers] == ["miss"] * 5
    assert len(counting.paths) == 5
    assert counting.connections == 1


@pytest.mark.slow  # 261 misses through the gateway: about 13 s
def test_each_request_reaches_its_own_url_beyond_the_urls_kept(
    counting: FakeUpstream, tmp_path: Path
) -> None:
    """URLs parsed once are kept per URL: each request keeps its path and query."""
    targets = [f"/v1/x{n % 3}?q={n}" for n in range(URLS_KEPT + 5)]
    targets += ["/v1/x0?q=0", "/v1/y"]
    answers = _misses(counting, tmp_path, targets)
    assert all(a.status_code == 200 for a in answers)
    assert counting.paths == targets


def test_the_requests_counter_keeps_each_label_set_apart() -> None:
    """Counters looked up once per label set still count each set on its own."""
    metrics = GatewayMetrics(["a", "b"])
    for upstream, cache, status in [
        ("a", "hit", 200),
        ("a", "hit", 201),
        ("a", "miss", 200),
        ("a", "hit", 404),
        ("b", "hit", 200),
        ("", "none", 404),
    ]:
        metrics.started()
        metrics.answered(upstream, cache, status, 0.001, 0.002)
    text = metrics.render().decode()
    count = "intentusnet_gateway_requests_total"
    assert f'{count}{{cache="hit",status="2xx",upstream="a"}} 2.0' in text
    assert f'{count}{{cache="miss",status="2xx",upstream="a"}} 1.0' in text
    assert f'{count}{{cache="hit",status="4xx",upstream="a"}} 1.0' in text
    assert f'{count}{{cache="hit",status="2xx",upstream="b"}} 1.0' in text
    assert f'{count}{{cache="none",status="4xx",upstream=""}} 1.0' in text
    head = "intentusnet_gateway_response_head_seconds_count"
    assert f'{head}{{cache="hit"}} 4.0' in text
    assert f'{head}{{cache="none"}} 1.0' in text
    assert "intentusnet_gateway_in_flight 0.0" in text
