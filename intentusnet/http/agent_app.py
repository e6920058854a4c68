"""``agent_app(handler)``: a remote agent as a small ASGI app.

The app answers what a :class:`~intentusnet.http.remote.RemoteAgent` sends:
``POST /`` with an envelope in wire form. It validates the envelope, calls the
handler as the router would call a local agent — ``handler(envelope, ctx)``,
sync (on a worker thread) or async, returning a JSON object or an
``AgentResponse`` — and answers with an ``AgentResponse`` in wire form. A
handler that raises answers ``AGENT_ERROR`` as data, like a local agent's
fault; the traceback stays in this service's log. ``GET /healthz`` answers
``{"status": "ok"}``. Errors of the request itself are problem documents.

Plain ASGI with no dependency beyond the core: serve it with any ASGI server,
e.g. ``uvicorn module:app``.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Final, TypeAlias, cast

import orjson

from .._util.jsonvalue import JSONObject, check_json, parse_json
from ..envelope import AgentResponse, IntentEnvelope
from ..errors import (
    EnvelopeValidationError,
    IntentusNetError,
    MalformedRequest,
    RequestTooLarge,
    Unauthorized,
)
from ..routing.agents import AgentResult
from .problem import MEDIA_TYPE, document, from_error
from .remote import AGENT_HEADER, ATTEMPT_HEADER, EXECUTION_ID_HEADER, TIMEOUT_HEADER

__all__ = ["AgentApp", "RemoteContext", "agent_app"]

_log = logging.getLogger("intentusnet.agent")

Scope: TypeAlias = MutableMapping[str, object]
Message: TypeAlias = MutableMapping[str, object]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
#: What ``agent_app`` wraps: ``handler(envelope, ctx)``, sync or async.
RemoteHandler: TypeAlias = Callable[
    [IntentEnvelope, "RemoteContext"], AgentResult | Awaitable[AgentResult]
]
_MAX_BODY: Final = 1024 * 1024


class RemoteContext:
    """What a remote agent's handler knows about the execution it serves.

    The same attributes as ``AgentContext`` (but no router): the caller's
    execution id, agent name and attempt number, and its deadline.
    """

    __slots__ = ("agent", "attempt", "deadline", "envelope", "execution_id")

    def __init__(
        self,
        *,
        execution_id: str,
        agent: str,
        attempt: int,
        envelope: IntentEnvelope,
        deadline: float | None,
    ) -> None:
        self.execution_id = execution_id
        self.agent = agent
        self.attempt = attempt
        self.envelope = envelope
        self.deadline = deadline

    @property
    def remaining_ms(self) -> float | None:
        """Milliseconds until the caller gives up, or ``None`` if unbounded."""
        if self.deadline is None:
            return None
        return max(0.0, (self.deadline - time.monotonic()) * 1000.0)


class _Refused(Exception):
    def __init__(self, body: JSONObject) -> None:
        self.body = body


class AgentApp:
    """The ASGI app :func:`agent_app` returns."""

    def __init__(
        self,
        handler: RemoteHandler,
        *,
        api_key: str | None = None,
        max_body_bytes: int = _MAX_BODY,
    ) -> None:
        handle = getattr(handler, "handle", None)
        call = (
            handle if callable(handle) and not inspect.isfunction(handler) else handler
        )
        if not callable(call):
            raise TypeError("agent_app needs a callable or an object with handle()")
        self._call: RemoteHandler = call
        self._is_async = inspect.iscoroutinefunction(call) or (
            inspect.iscoroutinefunction(getattr(call, "__call__", None))  # noqa: B004
        )
        self._digest = None if api_key is None else _digest(api_key)
        self._max_body = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Serve one ASGI connection."""
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        path, method = scope.get("path"), scope.get("method")
        try:
            if path == "/healthz" and method in ("GET", "HEAD"):
                await _send(send, 200, "application/json", b'{"status":"ok"}')
                return
            if path != "/":
                raise _Refused(document(404, "not_found", f"no endpoint {path}"))
            if method != "POST":
                raise _Refused(
                    document(405, "method_not_allowed", "only POST is allowed here")
                )
            self._check_key(scope)
            data = await _read_body(receive, self._max_body)
            if data is None:
                return  # the client went away
            answer = await self._answer(scope, data)
        except (_Refused, IntentusNetError) as exc:
            body = exc.body if isinstance(exc, _Refused) else from_error(exc, str(path))
            status = body["status"]
            assert isinstance(status, int)
            await _send(send, status, MEDIA_TYPE, orjson.dumps(body))
            return
        await _send(send, 200, "application/json", orjson.dumps(answer))

    def _check_key(self, scope: Scope) -> None:
        if self._digest is None:
            return
        given = _header(scope, b"authorization") or ""
        scheme, _, token = given.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(
            _digest(token.strip()), self._digest
        ):
            raise Unauthorized("this agent needs its API key as a bearer token")

    async def _answer(self, scope: Scope, data: bytes) -> JSONObject:
        try:
            value = parse_json(data)
        except ValueError as exc:
            raise MalformedRequest(
                f"the request body is not valid JSON: {exc}"
            ) from None
        envelope = IntentEnvelope.model_validate(value)
        ctx = _context(scope, envelope)
        try:
            if self._is_async:
                result: object = self._call(envelope, ctx)
            else:
                result = await asyncio.to_thread(self._call, envelope, ctx)
            if inspect.isawaitable(result):
                result = await result
        except Exception as exc:
            _log.exception("agent %r failed", ctx.agent)
            kind = type(exc).__name__
            text = str(exc)
            return _error(
                "AGENT_ERROR",
                f"remote agent raised {kind}" + (f": {text}" if text else ""),
                {"exception": kind},
            )
        if isinstance(result, AgentResponse):
            wire = result.to_wire()
            return {k: wire[k] for k in ("status", "payload", "error")}
        if type(result) is dict:
            try:
                check_json(result, "payload")
            except EnvelopeValidationError as exc:
                return _error(
                    "INVALID_RESPONSE", f"the agent returned non-JSON: {exc}", {}
                )
            return {"status": "success", "payload": result, "error": None}
        return _error(
            "INVALID_RESPONSE",
            f"the agent returned {type(result).__name__}; an agent must return a "
            "JSON object (dict) or an AgentResponse",
            {},
        )


