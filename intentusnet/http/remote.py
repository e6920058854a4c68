"""Remote agents: agents that live behind HTTP, routed like local ones.

``RemoteAgent(name, url, intents=[...])`` is an agent whose ``handle`` POSTs the
envelope (wire form) to ``url`` and reads the answer: an ``AgentResponse`` in
wire form, or any other JSON object, which is taken as the payload. Every way
the call can fail becomes an ``ErrorInfo`` on an error response, never an
exception, so it is recorded and feeds the FALLBACK strategy like any agent
fault:

==========================================  =====================  =========
what happened                               code                   retryable
==========================================  =====================  =========
connection refused or dropped, DNS failure  ``AGENT_UNAVAILABLE``  yes
connect timeout                             ``AGENT_UNAVAILABLE``  yes
no full answer within the timeout           ``AGENT_TIMEOUT``      yes
status 408 or 504                           ``AGENT_TIMEOUT``      yes
any other status outside 2xx                ``AGENT_UNAVAILABLE``  5xx, 429
body not JSON, not an object, too large     ``INVALID_RESPONSE``   no
==========================================  =====================  =========

All remote agents share one ``httpx.AsyncClient`` (connection pooling) per event
loop, kept by a :class:`RemotePool`. The service closes the pools when it shuts
down; a program routing with ``route_intent`` closes them with
``RemotePool.close()`` (or ``close_pools()``) before closing its router.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Final

import httpx
import orjson
from pydantic import ValidationError

from .._util.jsonvalue import JSONObject, parse_json
from ..envelope import AgentResponse, ErrorCode, ErrorInfo, IntentEnvelope, IntentRef
from ..errors import AgentRegistrationError
from ..routing.agents import AgentContext, make_definition

if TYPE_CHECKING:
    from ..routing.agents import AgentDefinition

__all__ = [
    "AGENT_HEADER",
    "ATTEMPT_HEADER",
    "EXECUTION_ID_HEADER",
    "TIMEOUT_HEADER",
    "RemoteAgent",
    "RemotePool",
    "aclose_pools",
    "close_pools",
    "default_pool",
]

#: Headers a remote agent receives with each envelope.
EXECUTION_ID_HEADER: Final = "X-Intentusnet-Execution-Id"
ATTEMPT_HEADER: Final = "X-Intentusnet-Attempt"
AGENT_HEADER: Final = "X-Intentusnet-Agent"
#: Milliseconds the caller will wait, when it is bounded.
TIMEOUT_HEADER: Final = "X-Intentusnet-Timeout-Ms"
#: The keys of an ``AgentResponse`` in wire form.
_RESPONSE_KEYS: Final = frozenset({"status", "payload", "error", "metadata"})
_EXCERPT: Final = 500


class RemotePool:
    """One shared ``httpx.AsyncClient`` per event loop, for remote agents.

    An ``AsyncClient`` belongs to the event loop it first runs on, so the pool
    keeps one per loop: the service's loop, and the router's background loop
    when ``route_intent`` runs async agents.

    Args:
        max_connections: at most this many connections per loop.
        max_keepalive: idle connections kept open per loop.
        transport: use this transport (e.g. ``httpx.MockTransport`` in tests)
            instead of real connections; it must not belong to a loop.
        trust_env: let httpx read proxy settings from the environment.
    """

    def __init__(
        self,
        *,
        max_connections: int = 100,
        max_keepalive: int = 20,
        transport: httpx.AsyncBaseTransport | None = None,
        trust_env: bool = True,
    ) -> None:
        self._limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_keepalive
        )
        self._transport = transport
        self._trust_env = trust_env
        self._lock = threading.Lock()
        self._clients: dict[asyncio.AbstractEventLoop, httpx.AsyncClient] = {}
        _pools.add(self)

    def client(self) -> httpx.AsyncClient:
        """The client of the running event loop (made on first use)."""
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None or client.is_closed:
            with self._lock:
                client = self._clients.get(loop)
                if client is not None and not client.is_closed:
                    return client
                client = httpx.AsyncClient(
                    limits=self._limits,
                    transport=self._transport,
                    trust_env=self._trust_env,
                    follow_redirects=False,
                )
                self._clients[loop] = client
        return client

    async def aclose(self) -> None:
        """Close the running loop's client; the pool stays usable."""
        loop = asyncio.get_running_loop()
        with self._lock:
            client = self._clients.pop(loop, None)
        if client is not None:
            await client.aclose()

    def close(self) -> None:
        """Close every client from outside their loops (call before they stop).

        A client whose loop runs in another thread is closed on that loop; one
        whose loop has already closed is dropped.
        """
        try:
            current: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            current = None
        with self._lock:
            clients = list(self._clients.items())
            self._clients.clear()
        for loop, client in clients:
            if loop.is_closed() or loop is current:
                continue
            if loop.is_running():
                future = asyncio.run_coroutine_threadsafe(client.aclose(), loop)
                future.result(timeout=10)
            else:
                loop.run_until_complete(client.aclose())


