"""``server/gateway/forward``: a request handed to its recording transport as sent."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import pytest

from intentusnet.server.gateway import GatewaySettings, Upstream, create_gateway
from intentusnet.store import FileExecutionStore


class Upstream302:
    """An upstream answering every POST with a redirect that sets a cookie."""

    def __init__(self) -> None:
        self.seen: list[dict[str, str]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass  # quiet

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                owner.seen.append({k.lower(): v for k, v in self.headers.items()})
                body = b'{"moved": true}'
                self.send_response(302)
                self.send_header("location", "/elsewhere")
                self.send_header("set-cookie", "session=upstream-secret; Path=/")
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)


@pytest.fixture
def upstream() -> Iterator[Upstream302]:
    """The redirecting upstream, on an ephemeral loopback port."""
    made = Upstream302()
    made.thread.start()
    try:
        yield made
    finally:
        made.server.shutdown()
        made.server.server_close()


def test_a_redirect_is_passed_on_and_no_upstream_cookie_is_kept(
    upstream: Upstream302, tmp_path: Path
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
