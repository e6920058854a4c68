"""The upstream over MCP's streamable HTTP transport (``--upstream-url``).

Each message is POSTed on its own task, so a slow call never holds up the
next message; the server answers a request with one JSON body or with a
``text/event-stream`` of messages (progress notifications, then the answer),
and both feed one queue that the session reads. The routing headers MCP asks
for (``Mcp-Session-Id``, ``MCP-Protocol-Version``, ``Mcp-Method``,
``Mcp-Name``) are taken from the messages themselves, but for a request whose
client sent its own ``MCP-Protocol-Version`` (on ``--listen``): that one is
passed on, and so are its ``Mcp-Param-*`` headers (a tool's arguments the
server may check them against). The HTTP error status a request was refused
with is kept for the session (``status_of``), which records it. Headers the
user gives (``--header``, credentials included) are sent and never recorded.

A request's event stream the server closes before its answer, after an event
id (a server polling its clients, SEP-1699), is resumed as a client would:
``GET`` with ``Last-Event-ID`` after its ``retry``; the session is told of
each such close, in order with the server's messages (``stream_closed``).

Once the session is initialized, a ``GET`` holds the server's event stream
open for the messages that belong to no request (a list change, a log line, a
request of the server's own); it is asked for again when the server ends it,
and given up on a 405 (the server offers none) or after repeated failures.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
from collections.abc import Callable, Mapping
from typing import Final

import httpx
import orjson

from ..._util.jsonvalue import JSONValue
from .jsonrpc import (
    UPSTREAM_GONE,
    error,
    id_key,
    is_request,
    is_response,
    parse,
    request_version,
    stream_closed,
)

__all__ = ["HttpUpstream"]

_NAMED: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_SAFE: Final = re.compile(r"[\x20-\x7E]*")
#: Failed GETs in a row after which the GET stream is given up.
_GET_TRIES: Final = 3
#: The pause before the GET stream is asked for again.
_GET_PAUSE: Final = 1.0
#: The error statuses held for the session to ask for (the oldest dropped).
_REFUSED_HELD: Final = 1000


def _initialized(message: JSONValue) -> bool:
    """The client's ``notifications/initialized``: the session is open."""
    return (
        isinstance(message, dict)
        and message.get("method") == "notifications/initialized"
        and "id" not in message
    )


def _header_value(value: str) -> str:
    """A header value as MCP encodes one that HTTP cannot carry verbatim."""
    if _SAFE.fullmatch(value) and value == value.strip() and "=?" not in value:
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


