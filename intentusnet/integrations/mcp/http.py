"""The upstream over MCP's streamable HTTP transport (``--upstream-url``).

Each message is POSTed on its own task, so a slow call never holds up the
next message; the server answers a request with one JSON body or with a
``text/event-stream`` of messages (progress notifications, then the answer),
and both feed one queue that the session reads. The routing headers MCP asks
for (``Mcp-Session-Id``, ``MCP-Protocol-Version``, ``Mcp-Method``,
``Mcp-Name``) are taken from the messages themselves. Headers the user gives
(``--header``, credentials included) are sent and never recorded.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
from collections.abc import Mapping
from typing import Final

import httpx
import orjson

from ..._util.jsonvalue import JSONValue
from .jsonrpc import UPSTREAM_GONE, error, is_request, parse

__all__ = ["HttpUpstream"]

_NAMED: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
_SAFE: Final = re.compile(r"[\x20-\x7E]*")


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
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.url = url
        self.headers = dict(headers or {})
        self.session_id: str | None = None
        self.version: str | None = None
        self._transport = transport
        self._client: httpx.AsyncClient | None = None
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._posts: set[asyncio.Task[None]] = set()

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
        meta = params.get("_meta") if isinstance(params, dict) else None
        version = meta.get(_VERSION_KEY) if isinstance(meta, dict) else None
        if isinstance(version, str):
            headers["mcp-protocol-version"] = version
        elif self.version is not None and method != "initialize":
            headers["mcp-protocol-version"] = self.version
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
                kind = response.headers.get("content-type", "").partition(";")[0]
                if kind.strip() == "text/event-stream":
                    await self._events(response, parsed)
                elif kind.strip() == "application/json":
                    self._answer(await response.aread(), parsed)
                elif response.status_code >= 400 and is_request(parsed):
                    await response.aread()
                    self._failed(parsed, f"HTTP {response.status_code}")
        except httpx.HTTPError as exc:
            if is_request(parsed):
                self._failed(parsed, f"{type(exc).__name__}: {exc}")

    def _answer(self, body: bytes, sent: JSONValue) -> None:
        try:
            value = parse(body)
        except ValueError:
            return
        for one in value if isinstance(value, list) else [value]:
            if (
                isinstance(one, dict)
                and isinstance(sent, dict)
                and sent.get("method") == "initialize"
            ):
                found = one.get("result")
                version = (
                    found.get("protocolVersion") if isinstance(found, dict) else None
                )
                if isinstance(version, str):
                    self.version = version
            self._queue.put_nowait(orjson.dumps(one))

    async def _events(self, response: httpx.Response, sent: JSONValue) -> None:
        data: list[str] = []
        async for line in response.aiter_lines():
            if line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
            elif not line and data:
                text = "\n".join(data)
                data.clear()
                if text.strip():
                    self._answer(text.encode(), sent)
        if data:
            self._answer("\n".join(data).encode(), sent)

    def _failed(self, request: JSONValue, why: str) -> None:
        request_id = request.get("id") if isinstance(request, dict) else None
        text = f"the upstream MCP server at {self.url} did not answer: {why}"
        self._queue.put_nowait(orjson.dumps(error(request_id, UPSTREAM_GONE, text)))

    async def stop(self) -> None:
        """End the server's session (``DELETE``) and close the client."""
        for post in list(self._posts):
            post.cancel()
        await asyncio.gather(*self._posts, return_exceptions=True)
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
