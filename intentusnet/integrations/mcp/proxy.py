"""``intentusnet mcp proxy``: one MCP session recorded, replayed or cached.

A recording session is one execution of intent ``mcp.session``, routed by an
:class:`~intentusnet.IntentRouter` whose one agent pumps the session; each call
is a step of it (``ctx.astep``), so the record verifies, replays, diffs and is
inspected like any other. A ``cache`` session is routed with the upstream's
recorded calls (:mod:`.calls`, from :mod:`.sources`) as its cassette: recorded
calls are served (``source: record`` in the new record), the rest and every
side effect are forwarded. A ``replay`` session opens no record and starts no
upstream: the recorded calls answer everything.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
from collections.abc import Sequence
from enum import StrEnum
from typing import TYPE_CHECKING, Protocol
from urllib.parse import urlsplit

import orjson

from ..._util.jsonvalue import JSONObject, JSONValue
from ...envelope import AgentResponse, IntentEnvelope
from ...routing.agents import AgentContext
from ...routing.redact import Redactor
from ...routing.router import IntentRouter
from ...routing.seams import ExecutionOptions
from .calls import RecordedCalls
from .session import Endpoint, Session, UpstreamExited
from .sources import INTENT

if TYPE_CHECKING:
    from ...store.protocol import ExecutionStore

__all__ = [
    "INTENT",
    "ProxyMode",
    "SessionIncomplete",
    "Upstream",
    "http_envelope",
    "record_session",
    "replay_session",
    "session_envelope",
]


class ProxyMode(StrEnum):
    """What the proxy does with a call (added in 0.1.0)."""

    RECORD = "record"
    REPLAY = "replay"
    CACHE = "cache"


class Upstream(Endpoint, Protocol):
    """The server's side: an endpoint that is started and stopped."""

    async def start(self) -> None:
        """Start it (a process, an HTTP client)."""

    async def stop(self) -> object:
        """Stop it; every wait bounded."""


def http_envelope(url: str) -> IntentEnvelope:
    """The envelope of a session with the streamable-HTTP server at ``url``.

    The URL is recorded without its user info, query and fragment (they may
    hold a credential); headers are never recorded.
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    payload: dict[str, JSONValue] = {
        "transport": "streamable-http",
        "server": f"{parts.scheme}://{host}{port}{parts.path}",
    }
    return IntentEnvelope.model_validate(
        {"intent": {"name": INTENT}, "payload": payload}
    )


def session_envelope(argv: Sequence[str]) -> IntentEnvelope:
    """The envelope of a session with the upstream ``argv``.

    The record names the program (its base name) and the SHA-256 of the whole
    command line, never the arguments themselves (they may hold a token), and
    never the environment. Equal commands give equal envelope hashes, which is
    how ``--record last`` finds a session of the same server.
    """
    digest = hashlib.sha256(orjson.dumps(list(argv))).hexdigest()
    payload: dict[str, JSONValue] = {
        "transport": "stdio",
        "server": os.path.basename(argv[0]) if argv else None,
        "commandSha256": digest,
    }
    return IntentEnvelope.model_validate(
        {"intent": {"name": INTENT}, "payload": payload}
    )


async def record_session(
    store: ExecutionStore,
    client: Endpoint,
    upstream: Upstream,
    envelope: IntentEnvelope,
    *,
    side_effects: set[str],
    calls: RecordedCalls | None = None,
    redactor: Redactor | None = None,
) -> AgentResponse:
    """Record one session through ``upstream``.

    Args:
        store: where the session's record goes.
        client: the MCP client's side.
        upstream: the server's side (started by the session's agent).
        envelope: the session's envelope (``session_envelope``,
            ``http_envelope``).
        side_effects: tools never served from ``calls``.
        calls: in ``cache`` mode, the recorded calls that answer
            (:func:`~.sources.recorded_calls`); the calls this session
            forwards answer its next identical ones too.
        redactor: redacts the calls' arguments and results before they are
            hashed and recorded (docs/redaction.md).

    Returns:
        The execution's answer: its payload counts the requests, those
        forwarded and those served.

    Raises:
        SessionIncomplete: the upstream exited mid-session; the record holds
            every call made until then and reads ``incomplete``.
        OSError: the upstream could not be started.
    """
    router = IntentRouter(store=store, redactor=redactor)
    cut: list[SessionIncomplete] = []

    @router.agent(INTENT, name="mcp-proxy")
    async def proxy(envelope: IntentEnvelope, ctx: AgentContext) -> JSONObject:
        if calls is not None:
            calls.own(store, ctx.execution_id)
        session = Session(
            client,
            upstream,
            calls=calls,
            run_step=ctx.astep,
            side_effects=side_effects,
        )
        try:
            return await session.run()
        except UpstreamExited as exc:
            # The session was cut short, not answered: the execution is
            # cancelled, so its record is closed unfinished (incomplete), with
            # every call made until then.
            cut.append(SessionIncomplete(ctx.execution_id, session.counts(), exc))
            route.cancel()
            return session.counts()

    options = None if calls is None else ExecutionOptions(cassette=calls)
    await upstream.start()
    try:
        route = asyncio.ensure_future(router.route(envelope, options=options))
        try:
            return await route
        except asyncio.CancelledError:
            if not cut:
                raise  # cancelled from outside
            raise cut[0] from None
    finally:
        try:
            await upstream.stop()
        finally:
            router.close()


class SessionIncomplete(Exception):
    """The upstream exited mid-session: the record is left ``incomplete``.

    ``--mode replay --force`` (``force=True``) serves the calls it holds.

    Attributes:
        execution_id: the session's record.
        counts: the requests, those forwarded and those served until then.
    """

    def __init__(
        self, execution_id: str, counts: JSONObject, cause: UpstreamExited
    ) -> None:
        super().__init__(f"{cause}; record {execution_id} left incomplete")
        self.execution_id = execution_id
        self.counts = counts


async def replay_session(
    client: Endpoint,
    calls: RecordedCalls,
    *,
    side_effects: set[str],
    redactor: Redactor | None = None,
) -> JSONObject:
    """Answer one session from recorded ``calls`` alone; nothing is started or written.

    ``redactor``: the one the sessions were recorded with, so that calls with
    redacted arguments match.
    """
    session = Session(
        client,
        None,
        calls=calls,
        run_step=None,
        side_effects=side_effects,
        redactor=redactor,
    )
    return await session.run()
