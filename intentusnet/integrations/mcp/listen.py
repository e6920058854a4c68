"""The proxy's own streamable-HTTP endpoint (``--listen``): clients over HTTP.

One proxy run serves any number of MCP sessions at ``http://HOST:PORT/mcp``
(loopback by default), each one an endpoint of its own (:class:`ListenSession`)
that the caller runs as one session: one record, one upstream.

- A POSTed ``initialize`` without an ``Mcp-Session-Id`` opens a session; its
  answer carries the new id, which the client sends with everything after.
- A POST with a known id goes to that session; an unknown (or ended) one is
  answered 404, as MCP asks, so that the client starts again.
- A POST with neither (a client of the stateless 2026 revision, which has no
  ``initialize``) goes to the one *stateless* session, opened on demand.
- ``DELETE`` with a session's id ends it; so does ``idle_seconds`` with no
  request open and no message from its client, and SIGINT or SIGTERM ends them
  all.

With a gate (API keys: ``intentusnet mcp proxy --api-keys-file``, the keys of
``serve``), every request needs ``Authorization: Bearer KEY`` (401 without a
valid one). A session opened with a read-only key is answered from the records
only; a read-only key may not use a session a full key opened (403).

A POSTed request is answered with an event stream: the messages related to it
(its progress notifications, by progress token) and then its answer; a POSTed
notification or response is accepted (202). ``GET`` is not offered (405), so a
message from the server that belongs to no open request goes on the newest
open request's stream of its session, or is dropped when none is open. Needs
``uvicorn`` and ``starlette`` (the ``server`` extra; the ``mcp`` extra brings
them too).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from enum import Enum
from typing import Final, TypeAlias

import orjson

from ..._util.deadlines import Deadlines
from ..._util.jsonvalue import JSONValue
from .checks import HEADER_MISMATCH, allowed_hosts, header_mismatch, rebinding
from .jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    UPSTREAM_GONE,
    error,
    is_request,
    parse,
    progress_token,
)
from .recorded import ANONYMOUS

__all__ = ["Allowed", "Gate", "ListenSession", "Listener"]

PATH: Final = "/mcp"
#: How long a session may go without a message from its client (``--idle``).
IDLE_SECONDS: Final = 600.0
#: How long the sessions still running get to finish once the proxy is told to
#: stop (their calls in flight have their own, shorter, drain).
STOP_SECONDS: Final = 10.0
_HEADER: Final = "mcp-session-id"


class Allowed(Enum):
    """What a caller's key lets it do with sessions."""

    #: sessions answered from the records only: no upstream, nothing recorded
    READ = "read"
    #: sessions as the proxy's mode says
    ALL = "all"


#: ``gate(authorization) -> allowed``: what a request's ``Authorization``
#: header lets it do, ``None`` for nothing (no key, or an unknown one).
Gate: TypeAlias = Callable[[str | None], Allowed | None]


def _key(value: JSONValue) -> bytes:
    return orjson.dumps(value)


