"""One recorded MCP session, loaded: its answers, and when each is outdated.

The step index (``store.step_index``) says which sessions hold a call; this is
what a session says of it once its record is loaded (and so verified): the
step the index named, whether it holds an answer, whether the server outdated
that answer later in the same session (a ``notifications/*/list_changed``, a
``notifications/resources/updated``), the notifications recorded during it
(progress, log messages), when
the answer came (for a ``ttlMs`` hint), and in which protocol revision it was
asked (:meth:`RecordedSession.revision`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from ..._util.jsonvalue import JSONObject, JSONValue, as_str
from ..._util.time import parse_utc
from ...record.model import ExecutionRecord
from ...routing.execution import jsonish
from ...steps.view import RecordedStep, record_steps
from .jsonrpc import ANSWERED_WITH, ASKED_BY, FROM_SERVER, OUTDATES, STREAM_CLOSED

#: The steps of notifications the server sent (during a call, or outdating).
NOTIFICATIONS: Final = "mcp:notifications/"

__all__ = ["ANONYMOUS", "Asker", "RecordedSession", "answered", "outdated", "private"]

#: The steps nested in a call that a replay sends the client again, in order
#: (and where the server closed the call's event stream, to close it there too).
_SENT: Final = (NOTIFICATIONS, FROM_SERVER, STREAM_CLOSED)
#: Seconds since the epoch, now: ``time.time`` (a test's own clock).
Clock = Callable[[], float]
_TTL: Final = "ttlMs"


@dataclass(frozen=True, slots=True)
class Asker:
    """Who asks a call, as far as matching it goes.

    Attributes:
        version: the protocol revision it is asked in: the one its ``_meta``
            names (a stateless 2026-07-28 request), else the one its session
            negotiated (``initialize``); ``None`` when neither says.
        stateless: the revision is the one the request names (``_meta``).
        client: who the client is, for ``cacheScope: "private"`` answers:
            ``None`` for the local user (a stdio client: it can read the
            store itself), on ``--listen`` the SHA-256 of the credential its
            request came with (``sha256:HEX``), or ``"anonymous"`` (every
            request with none: one client to the proxy, as to the upstream).
        continues: for a later round of a multi-round-trip request, the
            canonical hash of its ``inputResponses`` and ``requestState``
            (:func:`~.jsonrpc.continuation`); ``None`` for a first round.
    """

    version: str | None = None
    stateless: bool = False
    client: str | None = None
    continues: str | None = None


#: The client of a ``--listen`` request that came with no credential.
ANONYMOUS: Final = "anonymous"


def private(step: RecordedStep) -> bool:
    """The step's result says ``cacheScope: "private"`` (only an explicit one)."""
    output = step.output
    return isinstance(output, dict) and output.get("cacheScope") == "private"


def answered(step: RecordedStep) -> bool:
    """The step holds the server's answer: a result, or a JSON-RPC error.

    A call the client cancelled, or one the upstream never answered (it
    exited), holds no answer to give again.
    """
    if step.outcome == "success":
        return True
    error = step.error or {}
    return step.outcome == "error" and error.get("type") == "UpstreamError"


def ttl_ms(step: RecordedStep) -> int | None:
    """The ``ttlMs`` hint of the step's recorded result, if it carries one."""
    output = step.output
    ttl = output.get(_TTL) if isinstance(output, dict) else None
    return ttl if type(ttl) is int and ttl >= 0 else None


def outdated(name: str, args: JSONValue, notice: str, params: JSONValue) -> bool:
    """The answer to step ``name`` (``args``) is outdated by the server's ``notice``.

    ``notice`` is a notification's step name (``mcp:notifications/...``) and
    ``params`` its parameters.
    """
    if name not in OUTDATES.get(notice, ()):
        return False
    if name != "mcp:resources/read":
        return True
    uri = params.get("uri") if isinstance(params, dict) else None
    return isinstance(args, dict) and args.get("uri") == uri


