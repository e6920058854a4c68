"""The proxy's own streamable-HTTP endpoint (``--listen``): clients over HTTP.

One proxy run serves any number of MCP sessions at ``http://HOST:PORT/mcp``
(loopback by default), each one an endpoint of its own (:class:`ListenSession`)
that the caller runs as one session: one record, one upstream.

- A POSTed ``initialize`` without an ``Mcp-Session-Id`` opens a session; its
  answer carries the new id, which the client sends with everything after.
- A POST with a known id goes to that session; an unknown (or ended) one is
  answered 404, as MCP asks, so that the client starts again.
- A POST with neither (a client of the stateless 2026 revision, which has no
  ``initialize``) goes to the *stateless* session of the revision its
  ``_meta`` names (or of none), opened on demand: each revision's requests
  have their own upstream (a process of their own with a stdio upstream), so
  a request of one era never sets the server's era for another's.
- ``DELETE`` with a session's id ends it; so does ``idle_seconds`` with no
  request open and no message from its client, and SIGINT or SIGTERM ends them
  all.

With a gate (API keys: ``intentusnet mcp proxy --api-keys-file``, the keys of
``serve``), every request needs ``Authorization: Bearer KEY`` (401 without a
valid one). A session opened with a read-only key is answered from the records
only; a read-only key may not use a session a full key opened (403).

A POSTed request is answered with an event stream: the messages related to it
(its progress notifications, by progress token) and then its answer; a POSTed
notification or response is accepted (202). With an HTTP upstream, a request
the upstream refuses with an HTTP error status (a 4xx or 5xx) is answered with
that status and the JSON-RPC error as a JSON body instead.

The streams of a session (one with an ``Mcp-Session-Id``) are resumable, as
the 2025-11-25 revision describes: each event has an id (``STREAM-N``), the
first (no data) says ``retry``, and a client whose connection broke sends
``GET`` with its ``Mcp-Session-Id`` and ``Last-Event-ID``: it gets the events
of that stream after that id, then the rest as they come. Where an HTTP
upstream closed the request's stream before its answer (a server polling its
clients), or where the record says it did, the client's stream is closed
there too, with an event of no data giving its id and the server's ``retry``:
the client resumes it the same way. What is held is
bounded (``HELD_EVENTS``, ``HELD_STREAMS``). The stateless revision has no
resumption: its streams carry no ids. ``GET`` without ``Last-Event-ID`` is not
offered (405), so a message from the server that belongs to no open request
goes on the newest open request's stream of its session, or is dropped when
none is open. Needs ``uvicorn`` and ``starlette`` (the ``server`` extra; the
``mcp`` extra brings them too).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import secrets
import socket
import time
from collections import OrderedDict, deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from enum import Enum
from typing import Final, TypeAlias

import orjson

from ..._util.deadlines import Deadlines
from ..._util.jsonvalue import JSONValue
from .checks import (
    HEADER_MISMATCH,
    PARAM_PREFIX,
    allowed_hosts,
    binding_status,
    header_mismatch,
    not_stateless,
    param_mismatch,
    rebinding,
)
from .jsonrpc import (
    INVALID_REQUEST,
    PARSE_ERROR,
    UPSTREAM_GONE,
    error,
    id_key,
    is_request,
    parse,
    progress_token,
    request_version,
    subscription_of,
)
from .recorded import ANONYMOUS

__all__ = ["Allowed", "Gate", "ListenSession", "Listener", "Stream"]

PATH: Final = "/mcp"
#: How long a session may go without a message from its client (``--idle``).
IDLE_SECONDS: Final = 600.0
#: How long the sessions still running get to finish once the proxy is told to
#: stop (their calls in flight have their own, shorter, drain).
STOP_SECONDS: Final = 10.0
_HEADER: Final = "mcp-session-id"
#: The events held per stream for a client that reconnects: the newest ones
#: (a stream's answer is its last event, so it is always among them).
HELD_EVENTS: Final = 1000
#: The answered streams a session holds (its newest ones), besides its open ones.
HELD_STREAMS: Final = 32
#: The ``retry`` (milliseconds) each resumable stream starts with.
RETRY_MS: Final = 1000


class Allowed(Enum):
    """What a caller's key lets it do with sessions."""

    #: sessions answered from the records only: no upstream, nothing recorded
    READ = "read"
    #: sessions as the proxy's mode says
    ALL = "all"