def agent_app(
    handler: RemoteHandler,
    *,
    api_key: str | None = None,
    max_body_bytes: int = _MAX_BODY,
) -> AgentApp:
    """Wrap ``handler(envelope, ctx)`` as an ASGI app a ``RemoteAgent`` can call.

    Args:
        handler: a function (sync or async) or an object with ``handle``,
            returning a JSON object or an ``AgentResponse``. Sync handlers run on
            a worker thread.
        api_key: require ``Authorization: Bearer <api_key>`` (compared in
            constant time).
        max_body_bytes: larger envelopes are refused with 413.
    """
    return AgentApp(handler, api_key=api_key, max_body_bytes=max_body_bytes)


def _digest(key: str) -> bytes:
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def _error(code: str, message: str, details: JSONObject) -> JSONObject:
    error: JSONObject = {
        "code": code,
        "message": message,
        "agent": None,
        "retryable": False,
        "details": details,
    }
    return {"status": "error", "payload": None, "error": error}


def _header(scope: Scope, name: bytes) -> str | None:
    headers = cast("list[tuple[bytes, bytes]]", scope.get("headers") or [])
    for key, value in headers:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def _context(scope: Scope, envelope: IntentEnvelope) -> RemoteContext:
    attempt = _header(scope, ATTEMPT_HEADER.lower().encode()) or "1"
    timeout = _header(scope, TIMEOUT_HEADER.lower().encode())
    deadline = None
    if timeout and timeout.isdigit():
        deadline = time.monotonic() + int(timeout) / 1000
    return RemoteContext(
        execution_id=_header(scope, EXECUTION_ID_HEADER.lower().encode()) or "",
        agent=_header(scope, AGENT_HEADER.lower().encode()) or "",
        attempt=int(attempt) if attempt.isdigit() else 1,
        envelope=envelope,
        deadline=deadline,
    )


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = cast(bytes, message.get("body", b""))
        size += len(chunk)
        if size > limit:
            raise RequestTooLarge(f"the request body is larger than {limit} bytes")
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _send(send: Send, status: int, media_type: str, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", media_type.encode()),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return
