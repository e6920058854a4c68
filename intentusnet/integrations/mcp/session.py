"""One MCP session through the proxy: the message pump between client and upstream.

Every message from either side is read on its own loop and acted on at once:
a request becomes a task, a notification or a response is forwarded as read
(its bytes unchanged). Nothing waits on a notification, so progress reports,
log messages and cancellations flow while calls are in flight.

Every request is a step (:func:`~.jsonrpc.step_of`): it goes through
``run_step`` (the agent context's ``astep`` while recording) or, in a replay,
is answered from the recorded calls alone (with what the server sent during it
sent again); a request no record holds is refused, or answered as a server
without a record would (a ping). While recording, what the server sends during
a call (its progress, its own requests and the client's answers, a listen
stream's notifications, where an HTTP upstream closed its event stream early)
is recorded as steps nested in the call's step.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Awaitable, Callable
from typing import Final, Protocol, TypeAlias, runtime_checkable

import orjson

from ..._util.jsonvalue import JSONObject, JSONValue, as_int
from ...routing.execution import jsonish
from ...routing.redact import Redaction, Redactor
from ...steps.view import RecordedStep
from .calls import ASKER, Asker, RecordedCalls, is_call
from .jsonrpc import (
    ANSWERED_WITH,
    ASKED_BY,
    FROM_SERVER,
    INTERNAL_ERROR,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    NOT_RECORDED,
    OUTDATES,
    PARSE_ERROR,
    PROGRESS,
    STREAM_CLOSED,
    STREAMS,
    SUBSCRIPTION_KEY,
    UPSTREAM_GONE,
    ClientError,
    UpstreamError,
    closed_stream,
    continuation,
    destructive_tools,
    error,
    error_from_text,
    id_key,
    is_notification,
    is_other,
    is_request,
    is_response,
    parse,
    progress_token,
    request_version,
    result,
    step_of,
    subscription_of,
)

__all__ = ["Endpoint", "Resumes", "Session", "StepRunner", "UpstreamExited"]

#: How long calls still in flight when the client leaves may take to finish
#: (their steps are recorded), before they are cancelled.
DRAIN_SECONDS: Final = 5.0
#: How long a replay waits for the client's answer to a server's request.
ASK_SECONDS: Final = 60.0
#: Requests a replayed session answers although they are not recorded.
_ALWAYS: Final[dict[str, JSONObject]] = {
    "ping": {},
    "logging/setLevel": {},
    "resources/subscribe": {},
    "resources/unsubscribe": {},
}


class Endpoint(Protocol):
    """One side of the proxy: newline-delimited JSON-RPC messages."""

    async def receive(self) -> bytes | None:
        """The next message (one line, without its newline); ``None`` at the end."""

    async def send(self, message: bytes) -> None:
        """Send one message (without its newline)."""


@runtime_checkable
class Identifies(Protocol):
    """A client side that knows who sent each request (``--listen``)."""

    def client_of(self, request_id: JSONValue) -> str:
        """The client of the request ``request_id`` (``Asker.client``)."""


@runtime_checkable
class Refuses(Protocol):
    """An upstream that says the HTTP status a request was refused with."""

    def status_of(self, request_id: JSONValue) -> int | None:
        """The HTTP error status of the request ``request_id``, if it had one."""


@runtime_checkable
class Answers(Protocol):
    """A client side that answers over HTTP (``--listen``)."""

    def status(self, request_id: JSONValue, status: int) -> None:
        """Answer the request ``request_id`` with the HTTP status ``status``."""

    def listed(self, listing: JSONValue) -> None:
        """A ``tools/list`` answer the client got: its tools' input schemas."""


@runtime_checkable
class Resumes(Protocol):
    """A client side whose clients resume a request's event stream (``--listen``)."""

    def closed(self, request_id: JSONValue, retry_ms: int | None) -> None:
        """Close the request's event stream here, for its client to resume.

        ``retry_ms``: how long the client waits before it does (the server's).
        """


#: ``ctx.astep``: ``await run_step(name, args, fn, side_effect=...)``.
StepRunner: TypeAlias = Callable[..., Awaitable[JSONValue]]