class ListenSession:
    """One client's MCP session on the listener: the client side of one session.

    Attributes:
        session_id: its ``Mcp-Session-Id``; ``None`` for the stateless session.
        read_only: opened with a read-only key: answer it from the records only.
    """

    def __init__(self, session_id: str | None, read_only: bool = False) -> None:
        self.session_id = session_id
        self.read_only = read_only
        self.ended = False
        self.last_seen = time.monotonic()
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._streams: dict[bytes, asyncio.Queue[bytes | None]] = {}
        self._tokens: dict[bytes, bytes] = {}
        #: the client of each open request (its credential's digest)
        self._clients: dict[bytes, str] = {}
        #: the ``MCP-Protocol-Version`` header each open request came with
        self._versions: dict[bytes, str] = {}

    async def receive(self) -> bytes | None:
        """The client's next message; ``None`` once the session is over."""
        return await self._inbox.get()

    def end(self) -> None:
        """End the session (DELETE, idle, a signal): calls in flight still finish."""
        if not self.ended:
            self.ended = True
            self._inbox.put_nowait(None)

    async def send(self, message: bytes) -> None:
        """Put a message on the stream of the request it belongs to."""
        try:
            parsed = parse(message)
        except ValueError:
            return
        stream = None
        if isinstance(parsed, dict):
            if "method" not in parsed and "id" in parsed:  # an answer
                stream = self._streams.get(_key(parsed.get("id")))
                if stream is not None:
                    stream.put_nowait(message)
                    stream.put_nowait(None)  # its stream ends with it
                    return
            token = progress_token(parsed)
            owner = self._tokens.get(_key(token)) if token is not None else None
            stream = self._streams.get(owner) if owner is not None else None
        if stream is None and self._streams:
            stream = self._streams[next(reversed(self._streams))]
        if stream is not None:
            stream.put_nowait(message)

    def idle(self, now: float) -> float:
        """How long the session has been idle: nothing asked and nothing open."""
        return 0.0 if self._streams else now - self.last_seen

    def abort(self, why: str) -> None:
        """Answer every open request with ``why`` (the session could not run)."""
        for key, stream in list(self._streams.items()):
            request_id = orjson.loads(key)
            stream.put_nowait(orjson.dumps(error(request_id, UPSTREAM_GONE, why)))
            stream.put_nowait(None)
        self.end()

    def accept(self, body: bytes) -> None:
        """A notification or a response from the client."""
        self.last_seen = time.monotonic()
        self._inbox.put_nowait(body)

    def client_of(self, request_id: JSONValue) -> str:
        """The client of the open request ``request_id`` (see ``request``)."""
        return self._clients.get(_key(request_id), ANONYMOUS)

    def version_of(self, request_id: JSONValue) -> str | None:
        """The ``MCP-Protocol-Version`` header the open request came with, if any."""
        return self._versions.get(_key(request_id))

    def request(
        self,
        body: bytes,
        message: dict[str, JSONValue],
        client: str = ANONYMOUS,
        version: str | None = None,
    ) -> AsyncIterator[bytes]:
        """A request from ``client``: the event stream that answers it.

        ``client``: ``sha256:HEX`` of the credential it came with, else
        ``anonymous`` (who may get a ``cacheScope: "private"`` answer).
        ``version``: its ``MCP-Protocol-Version`` header, passed on upstream.
        """
        self.last_seen = time.monotonic()
        key = _key(message.get("id"))
        stream: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._streams[key] = stream
        self._clients[key] = client
        if version is not None:
            self._versions[key] = version
        token = progress_token(message)
        if token is not None:
            self._tokens[_key(token)] = key
        self._inbox.put_nowait(body)

        async def events() -> AsyncIterator[bytes]:
            try:
                while (item := await stream.get()) is not None:
                    yield b"event: message\ndata: " + item + b"\n\n"
            finally:
                self.last_seen = time.monotonic()  # idle from its last answer
                self._streams.pop(key, None)
                self._clients.pop(key, None)
                self._versions.pop(key, None)
                if token is not None:
                    self._tokens.pop(_key(token), None)

        return events()


#: Runs one session to its end (records or replays it).
SessionRunner = Callable[[ListenSession], Awaitable[None]]