class HttpUpstream:
    """A streamable-HTTP MCP server at ``url``.

    Args:
        url: the server's MCP endpoint.
        headers: sent with every request (an ``Authorization``, say).
        transport: an httpx transport (tests); the network by default.
        passed: the headers the client sent with a request that go on as
            they are, by its id (``ListenSession.passed_on``).
        statuses: told the HTTP status each request was answered with, by
            its id (``ListenSession.status``), before its answer is queued.
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        passed: Callable[[JSONValue], Mapping[str, str]] | None = None,
        statuses: Callable[[JSONValue, int], None] | None = None,
    ) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self._passed = passed
        self._statuses = statuses
        #: the HTTP error statuses of requests not asked for yet (``status_of``)
        self._refused: dict[bytes, int] = {}
        self.session_id: str | None = None
        self.version: str | None = None
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._posts: set[asyncio.Task[None]] = set()
        #: the GET event stream's reader, once the session is initialized
        self._listener: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Open the HTTP client (nothing is sent before the first message)."""
        self._client = httpx.AsyncClient(
            transport=self._transport,
            timeout=httpx.Timeout(None, connect=10.0),
        )

    async def receive(self) -> bytes | None:
        """The server's next message; ``None`` once stopped."""
        return await self._queue.get()

    async def send(self, message: bytes) -> None:
        """POST one message (on its own task: answers arrive through ``receive``)."""
        post = asyncio.create_task(self._post(message))
        self._posts.add(post)
        post.add_done_callback(self._posts.discard)

    def _request_headers(self, parsed: JSONValue) -> dict[str, str]:
        headers = {
            **self.headers,
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if not isinstance(parsed, dict):
            return headers
        method = parsed.get("method")
        params = parsed.get("params")
        version = request_version(parsed)
        if version is not None:
            headers["mcp-protocol-version"] = version
        elif self.version is not None and method != "initialize":
            headers["mcp-protocol-version"] = self.version
        if self._passed is not None and is_request(parsed):
            # the client's own, as it sent them
            headers.update(self._passed(parsed.get("id")))
        if isinstance(method, str):
            headers["mcp-method"] = method
            key = _NAMED.get(method)
            named = params.get(key) if key and isinstance(params, dict) else None
            if isinstance(named, str):
                headers["mcp-name"] = _header_value(named)
        return headers

    async def _post(self, message: bytes) -> None:
        assert self._client is not None
        try:
            parsed = parse(message)
        except ValueError:
            parsed = None
        try:
            async with self._client.stream(
                "POST",
                self.url,
                content=message,
                headers=self._request_headers(parsed),
            ) as response:
                found = response.headers.get("mcp-session-id")
                if found:
                    self.session_id = found
                if is_request(parsed):
                    assert isinstance(parsed, dict)
                    if response.status_code >= 400:
                        if len(self._refused) >= _REFUSED_HELD:  # never asked for
                            del self._refused[next(iter(self._refused))]
                        self._refused[id_key(parsed.get("id"))] = response.status_code
                    if self._statuses is not None:
                        self._statuses(parsed.get("id"), response.status_code)
                kind = response.headers.get("content-type", "").partition(";")[0]
                if kind.strip() == "text/event-stream":
                    cursor: dict[str, str] = {}
                    answered = await self._events(response, parsed, cursor)
                    if answered or not is_request(parsed):
                        pass
                    elif "id" in cursor:  # resumable: the server closed it early
                        self._closed(parsed, cursor)
                        await self._resume(parsed, cursor)
                    else:
                        self._failed(parsed, "its event stream ended before its answer")
                elif kind.strip() == "application/json":
                    refused = response.status_code >= 400 and is_request(parsed)
                    self._answer(await response.aread(), parsed, refused)
                elif response.status_code >= 400 and is_request(parsed):
                    await response.aread()
                    self._failed(parsed, f"HTTP {response.status_code}")
                if response.status_code < 300 and _initialized(parsed):
                    self._listen()
        except httpx.HTTPError as exc:
            if is_request(parsed):
                self._failed(parsed, f"{type(exc).__name__}: {exc}")

    def status_of(self, request_id: JSONValue) -> int | None:
        """The HTTP error status the request ``request_id`` was refused with, once."""
        return self._refused.pop(id_key(request_id), None)

    def _answer(self, body: bytes, sent: JSONValue, refused: bool = False) -> bool:
        """Queue the messages of ``body``; whether one answers ``sent``.

        ``refused``: the server refused the request ``sent`` with an HTTP error
        status; its JSON-RPC error with ``id: null`` (it may not have read the
        body) answers that request, under its id: the client waits for it.
        """
        try:
            value = parse(body)
        except ValueError:
            return False
        answered = False
        for one in value if isinstance(value, list) else [value]:
            if isinstance(one, dict) and isinstance(sent, dict):
                if refused and one.get("id") is None and "error" in one:
                    one = {**one, "id": sent.get("id")}
                if sent.get("method") == "initialize":
                    found = one.get("result")
                    version = (
                        found.get("protocolVersion")
                        if isinstance(found, dict)
                        else None
                    )
                    if isinstance(version, str):
                        self.version = version
                answered = answered or (
                    is_response(one) and one.get("id") == sent.get("id")
                )
            self._queue.put_nowait(orjson.dumps(one))
        return answered

    def _listen(self) -> None:
        """Open the GET event stream (once): messages outside any request."""
        if self._listener is None:
            self._listener = asyncio.create_task(self._stream())

    async def _stream(self) -> None:
        """Read the server's GET event stream, reconnecting when it ends.

        A server that offers none answers 405; after ``_GET_TRIES`` failures
        in a row (errors, other statuses) the proxy stops asking. Every
        message read goes to the session like an answer to a POST.
        """
        assert self._client is not None
        last: dict[str, str] = {}
        failures = 0
        while failures < _GET_TRIES:
            headers = self._get_headers(last.get("id"))
            try:
                async with self._client.stream(
                    "GET", self.url, headers=headers
                ) as response:
                    kind = response.headers.get("content-type", "")
                    if response.status_code == 405:
                        return  # the server offers no GET stream
                    if response.status_code != 200 or not kind.startswith(
                        "text/event-stream"
                    ):
                        await response.aread()
                        failures += 1
                    else:
                        failures = 0
                        await self._events(response, None, last)
            except httpx.HTTPError:
                failures += 1
            await asyncio.sleep(_GET_PAUSE)

    def _get_headers(self, last_event_id: str | None) -> dict[str, str]:
        """The headers of a GET for an event stream, resumed after an event id."""
        headers = {**self.headers, "accept": "text/event-stream"}
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.version is not None:
            headers["mcp-protocol-version"] = self.version
        if last_event_id is not None:
            headers["last-event-id"] = last_event_id
        return headers

    async def _events(
        self, response: httpx.Response, sent: JSONValue, cursor: dict[str, str]
    ) -> bool:
        """Queue the messages of an event stream; whether ``sent``'s answer came.

        ``cursor`` is kept up to date with the stream's last event ``id`` and
        its ``retry`` (milliseconds), for a reconnection.
        """
        data: list[str] = []
        answered = False
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif line.startswith(("id:", "retry:")):
                field, _, value = line.partition(":")
                cursor[field] = value.strip()
            elif not line and data:
                text = "\n".join(data)
                data.clear()
                if text.strip():
                    answered = self._answer(text.encode(), sent) or answered
        if data:
            answered = self._answer("\n".join(data).encode(), sent) or answered
        return answered

    async def _resume(self, sent: JSONValue, cursor: dict[str, str]) -> None:
        """Resume a request's event stream the server closed before its answer.

        As a client does (2025-11-25): ``GET`` with ``Last-Event-ID`` after the
        stream's ``retry``, again while events come and no answer, until
        ``_GET_TRIES`` tries in a row bring nothing; then the request is
        answered with an error.
        """
        assert self._client is not None
        failures = 0
        while failures < _GET_TRIES:
            retry = cursor.get("retry", "")
            pause = int(retry) / 1000 if retry.isdigit() else _GET_PAUSE
            await asyncio.sleep(min(pause, _GET_PAUSE))
            seen = cursor.get("id")
            try:
                async with self._client.stream(
                    "GET", self.url, headers=self._get_headers(seen)
                ) as response:
                    if response.status_code == 200:
                        if await self._events(response, sent, cursor):
                            return
                        self._closed(sent, cursor)  # closed early again
                    else:
                        await response.aread()
            except httpx.HTTPError:
                pass
            failures = 0 if cursor.get("id") != seen else failures + 1
        self._failed(sent, "its event stream ended before its answer")

    def _closed(self, request: JSONValue, cursor: dict[str, str]) -> None:
        """Tell the session the server closed ``request``'s stream before its answer.

        In order with the messages queued before; the session closes its
        client's stream there too (``stream_closed``), with the ``retry``.
        """
        retry = cursor.get("retry", "")
        request_id = request.get("id") if isinstance(request, dict) else None
        closed = stream_closed(request_id, int(retry) if retry.isdigit() else None)
        self._queue.put_nowait(orjson.dumps(closed))

    def _failed(self, request: JSONValue, why: str) -> None:
        request_id = request.get("id") if isinstance(request, dict) else None
        text = f"the upstream MCP server at {self.url} did not answer: {why}"
        self._queue.put_nowait(orjson.dumps(error(request_id, UPSTREAM_GONE, text)))

    async def stop(self) -> None:
        """End the server's session (``DELETE``) and close the client."""
        running = list(self._posts)
        if self._listener is not None:
            running.append(self._listener)
        for task in running:
            task.cancel()
        await asyncio.gather(*running, return_exceptions=True)
        client = self._client
        if client is not None:
            if self.session_id is not None:
                with contextlib.suppress(httpx.HTTPError):
                    await client.delete(
                        self.url,
                        headers={**self.headers, "mcp-session-id": self.session_id},
                        timeout=5.0,
                    )
            await client.aclose()
        self._queue.put_nowait(None)