#: ``gate(authorization) -> allowed``: what a request's ``Authorization``
#: header lets it do, ``None`` for nothing (no key, or an unknown one).
Gate: TypeAlias = Callable[[str | None], Allowed | None]


class Stream:
    """One request's event stream, held for a client that reconnects.

    Its events are numbered from 1 (0 is the first, data-less one that says
    ``retry``); the newest ``HELD_EVENTS`` are held. An event may be a close
    (:meth:`close`): a connection that reaches it ends there, with an event of
    no data that gives its id and ``retry``, and the client resumes after it.

    Attributes:
        number: the stream's number in its session (its event ids' prefix).
        status: the HTTP status the upstream answered the request with, if
            it said one.
        done: its answer is in.
    """

    def __init__(self, number: int) -> None:
        self.number = number
        self.status: int | None = None
        self.done = False
        #: each event: its number, and its message or, for a close, its retry
        self._events: deque[tuple[int, bytes | int]] = deque(maxlen=HELD_EVENTS)
        self._count = 0
        self._changed = asyncio.Event()

    def add(self, message: bytes) -> None:
        """One more event."""
        self._append(message)

    def close(self, retry_ms: int) -> None:
        """Close the connections here: their client resumes after ``retry_ms``."""
        self._append(retry_ms)

    def _append(self, event: bytes | int) -> None:
        self._count += 1
        self._events.append((self._count, event))
        self._changed.set()

    def finish(self) -> None:
        """The answer is in: no more events."""
        self.done = True
        self._changed.set()

    def answered_with(self, status: int) -> None:
        """The upstream's HTTP status for the request."""
        self.status = status
        self._changed.set()

    def holds(self, seen: int) -> bool:
        """Every event after number ``seen`` is still held (or still to come)."""
        oldest = self._events[0][0] if self._events else self._count + 1
        return 0 <= seen <= self._count and oldest <= seen + 1

    async def started(self) -> None:
        """Wait until there is an event or a status."""
        while self.status is None and not self._count and not self.done:
            self._changed.clear()
            await self._changed.wait()

    async def finished(self) -> None:
        """Wait until the answer is in."""
        while not self.done:
            self._changed.clear()
            await self._changed.wait()

    async def after(
        self, seen: int, resuming: bool = False
    ) -> AsyncIterator[tuple[int, bytes | int]]:
        """The events numbered after ``seen``, then those to come, to the answer.

        A close (its ``retry``, an int) ends them; but for ``resuming`` (a
        client reconnecting), one that comes before any message is passed
        over: the client resumed from the message before it.
        """
        start = seen
        while True:
            for number, event in list(self._events):
                if number <= seen:
                    continue
                seen = number
                if isinstance(event, int) and resuming and number == start + 1:
                    start = number  # the close it reconnected after: go on
                    continue
                yield number, event
                if isinstance(event, int):
                    return
            if self.done and seen >= self._count:
                return
            self._changed.clear()
            if seen >= self._count and not self.done:
                await self._changed.wait()

    def last(self) -> bytes | None:
        """The newest message (once done: the answer)."""
        found = [event for _, event in self._events if isinstance(event, bytes)]
        return found[-1] if found else None


