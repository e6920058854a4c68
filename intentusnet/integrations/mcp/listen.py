"""The proxy's own streamable-HTTP endpoint (``--listen``): the client side over HTTP.

One proxy run serves one MCP session at ``http://HOST:PORT/mcp`` (loopback by
default). A POSTed request is answered with an event stream: the messages
related to it (its progress notifications, by progress token) and then its
answer. A POSTed notification or response is accepted (202). ``GET`` is not
offered (405), so a message from the server that belongs to no open request
goes on the newest open request's stream, or is dropped when none is open.
Every answer carries an ``Mcp-Session-Id``; the session, and the proxy with
it, ends with a client's ``DELETE`` or with SIGINT or SIGTERM (clients of the
stateless 2026 revision send no ``DELETE``): every client served until then
is in the one record. Needs ``uvicorn`` and ``starlette`` (the
``server`` extra; the ``mcp`` extra brings them too).
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from typing import Final

import orjson

from ..._util.jsonvalue import JSONValue
from .jsonrpc import INVALID_REQUEST, PARSE_ERROR, error, is_request, parse

__all__ = ["HttpClient"]

PATH: Final = "/mcp"


def _key(value: JSONValue) -> bytes:
    return orjson.dumps(value)


class HttpClient:
    """The MCP client's side, as a streamable-HTTP server on ``host:port``.

    Args:
        host: the address to listen on (keep it loopback: there is no auth).
        port: the port; 0 picks a free one (see ``port`` once started).
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self.host = host
        self.port = port
        self.session_id = secrets.token_hex(16)
        self._inbox: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._streams: dict[bytes, asyncio.Queue[bytes | None]] = {}
        self._tokens: dict[bytes, bytes] = {}
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
            app,
            host=self.host,
            port=self.port,
            log_level="warning",
            lifespan="off",
        )
        server = uvicorn.Server(config)
        self._server = server
        self._task = asyncio.create_task(server.serve())
        while not server.started:
            if self._task.done():
                self._task.result()  # the port could not be bound: raise why
            await asyncio.sleep(0.01)
        sockets = [s for srv in server.servers for s in srv.sockets]
        self.port = int(sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        """Where clients connect."""
        return f"http://{self.host}:{self.port}{PATH}"

    async def receive(self) -> bytes | None:
        """The client's next message; ``None`` once the session is over."""
        return await self._inbox.get()

    def end(self) -> None:
        """End the session (SIGINT, SIGTERM): calls in flight still finish."""
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
            params = parsed.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            owner = self._tokens.get(_key(token)) if token is not None else None
            stream = self._streams.get(owner) if owner is not None else None
        if stream is None and self._streams:
            stream = self._streams[next(reversed(self._streams))]
        if stream is not None:
            stream.put_nowait(message)

    async def close(self) -> None:
        """Stop listening."""
        server = self._server
        if server is not None:
            server.should_exit = True  # type: ignore[attr-defined]
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=5.0)
            self._task.cancel()

    # -- HTTP --------------------------------------------------------------------

    async def _endpoint(self, request: object) -> object:
        from starlette.requests import Request
        from starlette.responses import JSONResponse, Response, StreamingResponse

        assert isinstance(request, Request)
        headers = {"mcp-session-id": self.session_id}
        if request.method == "GET":
            return Response(status_code=405, headers={"allow": "POST, DELETE"})
        if request.method == "DELETE":
            self._inbox.put_nowait(None)
            return Response(status_code=200)
        body = await request.body()
        try:
            message = parse(body)
        except ValueError as exc:
            problem = error(None, PARSE_ERROR, f"Parse error: {exc}")
            return JSONResponse(problem, status_code=400, headers=headers)
        if isinstance(message, list) or not isinstance(message, dict):
            problem = error(None, INVALID_REQUEST, "Invalid Request: one message")
            return JSONResponse(problem, status_code=400, headers=headers)
        if not is_request(message):
            self._inbox.put_nowait(body)
            return Response(status_code=202, headers=headers)
        key = _key(message.get("id"))
        stream: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._streams[key] = stream
        params = message.get("params")
        meta = params.get("_meta") if isinstance(params, dict) else None
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        if token is not None:
            self._tokens[_key(token)] = key
        self._inbox.put_nowait(body)

        async def events() -> AsyncIterator[bytes]:
            try:
                while (item := await stream.get()) is not None:
                    yield b"event: message\ndata: " + item + b"\n\n"
            finally:
                self._streams.pop(key, None)
                if token is not None:
                    self._tokens.pop(_key(token), None)

        return StreamingResponse(
            events(), media_type="text/event-stream", headers=headers
        )
