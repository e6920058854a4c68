"""Slow clients for the listeners' deadline tests and bench_slow_sockets.py.

:class:`SlowClients` opens ``count`` connections to 127.0.0.1:PORT from a thread
of its own; each sends ``head`` (a request's start: its header block, complete
or not), then one byte every ``every`` seconds, never finishing, until the
server closes it or the clients are stopped. Loops are bounded by ``seconds``.
"""

from __future__ import annotations

import selectors
import socket
import threading
import time


def body_head(path: str, length: int = 1_000_000) -> bytes:
    """A POST's complete header block announcing a body of ``length`` bytes."""
    return (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


def header_head(path: str) -> bytes:
    """The start of a GET's header block, which the trickled bytes never end."""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ".encode()


class SlowClients:
    """``count`` connections trickling a request, one byte each per ``every`` s.

    Attributes:
        closed_after: for each connection, seconds from the end of its head to
            the server closing it; ``None`` while (or if) it stayed open.
        answers: for each connection, the bytes the server sent it.
    """

    def __init__(
        self, port: int, count: int, head: bytes, *, every: float, seconds: float
    ) -> None:
        self.port = port
        self.count = count
        self.head = head
        self.every = every
        self.seconds = seconds
        self.closed_after: list[float | None] = [None] * count
        self.answers = [bytearray() for _ in range(count)]
        self.opened = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slow", daemon=True)

    def __enter__(self) -> SlowClients:
        self._thread.start()
        if not self.opened.wait(timeout=60):
            raise RuntimeError("the slow connections did not open")
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def open_now(self) -> int:
        """How many connections the server has not closed yet."""
        return sum(1 for closed in self.closed_after if closed is None)

    def wait_closed(self, seconds: float) -> bool:
        """Wait up to ``seconds`` until the server closed every connection."""
        deadline = time.monotonic() + seconds
        while self.open_now() and time.monotonic() < deadline:
            time.sleep(0.05)
        return self.open_now() == 0

    def _run(self) -> None:
        chooser = selectors.DefaultSelector()
        sent: dict[int, float] = {}
        sockets: dict[int, socket.socket] = {}
        for n in range(self.count):
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=10)
            sock.sendall(self.head)
            sent[n] = time.monotonic()
            sock.setblocking(False)
            sockets[n] = sock
            chooser.register(sock, selectors.EVENT_READ, n)
        self.opened.set()
        end = time.monotonic() + self.seconds
        trickle = time.monotonic() + self.every
        try:
            while sockets and not self._stop.is_set() and time.monotonic() < end:
                for key, _ in chooser.select(timeout=0.02):
                    n = key.data
                    try:
                        data = sockets[n].recv(65536)
                    except OSError:
                        data = b""
                    if data:
                        self.answers[n] += data
                        continue
                    self._closed(n, sent[n], chooser, sockets)
                if time.monotonic() >= trickle:
                    trickle += self.every
                    for n in list(sockets):
                        try:
                            sockets[n].send(b"x")
                        except OSError:
                            self._closed(n, sent[n], chooser, sockets)
        finally:
            for sock in sockets.values():
                sock.close()
            chooser.close()

    def _closed(
        self,
        n: int,
        since: float,
        chooser: selectors.BaseSelector,
        sockets: dict[int, socket.socket],
    ) -> None:
        self.closed_after[n] = time.monotonic() - since
        sock = sockets.pop(n)
        chooser.unregister(sock)
        sock.close()