class UpstreamExited(RuntimeError):
    """The upstream server closed its output while the session was open."""


class ClientCancelled(Exception):
    """The client cancelled the request (``notifications/cancelled``)."""


class Session:
    """Pumps messages between a client and an upstream (or a record).

    Args:
        client: the MCP client's side.
        upstream: the server's side; ``None`` in a replay.
        calls: the recorded calls answering a replay (or a cache's hits,
            through ``run_step``'s cassette).
        run_step: records a step; ``None`` in a replay.
        side_effects: tools never answered from a cache; the tools a
            ``tools/list`` marks ``destructiveHint: true`` are added (a
            recorded one, and in a cache session the upstream's own, which
            the proxy asks for before the first tool call unless the client
            did).
        redactor: in a replay, the recording's redactor: a call's arguments
            are redacted as they were when recorded, so that they match.
    """

    def __init__(
        self,
        client: Endpoint,
        upstream: Endpoint | None,
        *,
        calls: RecordedCalls | None,
        run_step: StepRunner | None,
        side_effects: set[str],
        redactor: Redactor | None = None,
    ) -> None:
        self.redaction = None if redactor is None else Redaction(redactor)
        self.client = client
        self.upstream = upstream
        # What either side can do beyond sending and receiving, read once: a
        # runtime-checkable Protocol's isinstance walks the class each time
        # (about 20 us on Python 3.11), and _asker asks for every request.
        self._identifies = client if isinstance(client, Identifies) else None
        self._answers = client if isinstance(client, Answers) else None
        self._resumes = client if isinstance(client, Resumes) else None
        self._refuses = upstream if isinstance(upstream, Refuses) else None
        self.calls = calls
        self.run_step = run_step
        self.side_effects = set(side_effects)
        if calls is not None and run_step is not None:  # a replay serves them all
            self.side_effects |= calls.destructive
        #: a cache session: the upstream's tools/list, asked for once
        self._tools: asyncio.Future[None] | None = None
        self._tools_listed = False
        self.requests = 0
        self.forwarded = 0
        #: requests answered with an error: nothing recorded, or no upstream
        self.refused = 0
        self._pending: dict[bytes, asyncio.Future[JSONObject]] = {}
        #: requests the client cancelled: a late answer to one is dropped
        self._cancelled_ids: set[bytes] = set()
        self._tasks: set[asyncio.Task[None]] = set()
        #: the calls forwarded and not answered yet: their step's context
        self._open: dict[bytes, contextvars.Context] = {}
        #: progress tokens of the calls forwarded, to the call's request key
        self._tokens: dict[bytes, bytes] = {}
        #: requests the server made of the client, waiting for its answer
        self._asked: dict[bytes, asyncio.Future[JSONObject]] = {}
        #: steps recording what the server sent (progress, its requests)
        self._notes: set[asyncio.Task[None]] = set()
        #: the protocol revision the session negotiated (``initialize``)
        self.version: str | None = None
        #: the server's requests a replay asked the client again, so far
        self._asks = 0
        #: the ``subscriptions/listen`` requests forwarded and still open
        self._listens: set[bytes] = set()
        #: the client has left: open listen streams end without an answer
        self._ending = False

    async def run(self) -> JSONObject:
        """Pump until the client leaves; return what the session did.

        Raises:
            UpstreamExited: the upstream went away first (pending requests
                were answered with an error).
        """
        from_client = asyncio.create_task(self._from_client())
        pumps = [from_client]
        if self.upstream is not None:
            pumps.append(asyncio.create_task(self._from_upstream()))
        try:
            await asyncio.wait(pumps, return_when=asyncio.FIRST_COMPLETED)
            self._end_listens()
            # One side is done: the calls in flight may still finish (the
            # upstream's answers keep coming in while they do).
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=DRAIN_SECONDS)
        finally:
            running = [*pumps, *self._tasks, *self._notes]
            for task in running:
                task.cancel()
            await asyncio.gather(*running, return_exceptions=True)
        for pump in pumps[1:]:
            if not pump.cancelled() and pump.exception() is not None:
                pump.result()  # the upstream's end: raises UpstreamExited
        return self.counts()

    def counts(self) -> JSONObject:
        """The requests so far: those forwarded, those served, those refused."""
        return {
            "requests": self.requests,
            "forwarded": self.forwarded,
            "served": self.requests - self.forwarded - self.refused,
            "refused": self.refused,
        }

    # -- the client's messages ---------------------------------------------------

    async def _from_client(self) -> None:
        while (line := await self.client.receive()) is not None:
            try:
                message = parse(line)
            except ValueError as exc:
                await self._answer(error(None, PARSE_ERROR, f"Parse error: {exc}"))
                continue
            if is_request(message):
                assert isinstance(message, dict)
                task = asyncio.create_task(self._request(message, line))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            elif is_notification(message):
                assert isinstance(message, dict)
                if message.get("method") == "notifications/cancelled":
                    self._cancelled(message.get("params"))
                await self._forward(line)
            elif is_response(message):
                assert isinstance(message, dict)
                asked = self._asked.pop(id_key(message.get("id")), None)
                if asked is not None and not asked.done():
                    asked.set_result(message)
                await self._forward(line)  # the answer to a server's request
            else:
                found = message.get("id") if isinstance(message, dict) else None
                await self._answer(
                    error(found, INVALID_REQUEST, "Invalid Request: not JSON-RPC 2.0")
                )

    def _cancelled(self, params: JSONValue) -> None:
        found = params.get("requestId") if isinstance(params, dict) else None
        self._cancelled_ids.add(id_key(found))
        waiting = self._pending.pop(id_key(found), None)
        if waiting is not None and not waiting.done():
            reason = params.get("reason") if isinstance(params, dict) else None
            waiting.set_exception(ClientCancelled(str(reason or "cancelled")))

    async def _request(self, message: JSONObject, line: bytes) -> None:
        request_id = message.get("id")
        method = str(message.get("method"))
        name, args = step_of(method, message.get("params"))
        self.requests += 1
        asker = self._asker(message)
        ASKER.set(asker)  # this request's own task: its cassette's decisions
        tool = name.removeprefix("mcp:tools/call:") if is_call(name) else None
        if tool is not None and self._caching():
            await self._know_tools(message)
        side = tool is not None and tool in self.side_effects
        live: list[JSONObject] = []
        key = id_key(request_id)
        token = progress_token(message)

        async def call(**_: object) -> JSONValue:
            # inside the call's step: what the server sends for it (progress,
            # requests of its own) is recorded as steps nested in this one
            self._open[key] = contextvars.copy_context()
            if token is not None:
                self._tokens[id_key(token)] = key
            if method in STREAMS:
                self._listens.add(key)
            try:
                self.forwarded += 1
                await self._mark(method, message, asker)
                answer = await self._call_upstream(request_id, line)
            finally:
                self._open.pop(key, None)
                self._listens.discard(key)
                if token is not None:
                    self._tokens.pop(id_key(token), None)
            live.append(answer)
            if "error" in answer:
                body = answer["error"]
                body = body if isinstance(body, dict) else {}
                await self._answered_with(request_id, body)
                raise UpstreamError.of(body)
            return answer.get("result")

        try:
            if self.run_step is not None:
                value = await self.run_step(name, args, call, side_effect=side)
            else:
                source, found = self._replayed(name, args, asker)
                assert self.calls is not None  # a replay's
                for sent, params in self.calls.sent(source, found):
                    if sent == STREAM_CLOSED:  # where the server closed it
                        self._close(request_id, as_int(params.get("retry")))
                    elif sent.startswith(FROM_SERVER):
                        await self._ask_client(sent, params)
                    elif method in STREAMS:  # on this stream: tagged as its own
                        tagged = {**params, "_meta": {SUBSCRIPTION_KEY: request_id}}
                        await self._answer(_notification(sent, tagged))
                    elif sent != PROGRESS:
                        await self._answer(_notification(sent, params))
                    elif token is not None:  # progress: if the client asked
                        progress = {**params, "progressToken": token}
                        await self._answer(_notification(sent, progress))
                if not found.ok:
                    await self._recorded_error(request_id, source, found)
                    return
                if method in STREAMS:
                    return  # the stream stays open, as a server's does
                value = found.output
        except ClientCancelled:
            return  # no answer after a cancellation (MCP)
        except UpstreamExited as exc:
            self.refused += 1
            await self._answer(error(request_id, UPSTREAM_GONE, str(exc)))
            return
        except _NotRecorded as exc:
            if self.run_step is None and is_other(method):
                self.requests -= 1  # answered as it is without a record
                await self._unrecorded(request_id, method)
                return
            self.refused += 1
            await self._answer(error(request_id, NOT_RECORDED, str(exc), exc.data))
            return
        except Exception as exc:  # an error answer, live or recorded
            if live:
                await self.client.send(orjson.dumps(live[0]))
                return
            code, text = error_from_text(str(exc))
            await self._answer(error(request_id, code, text))
            return
        if method in STREAMS and self._ending:
            return  # its client has left: the stream just ends
        if method == "initialize" and isinstance(value, dict):
            found_version = value.get("protocolVersion")
            if isinstance(found_version, str):
                self.version = found_version
        if method == "tools/list":
            if self._answers is not None:
                self._answers.listed(value)
            self.side_effects |= destructive_tools(value)
            if not isinstance(value, dict) or value.get("nextCursor") is None:
                self._tools_listed = True  # the last page: every tool is known
        if live:
            await self.client.send(orjson.dumps(live[0]))
        else:
            await self._answer(result(request_id, value))

    async def _ask_client(self, name: str, params: JSONObject) -> None:
        """Ask the client a recorded request of the server's own, in a replay.

        So that the client sees what it saw (its sampling or elicitation
        callback runs); its answer is not used: the call's recorded answer
        holds what came of it. Waits ``ASK_SECONDS`` at most.
        """
        self._asks += 1
        request_id = f"intentusnet-replay:{self._asks}"
        waiting: asyncio.Future[JSONObject] = asyncio.get_running_loop().create_future()
        self._asked[id_key(request_id)] = waiting
        method = name.removeprefix(FROM_SERVER)
        await self._answer(
            {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        )
        try:
            await asyncio.wait_for(waiting, ASK_SECONDS)
        except TimeoutError:
            self._asked.pop(id_key(request_id), None)

    async def _answered_with(self, request_id: JSONValue, body: JSONObject) -> None:
        """Record what a live error answer's failure does not keep, if anything.

        The HTTP status the upstream refused the request with, and the
        error's ``data`` (``mcp:answered-with``, nested in the call).
        """
        refuses = self._refuses
        status = None if refuses is None else refuses.status_of(request_id)
        data = body.get("data")
        if self.run_step is not None and (status is not None or data is not None):
            detail: JSONObject = {"status": status, "data": data}
            await self.run_step(ANSWERED_WITH, detail, _nothing)

    async def _recorded_error(
        self, request_id: JSONValue, source: str, step: RecordedStep
    ) -> None:
        """Answer a recorded error as it came: its status and data too."""
        assert self.calls is not None
        code, text = error_from_text(step.error_text)
        detail = self.calls.detail(source, step)
        status = detail.get("status")
        if isinstance(status, int) and self._answers is not None:
            self._answers.status(request_id, status)
        await self._answer(error(request_id, code, text, detail.get("data")))

    def _asker(self, message: JSONObject) -> Asker:
        """Who asks ``message``: the revision it names, else the session's.

        An ``initialize`` asks for the revision in its ``protocolVersion``.
        """
        identifies = self._identifies
        client = None if identifies is None else identifies.client_of(message.get("id"))
        given = continuation(message)
        continues = None if given is None else jsonish(given)[1]
        named = request_version(message)
        if named is not None:
            return Asker(named, stateless=True, client=client, continues=continues)
        if message.get("method") == "initialize":
            params = message.get("params")
            asked = params.get("protocolVersion") if isinstance(params, dict) else None
            return Asker(asked if isinstance(asked, str) else None, client=client)
        return Asker(self.version, client=client, continues=continues)

    async def _mark(self, method: str, message: JSONObject, asker: Asker) -> None:
        """Record a forwarded call's revision, where its session does not say it.

        Nested in the call's step (``mcp:asked-by``): a stateless request's
        revision (the one its ``_meta`` names, or none) is its own, not its
        session's (an ``initialize`` says it in its answer); and the client of
        a ``--listen`` request (a stdio client is the local user).
        """
        if self.run_step is None:
            return
        asked: JSONObject = {}
        if method != "initialize" and (
            self.version is None or request_version(message) is not None
        ):
            asked["protocolVersion"] = asker.version
        if asker.client is not None:
            asked["client"] = asker.client
        given = continuation(message)
        if given is not None:  # a round of a multi-round-trip exchange
            asked["continues"] = given
        if asked:
            await self.run_step(ASKED_BY, asked, _nothing)

    def _caching(self) -> bool:
        """A cache session: recorded calls answer, the rest is forwarded."""
        return self.calls is not None and self.run_step is not None

    async def _know_tools(self, message: JSONObject) -> None:
        """Wait until the upstream's tools (and their annotations) are known."""
        if self._tools_listed:
            return
        if self._tools is None:
            self._tools = asyncio.ensure_future(self._list_tools(message))
        # shielded: a client cancelling its call does not cut the listing
        await asyncio.shield(self._tools)

    async def _list_tools(self, message: JSONObject) -> None:
        """Ask the upstream's ``tools/list`` (every page), recorded as steps.

        The request carries the ``_meta`` of the client's ``message`` (a
        stateless server reads the protocol version there), less its
        progress token. An error answer leaves the tools unknown.
        """
        assert self.run_step is not None
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        kept = (
            {k: v for k, v in meta.items() if k != "progressToken"}
            if isinstance(meta, dict)
            else {}
        )
        cursor: JSONValue = None
        for page in range(1, _PAGES + 1):
            args: JSONObject = {} if cursor is None else {"cursor": cursor}
            request: JSONObject = {
                "jsonrpc": "2.0",
                "id": f"intentusnet-proxy:tools/list:{page}",
                "method": "tools/list",
                "params": {**args, "_meta": kept} if kept else args,
            }

            async def ask(request: JSONObject = request, **_: object) -> JSONValue:
                line = orjson.dumps(request)
                await self._mark("tools/list", request, ASKER.get())
                answer = await self._call_upstream(request["id"], line)
                if "error" in answer:
                    raise UpstreamError(INTERNAL_ERROR, "tools/list failed")
                return answer.get("result")

            try:
                value = await self.run_step("mcp:tools/list", args, ask)
            except UpstreamError:
                return
            self.side_effects |= destructive_tools(value)
            cursor = value.get("nextCursor") if isinstance(value, dict) else None
            if cursor is None:
                return

    def _replayed(
        self, name: str, args: JSONObject, asker: Asker
    ) -> tuple[str, RecordedStep]:
        assert self.calls is not None
        recorded, args_hash, _ = jsonish(args)
        if self.redaction is not None:
            recorded = self.redaction.args(name, recorded)
            args_hash = jsonish(recorded)[1]
        found = self.calls.find(name, args_hash, asker)
        if found is None:
            cut = self.calls.unanswered(name, args_hash)
            if cut is not None:
                raise _NotRecorded(name, cut[0], [], cut[1])
            nearest = self.calls.nearest(name, recorded)
            raise _NotRecorded(name, self.calls.execution_id, nearest)
        return found

    async def _unrecorded(self, request_id: JSONValue, method: str) -> None:
        """A replay's answer to a request no record holds: a server's without one."""
        if method in _ALWAYS:
            await self._answer(result(request_id, _ALWAYS[method]))
            return
        await self._answer(
            error(
                request_id,
                METHOD_NOT_FOUND,
                f"intentusnet mcp proxy (replay): {method!r} is not recorded "
                "and there is no upstream to ask",
            )
        )

    async def _call_upstream(self, request_id: JSONValue, line: bytes) -> JSONObject:
        if self.upstream is None:
            raise UpstreamExited("no upstream")
        waiting: asyncio.Future[JSONObject] = asyncio.get_running_loop().create_future()
        self._pending[id_key(request_id)] = waiting
        await self.upstream.send(line)
        return await waiting

    # -- the upstream's messages -------------------------------------------------

    async def _from_upstream(self) -> None:
        assert self.upstream is not None
        while (line := await self.upstream.receive()) is not None:
            try:
                message = parse(line)
            except ValueError:
                continue  # not ours to answer: the server wrote a bad line
            closed = closed_stream(message)
            if closed is not None:  # the upstream's word, never sent on
                self._stream_closed(*closed)
                continue
            if is_response(message):
                assert isinstance(message, dict)
                key = id_key(message.get("id"))
                if key in self._cancelled_ids:
                    self._cancelled_ids.discard(key)
                    continue  # the client no longer waits for it
                waiting = self._pending.pop(key, None)
                if waiting is not None:
                    if not waiting.done():
                        waiting.set_result(message)
                    continue
            elif self.run_step is not None and isinstance(message, dict):
                self._note(message)
                notice = f"mcp:{message.get('method')}"
                if self.calls is not None and notice in OUTDATES:
                    self.calls.notified(notice, message.get("params"))
            await self.client.send(line)
        gone = UpstreamExited("the upstream MCP server exited mid-session")
        for waiting in self._pending.values():
            if not waiting.done():
                waiting.set_exception(gone)
        self._pending.clear()
        raise gone

    def _stream_closed(self, request_id: JSONValue, retry_ms: int | None) -> None:
        """The server closed the call ``request_id``'s event stream before its answer.

        Recorded as a step of the call (``STREAM_CLOSED``), in order with what
        the server sent during it, so that a replay closes it there too; and
        the client's stream is closed there (``Resumes``).
        """
        context = self._open.get(id_key(request_id))
        if self.run_step is not None and context is not None:
            step = self.run_step(STREAM_CLOSED, {"retry": retry_ms}, _nothing)
            task = asyncio.get_running_loop().create_task(
                _recorded(step), context=context
            )
            self._notes.add(task)
            task.add_done_callback(self._notes.discard)
        self._close(request_id, retry_ms)

    def _close(self, request_id: JSONValue, retry_ms: int | None) -> None:
        """Close the client's event stream of ``request_id``, if it has such streams."""
        if self._resumes is not None:
            self._resumes.closed(request_id, retry_ms)

    def _note(self, message: JSONObject) -> None:
        """Record what the server sent that is not an answer, as a step.

        A progress notification is a step of the call whose progress token it
        names; a request of the server's own (sampling, elicitation, roots, a
        ping) is a step whose output is the client's answer, nested in the
        one call in flight if there is exactly one. A notification that
        outdates earlier answers (a list change, a resource update) is a step
        of the session; any other the server sends on its own (a log message)
        is a step of the one call in flight, if exactly one is; otherwise it,
        and any sent on a ``subscriptions/listen`` stream, is only forwarded.
        """
        method = message.get("method")
        params = message.get("params")
        given = params if isinstance(params, dict) else {}
        name = f"mcp:{method}"
        args = {k: v for k, v in given.items() if k != "_meta"}
        fn: Callable[..., Awaitable[JSONValue]] = _nothing
        context: contextvars.Context | None = None
        if is_request(message):
            name = f"{FROM_SERVER}{method}"
            waiting = asyncio.get_running_loop().create_future()
            self._asked[id_key(message.get("id"))] = waiting
            fn = self._client_answer(waiting)
            calls = self._in_flight()
            if len(calls) == 1:
                context = calls[0]
        elif method == "notifications/progress":
            owner = self._tokens.get(id_key(progress_token(message)))
            context = None if owner is None else self._open.get(owner)
            if context is None:
                return  # no call of this session's asked for it
            name = PROGRESS
            args = {k: v for k, v in given.items() if k not in _VOLATILE}
        elif (listening := self._listening(message)) is not None:
            context = listening  # on a subscriptions/listen stream: its step's
        elif name not in OUTDATES:
            if not (
                is_notification(message)
                and str(method).startswith("notifications/")
                and method != "notifications/cancelled"
                and subscription_of(message)
                is None  # a listen stream's: not the call's
                and len(self._in_flight()) == 1
            ):
                return
            # sent on its own (a log message, say): a step of the one call
            # in flight, replayed with it in order
            context = self._in_flight()[0]
        assert self.run_step is not None
        step = self.run_step(name, args, fn)
        task = asyncio.get_running_loop().create_task(_recorded(step), context=context)
        self._notes.add(task)
        task.add_done_callback(self._notes.discard)

    def _in_flight(self) -> list[contextvars.Context]:
        """The contexts of the calls forwarded and not answered (listens aside)."""
        return [c for k, c in self._open.items() if k not in self._listens]

    def _listening(self, message: JSONObject) -> contextvars.Context | None:
        """The context of the open listen stream ``message`` was sent on, if any."""
        found = subscription_of(message)
        key = None if found is None else id_key(found)
        return self._open.get(key) if key in self._listens else None

    def _end_listens(self) -> None:
        """The client has left: its open listen streams end, recorded as answered.

        A ``subscriptions/listen`` is answered by its stream, not by a result:
        its step ends (output ``null``) with the notifications it carried.
        """
        self._ending = True
        for key in list(self._listens):
            waiting = self._pending.pop(key, None)
            if waiting is not None and not waiting.done():
                ended = {"jsonrpc": "2.0", "id": orjson.loads(key), "result": None}
                waiting.set_result(ended)

    @staticmethod
    def _client_answer(
        waiting: asyncio.Future[JSONObject],
    ) -> Callable[..., Awaitable[JSONValue]]:
        async def answer(**_: object) -> JSONValue:
            message = await waiting
            if "error" in message:
                raise ClientError.of(message["error"])
            return message.get("result")

        return answer

    # -- sending -----------------------------------------------------------------

    async def _forward(self, line: bytes) -> None:
        if self.upstream is not None:
            with contextlib.suppress(OSError):  # gone: its reader ends the session
                await self.upstream.send(line)

    async def _answer(self, message: JSONObject) -> None:
        await self.client.send(orjson.dumps(message))


class _NotRecorded(LookupError):
    def __init__(
        self,
        name: str,
        execution_id: str,
        nearest: list[str],
        unanswered: RecordedStep | None = None,
    ) -> None:
        what = name.removeprefix("mcp:")
        self.data: JSONObject = {"step": name, "executionId": execution_id}
        if unanswered is not None:
            error = unanswered.error or {}
            why = error.get("type") or unanswered.outcome
            super().__init__(
                f"{what} with these arguments is in record {execution_id} "
                f"(step {unanswered.number}) without an answer: it was "
                f"{_UNANSWERED.get(str(why), 'never answered')}"
            )
            self.data["step_number"] = unanswered.number
            self.data["outcome"] = str(why)
            return
        shown = "; ".join(nearest) if nearest else "none"
        super().__init__(
            f"{what} with these arguments is not in the recorded sessions "
            f"(newest {execution_id}); nearest recorded: {shown}"
        )
        self.data["nearest"] = list(nearest)


#: Why a recorded call holds no answer, by its error type (or outcome).
_UNANSWERED: Final = {
    "ClientCancelled": "cancelled by the client",
    "UpstreamExited": "in flight when the upstream exited",
    "unfinished": "in flight when the recording stopped",
    "cancelled": "in flight when the recording stopped",
}


#: The most pages of ``tools/list`` a cache session asks for itself.
_PAGES: Final = 100

#: What a recorded progress notification is keyed without: the token is the
#: client's own, another in every session.
_VOLATILE: Final = frozenset({"progressToken", "_meta"})


async def _nothing(**_: object) -> None:
    """A progress step's call: the notification itself is the step's record."""


async def _recorded(step: Awaitable[JSONValue]) -> None:
    # a client's error answer is its step's failure, already recorded
    with contextlib.suppress(Exception):
        await step


def _notification(name: str, params: JSONObject) -> JSONObject:
    """A recorded notification (its step ``name``), sent again as it was."""
    method = name.removeprefix("mcp:")
    return {"jsonrpc": "2.0", "method": method, "params": params}