class RecordedSession:
    """A loaded session record, as the answers it holds.

    Args:
        record: the session's record (loaded, so verified).
    """

    def __init__(self, record: ExecutionRecord) -> None:
        self.record = record
        self.execution_id = record.execution_id
        self.steps: dict[int, RecordedStep] = {}
        #: the notifications that outdate answers: (step number, name, params)
        self._notices: list[tuple[int, str, JSONValue]] = []
        #: what the server sent during each call, in order: (step name, params)
        self._sent: dict[int, list[tuple[str, JSONObject]]] = defaultdict(list)
        #: each call's ``mcp:asked-by`` (its revision, its client), if any
        self._asked_by: dict[int, JSONObject] = {}
        #: each error answer's ``mcp:answered-with`` (its status, its data)
        self._detail: dict[int, JSONObject] = {}
        #: the revision the session negotiated (its ``initialize``'s answer)
        self.version: str | None = None
        for step in record_steps(record):
            self.steps[step.number] = step
            if step.name in OUTDATES:  # of the session, or on a listen stream
                self._notices.append((step.number, step.name, step.args))
            if step.parent is not None:  # what the server sent during a call
                if step.name.startswith(_SENT) and isinstance(step.args, dict):
                    self._sent[step.parent].append((step.name, step.args))
                elif step.name == ASKED_BY and isinstance(step.args, dict):
                    self._asked_by[step.parent] = step.args
                elif step.name == ANSWERED_WITH and isinstance(step.args, dict):
                    self._detail[step.parent] = step.args
            elif step.name == "mcp:initialize" and self.version is None:
                output = step.output if step.ok else None
                if isinstance(output, dict):
                    self.version = as_str(output.get("protocolVersion"))
        created_us = parse_utc(record.header.created_utc) or 0
        self._opened = created_us / 1e6
        self._events = {event.seq: event for event in record.events}

    def answer(self, number: int, name: str, args_hash: str | None) -> RecordedStep:
        """The top-level step ``number``, if it is a call ``name`` (``args_hash``).

        Raises:
            LookupError: the record holds no such step (the index was wrong).
        """
        step = self.steps.get(number)
        if (
            step is None
            or step.parent is not None
            or step.name != name
            or args_hash not in (None, step.args_hash)
        ):
            raise LookupError(f"{self.execution_id} has no step {number} {name}")
        return step

    def revision(self, step: RecordedStep) -> tuple[str | None, bool | None]:
        """The revision ``step`` was asked in, and whether its request named it.

        The revision recorded with the call (``mcp:asked-by``: the one its
        ``_meta`` named, or none), else the one its session negotiated
        (``(version, False)``). Neither: a record from before revisions were
        recorded, of a session with no ``initialize`` (stateless requests):
        ``(None, None)``.
        """
        asked = self._asked_by.get(step.number, {})
        if "protocolVersion" in asked:
            found = asked["protocolVersion"]
            return (found, True) if isinstance(found, str) else (None, False)
        if self.version is not None:
            return self.version, False
        return None, None

    def detail(self, step: RecordedStep) -> JSONObject:
        """What ``step``'s error answer came with: ``status``, ``data`` (or ``{}``)."""
        return self._detail.get(step.number, {})

    def continues(self, step: RecordedStep) -> str | None:
        """The round ``step`` was asked in (``Asker.continues``): None for a first."""
        given = self._asked_by.get(step.number, {}).get("continues")
        return None if given is None else jsonish(given)[1]

    def client(self, step: RecordedStep) -> str | None:
        """The client ``step`` was asked by (see :class:`Asker`); ``None``: local."""
        return as_str(self._asked_by.get(step.number, {}).get("client"))

    def outdated(self, step: RecordedStep) -> bool:
        """The server outdated ``step``'s answer later in this session."""
        return any(
            number > step.number and outdated(step.name, step.args, notice, params)
            for number, notice, params in self._notices
        )

    def expired(self, step: RecordedStep, now: float) -> bool:
        """The answer's ``ttlMs`` has run out at ``now`` (epoch seconds).

        The answer came when its step ended. ``ttlMs: 0`` is stale at once; an
        answer without the hint never expires (a notification outdates it, see
        :meth:`outdated`). Only a step the server answered here is judged: one
        served from another record is as old as that one (:meth:`origin`).
        """
        ttl = ttl_ms(step)
        event = None if step.end_seq is None else self._events.get(step.end_seq)
        if ttl is None or event is None:
            return False
        return now >= self._opened + event.at_ms / 1000 + ttl / 1000

    def origin(self, step: RecordedStep) -> tuple[str, int] | None:
        """The record and step a served step's answer came from; None if live."""
        if step.source != "record" or step.end_seq is None:
            return None
        event = self._events.get(step.end_seq)
        served = None if event is None else event.data.get("servedFrom")
        if not isinstance(served, dict):
            return None
        source, number = served.get("executionId"), served.get("step")
        if type(source) is str and type(number) is int:
            return source, number
        return None

    def sent(self, number: int) -> list[tuple[str, JSONObject]]:
        """The notifications and requests the server sent during step ``number``.

        In order; each is its step name (``mcp:notifications/progress``,
        ``mcp:from-server:sampling/createMessage``, ...) and its recorded
        parameters (a progress notification's less its token, a request's
        less its ``_meta``).
        """
        return self._sent.get(number, [])