class Listener:
    """The MCP clients' side, as a streamable-HTTP server on ``host:port``.

    Args:
        host: the address to listen on (without a gate, keep it loopback).
        port: the port; 0 picks a free one (see ``port`` once started).
        run: runs each new session to its end, on a task of its own.
        idle_seconds: a session whose client sends nothing for this long ends.
        gate: what each request's key allows; ``None``: no key is asked for.
        listening: a socket already bound to ``host:port`` to serve on (the
            command binds it first, to say in one line why it cannot).
        allow_hosts: ``Host`` values accepted besides the loopback names and
            ``host`` (:mod:`.checks`: DNS rebinding).
        deadlines: the time limits and connection cap of the HTTP server
            (by default, those ``mcp proxy --listen`` documents).
    """

    def __init__(
        self,
        host: str,
        port: int,
        run: SessionRunner,
        *,
        idle_seconds: float = IDLE_SECONDS,
        gate: Gate | None = None,
        listening: socket.socket | None = None,
        allow_hosts: Iterable[str] = (),
        deadlines: Deadlines | None = None,
    ) -> None:
        self.host = host
        self.port = port
        self.idle_seconds = idle_seconds
        self.gate = gate
        self._listening = listening
        self._allow_hosts = tuple(allow_hosts)
        self._allowed: frozenset[str] = frozenset()
        self._deadlines = deadlines or Deadlines()
        self._run = run
        self._sessions: dict[str, ListenSession] = {}
        self._stateless: ListenSession | None = None
        self._runners: set[asyncio.Task[None]] = set()
        self._stopped = asyncio.Event()
        self._server: object = None
        self._task: asyncio.Task[None] | None = None

    async def open(self) -> None:
        """Start listening (returns once the port is bound)."""
        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import Route

        app = Starlette(
            routes=[Route(PATH, self._endpoint, methods=["GET", "POST", "DELETE"])]
        )
        config = uvicorn.Config(
            self._deadlines.guard(app),
            host=self.host,
            port=self.port,
            log_level="warning",
            lifespan="off",
            **self._deadlines.uvicorn_settings(),
        )
        server = uvicorn.Server(config)
        self._server = server
        sockets = None if self._listening is None else [self._listening]
        self._task = asyncio.create_task(server.serve(sockets=sockets))
        while not server.started:
            if self._task.done():
                self._task.result()  # the port could not be bound: raise why
            await asyncio.sleep(0.01)
        bound = [s for srv in server.servers for s in srv.sockets]
        self.port = int(bound[0].getsockname()[1])
        self._allowed = allowed_hosts(self.host, self.port, self._allow_hosts)

    @property
    def url(self) -> str:
        """Where clients connect."""
        return f"http://{self.host}:{self.port}{PATH}"

    def stop(self) -> None:
        """End every session and stop (SIGINT, SIGTERM)."""
        self._stopped.set()

    async def serve(self) -> None:
        """Serve until :meth:`stop`; then end the sessions and wait for them."""
        while not self._stopped.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopped.wait(), 1.0)
            now = time.monotonic()
            for session in self._open_sessions():
                if session.idle(now) > self.idle_seconds:
                    session.end()
        for session in self._open_sessions():
            session.end()
        if self._runners:
            await asyncio.wait(set(self._runners), timeout=STOP_SECONDS)

    async def close(self) -> None:
        """Stop listening; sessions still running are cancelled."""
        server = self._server
        if server is not None:
            server.should_exit = True  # type: ignore[attr-defined]
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=5.0)
            self._task.cancel()
        running = list(self._runners)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)

    def _open_sessions(self) -> list[ListenSession]:
        found = [s for s in self._sessions.values() if not s.ended]
        if self._stateless is not None and not self._stateless.ended:
            found.append(self._stateless)
        return found

    def _start(self, session_id: str | None, read_only: bool) -> ListenSession:
        session = ListenSession(session_id, read_only)
        if session_id is None:
            self._stateless = session
        else:
            self._sessions[session_id] = session
        runner = asyncio.create_task(self._running(session))
        self._runners.add(runner)
        runner.add_done_callback(self._runners.discard)
        return session

    async def _running(self, session: ListenSession) -> None:
        try:
            await self._run(session)
        except Exception as exc:  # its client is told; the other sessions go on
            session.abort(f"intentusnet mcp proxy: the session failed: {exc}")
        finally:
            session.end()

    # -- HTTP --------------------------------------------------------------------

    async def _endpoint(self, request: object) -> object:
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse

        assert isinstance(request, Request)
        refused = rebinding(request.headers, self._allowed)
        if refused is not None:  # DNS rebinding: a web page's request
            why = "intentusnet mcp proxy: Host or Origin not allowed (--allow-host)"
            return JSONResponse(error(None, INVALID_REQUEST, why), status_code=refused)
        allowed = Allowed.ALL
        if self.gate is not None:
            found = self.gate(request.headers.get("authorization"))
            if found is None:
                problem = error(
                    None,
                    INVALID_REQUEST,
                    "this proxy needs an API key: send 'Authorization: Bearer <key>'",
                )
                return JSONResponse(
                    problem, status_code=401, headers={"www-authenticate": "Bearer"}
                )
            allowed = found
        given = request.headers.get(_HEADER)
        if request.method == "GET":
            return Response(status_code=405, headers={"allow": "POST, DELETE"})
        known = self._sessions.get(given) if given else None
        if given and (known is None or known.ended):
            problem = error(None, INVALID_REQUEST, f"unknown or ended session {given}")
            return JSONResponse(problem, status_code=404)
        read_only = allowed is Allowed.READ
        if read_only and known is not None and not known.read_only:
            return _read_only_refused()
        if request.method == "DELETE":
            if known is None:
                return Response(status_code=400)
            known.end()
            return Response(status_code=200)
        body = await request.body()
        try:
            message = parse(body)
        except ValueError as exc:
            problem = error(None, PARSE_ERROR, f"Parse error: {exc}")
            return JSONResponse(problem, status_code=400)
        if isinstance(message, list) or not isinstance(message, dict):
            problem = error(None, INVALID_REQUEST, "Invalid Request: one message")
            return JSONResponse(problem, status_code=400)
        mismatch = header_mismatch(request.headers, message)
        if mismatch is not None:
            problem = error(message.get("id"), HEADER_MISMATCH, mismatch)
            return JSONResponse(problem, status_code=400)
        if self._stopped.is_set():
            problem = error(message.get("id"), UPSTREAM_GONE, "the proxy is stopping")
            return JSONResponse(problem, status_code=503)
        session = known
        opens = message.get("method") == "initialize"
        stateless = self._stateless
        if session is None and not opens and stateless is not None:
            session = None if stateless.ended else stateless
        if session is not None and read_only and not session.read_only:
            return _read_only_refused()
        if session is None:
            session = self._start(secrets.token_hex(16) if opens else None, read_only)
        headers = {} if session.session_id is None else {_HEADER: session.session_id}
        if not is_request(message):
            session.accept(body)
            return Response(status_code=202, headers=headers)
        credential = request.headers.get("authorization")
        client = ANONYMOUS
        if credential:  # recorded as its digest, never as itself
            client = "sha256:" + hashlib.sha256(credential.encode()).hexdigest()
        return StreamingResponse(
            session.request(
                body, message, client, request.headers.get("mcp-protocol-version")
            ),
            media_type="text/event-stream",
            headers=headers,
        )


def _read_only_refused() -> object:
    """403: a read-only key asked to use a session a full key opened."""
    from starlette.responses import JSONResponse

    problem = error(
        None,
        INVALID_REQUEST,
        "this API key is read-only: it may not use a session a full key opened",
    )
    return JSONResponse(problem, status_code=403)
