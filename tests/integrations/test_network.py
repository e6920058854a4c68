"""block_network: every connection refused inside the block, but to allowed hosts."""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from intentusnet.errors import NetworkBlocked
from intentusnet.integrations.network import block_network


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("content-length", "2")
        self.end_headers()
        self.wfile.write(b"hi")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Hello)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


def test_a_connection_inside_the_block_is_refused_naming_the_address(
    server: str,
) -> None:
    """httpx and a raw socket are refused inside, naming the address; served after."""
    port = server.rsplit(":", 1)[1].strip("/")
    with block_network():
        with pytest.raises(httpx.ConnectError, match=f"127.0.0.1:{port} is blocked"):
            httpx.get(server)
        with socket.socket() as sock, pytest.raises(NetworkBlocked) as caught:
            sock.connect(("127.0.0.1", int(port)))
        assert caught.value.address == f"127.0.0.1:{port}"
        assert caught.value.exit_code == 7
    assert httpx.get(server).text == "hi"  # and allowed again after


def test_async_clients_are_blocked_too(server: str) -> None:
    """An async client is refused inside the block (NetworkBlocked as a cause)."""

    async def fetch() -> str:
        async with httpx.AsyncClient() as client:
            return (await client.get(server)).text

    with block_network(), pytest.raises(httpx.ConnectError) as caught:
        asyncio.run(fetch())
    # anyio words its own error; the refusal is in its chain of causes
    chain: list[BaseException] = []
    cause: BaseException | None = caught.value
    while cause is not None:
        chain.append(cause)
        cause = cause.__cause__ or cause.__context__
    assert any(isinstance(c, NetworkBlocked) for c in chain)
    assert asyncio.run(fetch()) == "hi"


def test_allowed_hosts_stay_reachable_and_localhost_means_loopback(
    server: str,
) -> None:
    """An allowed host stays reachable, localhost meaning 127.0.0.1; others do not."""
    with block_network(allowed_hosts=["localhost"]):
        assert httpx.get(server).text == "hi"
    with block_network(allowed_hosts=["127.0.0.1"]):
        assert httpx.get(server).text == "hi"
    with (
        block_network(allowed_hosts=["example.org"]),
        pytest.raises(httpx.ConnectError),
    ):
        httpx.get(server)


def test_blocks_nest_and_a_connection_must_pass_every_one(server: str) -> None:
    """Nested blocks refuse a host the inner one bans, though the outer allows it."""
    with block_network(allowed_hosts=["127.0.0.1"]):
        with block_network(), pytest.raises(httpx.ConnectError):
            httpx.get(server)
        assert httpx.get(server).text == "hi"


def test_other_threads_are_blocked_and_unix_sockets_are_not(
    server: str, tmp_path: object
) -> None:
    """A connection from another thread is refused; a Unix socket pair still talks."""
    errors: list[BaseException] = []

    def fetch() -> None:
        try:
            httpx.get(server)
        except BaseException as exc:
            errors.append(exc)

    left, right = socket.socketpair()  # AF_UNIX: never leaves the machine
    with block_network():
        thread = threading.Thread(target=fetch)
        thread.start()
        thread.join(10)
        left.sendall(b"x")
        assert right.recv(1) == b"x"
    left.close()
    right.close()
    assert len(errors) == 1
    assert "is blocked" in str(errors[0])


def test_the_socket_class_is_left_as_it_was() -> None:
    """Leaving the block leaves ``socket.socket``'s attributes as they were before."""
    before = dict(vars(socket.socket))
    with block_network():
        assert "connect" in vars(socket.socket)
    assert dict(vars(socket.socket)) == before