_pools: weakref.WeakSet[RemotePool] = weakref.WeakSet()
#: The pool remote agents use unless given another.
default_pool = RemotePool()


async def aclose_pools() -> None:
    """Close every pool's client of the running event loop."""
    for pool in list(_pools):
        await pool.aclose()


def close_pools() -> None:
    """Close every pool's clients from outside their loops (``RemotePool.close``)."""
    for pool in list(_pools):
        pool.close()


class RemoteAgent:
    """An agent behind HTTP.

    Register it with ``router.register(agent.definition, agent)``.

    Args:
        name: the agent's name in the router.
        url: where to POST envelopes (``http`` or ``https``).
        intents: the intents it handles; a plain string means version ``1.0``.
        timeout_ms: give up on an answer after this long (the envelope's own
            timeout, when shorter, wins).
        headers: sent with every call, e.g. ``{"Authorization": "Bearer ..."}``.
        priority: lower runs first among the candidates of an intent.
        version: the agent's version, recorded with its answers.
        description: free text.
        pool: the client pool; :data:`default_pool` unless given.
        max_response_bytes: a larger answer is ``INVALID_RESPONSE``.

    Raises:
        AgentRegistrationError: the name, intents or URL are not valid.
    """

    def __init__(
        self,
        name: str,
        url: str,
        *,
        intents: str | IntentRef | Sequence[str | IntentRef],
        timeout_ms: int = 30_000,
        headers: Mapping[str, str] | None = None,
        priority: int = 100,
        version: str = "1.0",
        description: str | None = None,
        pool: RemotePool | None = None,
        max_response_bytes: int = 16 * 1024 * 1024,
    ) -> None:
        try:
            parsed = httpx.URL(url)
        except httpx.InvalidURL as exc:
            raise AgentRegistrationError(f"remote agent {name!r}: {exc}") from None
        if parsed.scheme not in ("http", "https") or not parsed.host:
            raise AgentRegistrationError(
                f"remote agent {name!r}: url must be an http(s) URL, got {url!r}"
            )
        if timeout_ms <= 0:
            raise AgentRegistrationError(
                f"remote agent {name!r}: timeout_ms must be positive"
            )
        self.definition: AgentDefinition = make_definition(
            intents,
            name=name,
            version=version,
            priority=priority,
            description=description,
        )
        self.name = name
        self.url = url
        self.timeout_ms = timeout_ms
        self.headers = dict(headers or {})
        self.pool = pool or default_pool
        self.max_response_bytes = max_response_bytes

    def __repr__(self) -> str:
        return f"RemoteAgent({self.name!r}, {self.url!r})"

    async def handle(
        self, envelope: IntentEnvelope, ctx: AgentContext
    ) -> AgentResponse | JSONObject:
        """POST the envelope and turn the answer (or the failure) into a result."""
        timeout_ms = float(self.timeout_ms)
        remaining = ctx.remaining_ms
        headers = {
            **self.headers,
            "Content-Type": "application/json",
            "Accept": "application/json",
            EXECUTION_ID_HEADER: ctx.execution_id,
            ATTEMPT_HEADER: str(ctx.attempt),
            AGENT_HEADER: self.name,
        }
        if remaining is not None:
            timeout_ms = min(timeout_ms, remaining)
            headers[TIMEOUT_HEADER] = str(int(timeout_ms))
        seconds = timeout_ms / 1000
        body = orjson.dumps(envelope.to_wire())
        client = self.pool.client()
        try:
            async with asyncio.timeout(seconds):
                status, data = await self._post(client, body, headers, seconds)
        except (TimeoutError, httpx.ReadTimeout, httpx.WriteTimeout, httpx.PoolTimeout):
            return self._fail(
                ErrorCode.AGENT_TIMEOUT,
                f"no answer within {timeout_ms:g} ms",
                retryable=True,
                details={"timeoutMs": timeout_ms},
            )
        except httpx.TransportError as exc:
            return self._fail(
                ErrorCode.AGENT_UNAVAILABLE,
                f"cannot reach {self.url}: {type(exc).__name__}: {exc}",
                retryable=True,
                details={"exception": type(exc).__name__},
            )
        except _TooLarge:
            return self._fail(
                ErrorCode.INVALID_RESPONSE,
                f"the answer is larger than {self.max_response_bytes} bytes",
            )
        if not 200 <= status < 300:
            return self._status_error(status, data)
        return self._result(data)

    async def _post(
        self,
        client: httpx.AsyncClient,
        body: bytes,
        headers: dict[str, str],
        seconds: float,
    ) -> tuple[int, bytes]:
        async with client.stream(
            "POST", self.url, content=body, headers=headers, timeout=seconds
        ) as response:
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > self.max_response_bytes:
                    raise _TooLarge
                chunks.append(chunk)
            return response.status_code, b"".join(chunks)

    def _result(self, data: bytes) -> AgentResponse | JSONObject:
        try:
            value = parse_json(data)
        except ValueError as exc:
            return self._fail(
                ErrorCode.INVALID_RESPONSE,
                f"the answer is not JSON ({exc})",
                details={"body": _excerpt(data)},
            )
        if not isinstance(value, dict):
            return self._fail(
                ErrorCode.INVALID_RESPONSE,
                f"the answer must be a JSON object, got {type(value).__name__}",
                details={"body": _excerpt(data)},
            )
        if value.get("status") not in ("success", "error") or not (
            value.keys() <= _RESPONSE_KEYS
        ):
            return value  # a payload
        try:
            answer = AgentResponse.model_validate(
                {k: v for k, v in value.items() if k != "metadata"}
            )
        except ValidationError as exc:
            first = exc.errors(include_url=False)[0]
            where = ".".join(str(part) for part in first["loc"])
            return self._fail(
                ErrorCode.INVALID_RESPONSE,
                f"the answer is not a valid AgentResponse: {where}: {first['msg']}",
            )
        if answer.error is not None:
            # The router knows this agent by its local name.
            error = answer.error.model_copy(update={"agent": self.name})
            answer = answer.model_copy(update={"error": error})
        return answer

    def _status_error(self, status: int, data: bytes) -> AgentResponse:
        timeout = status in (408, 504)
        return self._fail(
            ErrorCode.AGENT_TIMEOUT if timeout else ErrorCode.AGENT_UNAVAILABLE,
            f"answered HTTP {status}",
            retryable=timeout or status >= 500 or status == 429,
            details={"status": status, "body": _excerpt(data)},
        )

    def _fail(
        self,
        code: ErrorCode,
        message: str,
        *,
        retryable: bool = False,
        details: JSONObject | None = None,
    ) -> AgentResponse:
        error = ErrorInfo(
            code=code,
            message=f"remote agent {self.name!r}: {message}",
            agent=self.name,
            retryable=retryable,
            details={"url": self.url, **(details or {})},
        )
        return AgentResponse(status="error", error=error)


class _TooLarge(Exception):
    pass


def _excerpt(data: bytes) -> str:
    text = data[:_EXCERPT].decode("utf-8", "replace")
    return text + ("..." if len(data) > _EXCERPT else "")