class ListenSession:
    """One client's MCP session on the listener: the client side of one session.

    Attributes:
        session_id: its ``Mcp-Session-Id``; ``None`` for the stateless session.
        read_only: opened with a read-only key: answer it from the records only.
        upstream_statuses: its upstream tells the HTTP status of each request
            it is sent (``status``): a request's response waits for it (or
            for its first message), to pass an error status on.
    """

    def __init__(
        self,
        session_id: str | None,
        read_only: bool = False,
        upstream_statuses: bool = False,
    ) -> None:
        self.session_id = session_id
        self.read_only = read_only
        self.ended = False
        self.last_seen = time.monotonic()
        # a read-only session is a replay: its answers may have statuses too
        self.upstream_statuses = upstream_statuses or read_only
        #: the input schemas of the tools a ``tools/list`` answer listed
        self._schemas: dict[str, JSONValue] = {}
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        #: the streams of the requests not answered yet, by request id
        self._streams: dict[bytes, Stream] = {}
        #: every stream held for a reconnecting client, by number
        self._held: OrderedDict[int, Stream] = OrderedDict()
        self._numbered = 0
        self._tokens: dict[bytes, bytes] = {}
        #: the client of each open request (its credential's digest)
        self._clients: dict[bytes, str] = {}
        #: the headers each open request came with that go on to an HTTP
        #: upstream as they are (``MCP-Protocol-Version``, ``Mcp-Param-*``)
        self._passed: dict[bytes, dict[str, str]] = {}

    @property
    def resumable(self) -> bool:
        """Its streams have event ids (a session with an id: 2025-11-25)."""
        return self.session_id is not None

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
                key = id_key(parsed.get("id"))
                if key in self._streams:
                    self._answered(key, message)
                    return
            token = progress_token(parsed)
            owner = self._tokens.get(id_key(token)) if token is not None else None
            stream = self._streams.get(owner) if owner is not None else None
            listener = subscription_of(parsed)
            if listener is not None:  # a subscriptions/listen stream's (2026)
                stream = self._streams.get(id_key(listener))
                if stream is None:
                    return  # that stream has ended: no other asked for it
        if stream is None and self._streams:
            stream = self._streams[next(reversed(self._streams))]
        if stream is not None:
            stream.add(message)

    def _answered(self, key: bytes, answer: bytes | None) -> None:
        """The request ``key``'s answer (None: cancelled): its stream ends."""
        stream = self._streams.pop(key)
        if answer is not None:
            stream.add(answer)
        stream.finish()
        self.last_seen = time.monotonic()  # idle from its last answer
        self._clients.pop(key, None)
        self._passed.pop(key, None)
        for token, owner in list(self._tokens.items()):
            if owner == key:
                del self._tokens[token]
        answered = [n for n, held in self._held.items() if held.done]
        for number in answered[: max(0, len(answered) - HELD_STREAMS)]:
            del self._held[number]

    def listed(self, listing: JSONValue) -> None:
        """A ``tools/list`` answer the client got: its tools' input schemas."""
        tools = listing.get("tools") if isinstance(listing, dict) else None
        for tool in tools if isinstance(tools, list) else ():
            name = tool.get("name") if isinstance(tool, dict) else None
            if isinstance(tool, dict) and isinstance(name, str):
                self._schemas[name] = tool.get("inputSchema")

    def schema_of(self, tool: JSONValue) -> JSONValue:
        """The input schema a ``tools/list`` this session answered gave ``tool``."""
        return self._schemas.get(tool) if isinstance(tool, str) else None

    def status(self, request_id: JSONValue, status: int) -> None:
        """The upstream answered the open request ``request_id`` with ``status``."""
        stream = self._streams.get(id_key(request_id))
        if stream is not None:
            stream.answered_with(status)

    def resumed(self, last_event_id: str) -> tuple[Stream, int] | None:
        """The stream ``Last-Event-ID`` names and the events seen; None if not held."""
        number, _, seen = last_event_id.partition("-")
        if not (number.isdigit() and seen.isdigit()):
            return None
        stream = self._held.get(int(number))
        if stream is None or not stream.holds(int(seen)):
            return None
        return stream, int(seen)

    def closed(self, request_id: JSONValue, retry_ms: int | None) -> None:
        """The upstream closed the open request's stream early: close it here too.

        Only a resumable stream: its client resumes it with ``GET`` and
        ``Last-Event-ID`` after ``retry_ms`` (``RETRY_MS`` if None), and gets
        what came meanwhile. A stateless request's stream stays open.
        """
        stream = self._streams.get(id_key(request_id))
        if stream is not None and self.resumable:
            stream.close(RETRY_MS if retry_ms is None else retry_ms)

    def idle(self, now: float) -> float:
        """How long the session has been idle: nothing asked and nothing open."""
        return 0.0 if self._streams else now - self.last_seen

    def abort(self, why: str) -> None:
        """Answer every open request with ``why`` (the session could not run)."""
        for key in list(self._streams):
            request_id = orjson.loads(key)
            self._answered(key, orjson.dumps(error(request_id, UPSTREAM_GONE, why)))
        self.end()

    def accept(self, body: bytes) -> None:
        """A notification or a response from the client.

        A cancellation ends its request's stream: no answer comes (MCP).
        """
        self.last_seen = time.monotonic()
        message = parse(body)
        if (
            isinstance(message, dict)
            and message.get("method") == "notifications/cancelled"
        ):
            params = message.get("params")
            found = params.get("requestId") if isinstance(params, dict) else None
            if id_key(found) in self._streams:
                self._answered(id_key(found), None)
        self._inbox.put_nowait(body)

    def client_of(self, request_id: JSONValue) -> str:
        """The client of the open request ``request_id`` (see ``request``)."""
        return self._clients.get(id_key(request_id), ANONYMOUS)

    def passed_on(self, request_id: JSONValue) -> dict[str, str]:
        """The headers of the open request ``request_id`` that go on upstream."""
        return self._passed.get(id_key(request_id), {})

    def request(
        self,
        body: bytes,
        message: dict[str, JSONValue],
        client: str = ANONYMOUS,
        passed: Mapping[str, str] | None = None,
    ) -> Stream:
        """A request from ``client``: the stream that answers it.

        ``client``: ``sha256:HEX`` of the credential it came with, else
        ``anonymous`` (who may get a ``cacheScope: "private"`` answer).
        ``passed``: its headers that go on upstream as they are
        (``MCP-Protocol-Version``, ``Mcp-Param-*``; names in lower case).
        """
        self.last_seen = time.monotonic()
        key = id_key(message.get("id"))
        self._numbered += 1
        stream = Stream(self._numbered)
        self._streams[key] = stream
        if self.resumable:
            self._held[stream.number] = stream
        self._clients[key] = client
        if passed:
            self._passed[key] = dict(passed)
        token = progress_token(message)
        if token is not None:
            self._tokens[id_key(token)] = key
        self._inbox.put_nowait(body)
        return stream

    async def events(
        self, stream: Stream, seen: int = 0, resuming: bool = False
    ) -> AsyncIterator[bytes]:
        """``stream``'s events after number ``seen``, as SSE (ids if resumable).

        ``resuming``: for a client's ``GET`` with ``Last-Event-ID``
        (:meth:`Stream.after`).

        A resumable stream's connection starts with an event of no data that
        gives its id and the ``retry`` a reconnecting client waits.
        """
        if self.resumable:
            first = f"id: {stream.number}-{seen}\nretry: {RETRY_MS}\ndata: \n\n"
            yield first.encode()
        async for number, event in stream.after(seen, resuming):
            head = f"id: {stream.number}-{number}\n" if self.resumable else ""
            if isinstance(event, int):  # a close: resume after this event
                yield f"{head}retry: {event}\ndata: \n\n".encode()
            else:
                yield head.encode() + b"event: message\ndata: " + event + b"\n\n"


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
        upstream_statuses: the upstream is an HTTP server whose error
            statuses are passed on (``ListenSession.upstream_statuses``).
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
        upstream_statuses: bool = False,
    ) -> None:
        self.host = host
        self._upstream_statuses = upstream_statuses
        self.port = port
        self.idle_seconds = idle_seconds
        self.gate = gate
        self._listening = listening
        self._allow_hosts = tuple(allow_hosts)
        self._allowed: frozenset[str] = frozenset()
        self._deadlines = deadlines or Deadlines()
        self._run = run
        self._sessions: dict[str, ListenSession] = {}
        #: the stateless sessions, by the revision their requests name
        self._stateless: dict[str | None, ListenSession] = {}
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
        found += [s for s in self._stateless.values() if not s.ended]
        return found

    def _start(
        self, session_id: str | None, read_only: bool, era: str | None = None
    ) -> ListenSession:
        session = ListenSession(session_id, read_only, self._upstream_statuses)
        if session_id is None:
            self._stateless[era] = session
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
        from starlette.responses import Response

        assert isinstance(request, Request)
        refused = rebinding(request.headers, self._allowed)
        if refused is not None:  # DNS rebinding: a web page's request
            why = "intentusnet mcp proxy: Host or Origin not allowed (--allow-host)"
            return _refused(refused, INVALID_REQUEST, why)
        allowed = Allowed.ALL
        if self.gate is not None:
            found = self.gate(request.headers.get("authorization"))
            if found is None:
                why = "this proxy needs an API key: send 'Authorization: Bearer <key>'"
                return _refused(
                    401, INVALID_REQUEST, why, {"www-authenticate": "Bearer"}
                )
            allowed = found
        given = request.headers.get(_HEADER)
        resuming = request.headers.get("last-event-id")
        if request.method == "GET" and not (given and resuming):
            return Response(status_code=405, headers={"allow": "POST, DELETE"})
        known = self._sessions.get(given) if given else None
        if given and (known is None or known.ended):
            why = f"unknown or ended session {given}"
            return _refused(404, INVALID_REQUEST, why)
        read_only = allowed is Allowed.READ
        if read_only and known is not None and not known.read_only:
            return _read_only_refused()
        if request.method == "GET":
            assert known is not None
            assert resuming is not None
            held = known.resumed(resuming)
            if held is None:
                why = f"the events after {resuming} are not held (any more)"
                return _refused(404, INVALID_REQUEST, why)
            stream, seen = held
            events = known.events(stream, seen, resuming=True)
            return _event_stream(events, {_HEADER: known.session_id})
        if request.method == "DELETE":
            if known is None:
                return Response(status_code=400)
            known.end()
            return Response(status_code=200)
        body = await request.body()
        try:
            message = parse(body)
        except ValueError as exc:
            return _refused(400, PARSE_ERROR, f"Parse error: {exc}")
        if isinstance(message, list) or not isinstance(message, dict):
            return _refused(400, INVALID_REQUEST, "Invalid Request: one message")
        request_id = message.get("id")
        mismatch = header_mismatch(request.headers, message)
        if mismatch is not None:
            return _refused(400, HEADER_MISMATCH, mismatch, request_id=request_id)
        unfit = not_stateless(request.headers, message, given is not None)
        if unfit is not None:
            return _refused(*unfit, request_id=request_id)
        if self._stopped.is_set():
            why = "the proxy is stopping"
            return _refused(503, UPSTREAM_GONE, why, request_id=request_id)
        session = known
        opens = message.get("method") == "initialize"
        # the revision the body names: a stdio server tells eras by the body
        # alone, the first request deciding (a header would not reach it)
        era = request_version(message)
        stateless = self._stateless.get(era)
        if session is None and not opens and stateless is not None:
            session = None if stateless.ended else stateless
        if session is not None and read_only and not session.read_only:
            return _read_only_refused()
        if session is None:
            opened = secrets.token_hex(16) if opens else None
            session = self._start(opened, read_only, era)
        headers = {} if session.session_id is None else {_HEADER: session.session_id}
        if not is_request(message):
            session.accept(body)
            return Response(status_code=202, headers=headers)
        if message.get("method") == "tools/call":
            params = message.get("params")
            tool = params.get("name") if isinstance(params, dict) else None
            mismatch = param_mismatch(request.headers, message, session.schema_of(tool))
            if mismatch is not None:
                return _refused(400, HEADER_MISMATCH, mismatch, headers, request_id)
        credential = request.headers.get("authorization")
        client = ANONYMOUS
        if credential:  # recorded as its digest, never as itself
            client = "sha256:" + hashlib.sha256(credential.encode()).hexdigest()
        passed = {
            name: value
            for name, value in request.headers.items()
            if name == "mcp-protocol-version" or name.startswith(PARAM_PREFIX)
        }
        stream = session.request(body, message, client, passed)
        if session.upstream_statuses or session.session_id is None:
            await stream.started()  # an error status is passed on, as it is
            status = stream.status
            if status is None and session.session_id is None and stream.done:
                status = binding_status(stream.last())  # the 2026-07-28 table
            if status is not None and status >= 400:
                await stream.finished()
                answer = stream.last() or b""
                return Response(
                    answer,
                    status_code=status,
                    media_type="application/json",
                    headers=headers,
                )
        return _event_stream(session.events(stream), headers)


def _event_stream(
    events: AsyncIterator[bytes], headers: Mapping[str, str | None]
) -> object:
    """An SSE response of ``events``."""
    from starlette.responses import StreamingResponse

    return StreamingResponse(
        events,
        media_type="text/event-stream",
        headers={
            **{k: v for k, v in headers.items() if v is not None},
            "cache-control": "no-cache",
            "x-accel-buffering": "no",
        },
    )


def _refused(
    status: int,
    code: int,
    why: str,
    headers: Mapping[str, str] | None = None,
    request_id: JSONValue = None,
) -> object:
    """A JSON-RPC error answer with the HTTP error ``status``."""
    from starlette.responses import JSONResponse

    return JSONResponse(error(request_id, code, why), status, headers=headers)


def _read_only_refused() -> object:
    """403: a read-only key asked to use a session a full key opened."""
    why = "this API key is read-only: it may not use a session a full key opened"
    return _refused(403, INVALID_REQUEST, why)
