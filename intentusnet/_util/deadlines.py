"""The time limits and the connection cap every listener serves under.

``serve``, ``gateway``, ``ui`` and ``mcp proxy --listen`` run uvicorn with the
same :class:`Deadlines`: uvicorn's own settings close idle keep-alive
connections (``timeout_keep_alive``) and refuse requests past a cap on open
connections (``limit_concurrency``, 503), and :class:`BodyDeadline` (ASGI, in
front of the application) gives a request's body a time to arrive in whole.

Not here: a deadline for a request's *header block*. uvicorn 0.55 has no such
setting, and the application sees a request only once its headers are
complete, so nothing at this level can time them (docs/serve.md, "Deadlines").
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Final, TypeAlias, TypedDict

__all__ = [
    "BODY_SECONDS",
    "KEEP_ALIVE_SECONDS",
    "MAX_CONNECTIONS",
    "BodyDeadline",
    "Deadlines",
    "UvicornLimits",
]

Message: TypeAlias = MutableMapping[str, Any]
Receive: TypeAlias = Callable[[], Awaitable[Message]]
Send: TypeAlias = Callable[[Message], Awaitable[None]]
App: TypeAlias = Callable[[MutableMapping[str, Any], Receive, Send], Awaitable[None]]

#: How long a request's body may take to arrive, from the end of its headers.
BODY_SECONDS: Final = 60.0
#: How long a connection may stay idle between two requests (uvicorn's default).
KEEP_ALIVE_SECONDS: Final = 5
#: Open connections past which a request is answered 503.
MAX_CONNECTIONS: Final = 1000

_DISCONNECT: Final = {"type": "http.disconnect"}
_CLOSE: Final = (b"connection", b"close")


class UvicornLimits(TypedDict):
    """The settings of ``uvicorn.Config`` (and ``uvicorn.run``) that limit clients."""

    timeout_keep_alive: int
    limit_concurrency: int


@dataclass(frozen=True)
class Deadlines:
    """What a listener allows its clients.

    Attributes:
        body_seconds: a request's body must arrive in whole this long after its
            headers, or the request is answered 408 and the connection closed.
        keep_alive_seconds: an idle connection is closed after this long.
        max_connections: with this many connections open, a request is
            answered 503 (uvicorn counts open connections and requests in
            flight, the one asking included).
    """

    body_seconds: float = BODY_SECONDS
    keep_alive_seconds: int = KEEP_ALIVE_SECONDS
    max_connections: int = MAX_CONNECTIONS

    def __post_init__(self) -> None:
        if self.body_seconds <= 0:
            raise ValueError("body_seconds must be positive")
        if self.keep_alive_seconds < 1:
            raise ValueError("keep_alive_seconds must be at least 1")
        if self.max_connections < 2:
            raise ValueError("max_connections must be at least 2")

    def uvicorn_settings(self) -> UvicornLimits:
        """The keyword arguments of ``uvicorn.Config`` (and ``uvicorn.run``)."""
        return {
            "timeout_keep_alive": self.keep_alive_seconds,
            "limit_concurrency": self.max_connections,
        }

    def guard(self, app: Any) -> BodyDeadline:
        """``app`` behind the body deadline."""
        return BodyDeadline(app, self.body_seconds)


class BodyDeadline:
    """ASGI middleware: a request's body arrives within ``seconds`` or is refused.

    The time runs from the call (the headers are complete) until the last part
    of the body. Past it the client is answered 408 with ``Connection: close``
    (uvicorn then closes the connection) and the application is told the client
    is gone (``http.disconnect``), as when a client hangs up; what it still
    sends goes nowhere, and an exception it then raises is one log line
    (``intentusnet.server``, info), not a traceback. Once the body is in,
    ``receive`` is not timed: a streaming answer waits on it for the client's
    disconnect.

    A response begun before an announced body is in carries ``Connection:
    close``: the unread rest of the body is not left to hold the connection.
    Before that response ends, the rest of the body is read (within the same
    deadline) and dropped, so the connection closes cleanly and the client
    reads its answer.
    """

    def __init__(self, app: App, seconds: float) -> None:
        self.app = app
        self.seconds = seconds

    async def __call__(
        self, scope: MutableMapping[str, Any], receive: Receive, send: Send
    ) -> None:
        # asyncio (which imports logging) here, not at the top: `intentusnet
        # --help` imports this module for the options' defaults
        import asyncio

        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        deadline = asyncio.get_running_loop().time() + self.seconds
        body_in = not _has_body(scope)
        started = False
        refused = False

        async def receive_in_time() -> Message:
            nonlocal body_in, refused
            if refused:
                return dict(_DISCONNECT)
            if body_in:
                return await receive()
            try:
                async with asyncio.timeout_at(deadline):
                    message = await receive()
            except TimeoutError:
                refused = True
                if not started:
                    await _refuse(send, self.seconds)
                return dict(_DISCONNECT)
            if message["type"] != "http.request" or not message.get("more_body"):
                body_in = True
            return message

        async def send_unless_refused(message: Message) -> None:
            nonlocal started
            if refused:
                return
            if message["type"] == "http.response.start":
                started = True
                if not body_in:
                    message = dict(message)
                    message["headers"] = [*message.get("headers", ()), _CLOSE]
            elif message["type"] == "http.response.body" and not message.get(
                "more_body"
            ):
                # Before the answer ends and the connection closes, the rest of
                # the body is read (within the deadline) and dropped: a socket
                # closed with unread bytes is reset, and the client may lose the
                # answer (a 404 to a POST, say) to "connection reset".
                while not body_in and not refused:
                    await receive_in_time()
            await send(message)

        try:
            await self.app(scope, receive_in_time, send_unless_refused)
        except Exception as exc:
            if not refused:
                raise
            # The client has its answer; an app that stops on being told the
            # client is gone (Starlette's ClientDisconnect) is no server error.
            import logging

            logging.getLogger("intentusnet.server").info(
                "%s %s: %s; the application stopped with %s",
                scope.get("method"),
                scope.get("path"),
                _late(self.seconds),
                type(exc).__name__,
            )


def _has_body(scope: MutableMapping[str, Any]) -> bool:
    """Whether the request's headers announce a body."""
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (
            name == b"content-length" and value.strip() != b"0"
        ):
            return True
    return False


def _late(seconds: float) -> str:
    return f"the request body did not arrive within {seconds:g} s"


async def _refuse(send: Send, seconds: float) -> None:
    """408, as a problem document, and the connection closes after it."""
    detail = _late(seconds)
    body = (
        b'{"type":"about:blank","title":"Request Timeout","status":408,'
        b'"code":"body_timeout","detail":"' + detail.encode() + b'"}'
    )
    await send(
        {
            "type": "http.response.start",
            "status": 408,
            "headers": [
                (b"content-type", b"application/problem+json"),
                (b"content-length", str(len(body)).encode()),
                _CLOSE,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
