"""The seams of the router: what it needs from the parts built on top of it.

The router never imports the replay cache (``cache/``) or the re-run machinery
(``steps/``); they implement the Protocols here, and arrive through the
router's constructor (``ResponseCache``) or through the options of one call
(``ExecutionOptions``, whose ``cassette`` is a ``Cassette``). An
``ExecutionObserver`` (the OpenTelemetry integration's) is added to a router
with ``IntentRouter.add_observer`` and told what each execution does.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from .._util.jsonvalue import JSONObject, JSONValue

if TYPE_CHECKING:
    from ..envelope import AgentResponse, ErrorInfo, IntentEnvelope
    from ..store.protocol import ExecutionStore
    from .redact import Redaction

__all__ = [
    "LIVE",
    "REPLAY_ERROR",
    "SERVE",
    "Cassette",
    "ExecutionObserver",
    "ExecutionOptions",
    "ObservedCall",
    "ObservedExecution",
    "ObservedStep",
    "RecordedCall",
    "ResponseCache",
    "StepDecision",
    "StepEnd",
]


class ResponseCache(Protocol):
    """Answers an envelope from an earlier record instead of running agents."""

    def bind(self, store: ExecutionStore) -> None:
        """Serve the records of ``store``, the router's own."""

    def serve(
        self, env: IntentEnvelope, execute: Callable[[IntentEnvelope], AgentResponse]
    ) -> AgentResponse:
        """Answer ``env`` from a record, or by ``execute(env)``."""

    async def aserve(
        self,
        env: IntentEnvelope,
        execute: Callable[[IntentEnvelope], Awaitable[AgentResponse]],
    ) -> AgentResponse:
        """The async ``serve``."""


#: How a re-run answers one step call: with the recorded output, by raising the
#: recorded failure again, or by calling it.
SERVE: Final = "serve"
REPLAY_ERROR: Final = "replay_error"
LIVE: Final = "live"


class RecordedCall(Protocol):
    """A recorded step, as a re-run serves it."""

    @property
    def number(self) -> int:
        """The step's number in its record."""

    @property
    def outcome(self) -> str:
        """``success``, ``error``, ``cancelled`` or ``unfinished``."""

    @property
    def output(self) -> JSONValue:
        """The recorded output."""

    @property
    def output_hash(self) -> str | None:
        """The canonical hash of ``output``."""

    @property
    def error(self) -> JSONObject | None:
        """``{"type", "message"}`` of a failed step."""

    @property
    def traceback(self) -> str | None:
        """The recorded traceback of a failure."""

    @property
    def child_execution_id(self) -> str | None:
        """The child execution of a ``route:`` step."""


class StepDecision(Protocol):
    """What a re-run does with one step call."""

    @property
    def action(self) -> str:
        """``SERVE``, ``REPLAY_ERROR`` or ``LIVE``."""

    @property
    def recorded(self) -> RecordedCall | None:
        """The recorded step matched, if any."""

    @property
    def miss(self) -> bool:
        """Runs live although no recording could answer it."""

    @property
    def overridden(self) -> bool:
        """Served with an output the re-run was given instead of the recorded one."""

    @property
    def position(self) -> int | None:
        """The number to record the step under; ``None``: the next one.

        A resumed execution's journal keeps the interrupted record's numbers
        (added in 0.1.0).
        """

    @property
    def served_from(self) -> str | None:
        """The record holding ``recorded``, if not the cassette's own."""


@dataclass(frozen=True, slots=True)
class StepEnd:
    """How one step of a re-run ended, as its ``Cassette`` is told.

    Attributes:
        number: the step's number in the new record.
        name: the step's name.
        args_hash: canonical hash of its arguments.
        source: ``live`` (called), ``record`` (served) or ``miss``.
        decision: what the cassette decided for it, if it was asked.
        outcome: ``success``, ``error`` or ``cancelled``.
    """

    number: int
    name: str
    args_hash: str
    source: str
    decision: StepDecision | None
    outcome: str


class Cassette(Protocol):
    """A record's steps, answering the step calls of its re-run."""

    @property
    def execution_id(self) -> str:
        """The record being re-run."""

    @property
    def attention(self) -> JSONObject | None:
        """Why the execution must be parked ``needs_attention``, or ``None``.

        Set by a resumed execution's journal (a side effect in doubt,
        nondeterminism); the router then records ``ATTENTION_NEEDED`` and
        answers with a ``NEEDS_ATTENTION`` error (added in 0.1.0).
        """

    def decide(
        self, name: str, args: JSONValue, args_hash: str, *, side_effect: bool
    ) -> StepDecision:
        """Match one step call and say what to do.

        Raises:
            CassetteMiss: no recording answers it and it may not run live.
            SideEffectMismatch: a side-effect step is needed with other args.
        """

    def patch(self, marker: str, args_hash: str, *, new: bool) -> StepDecision | None:
        """Match the marker step of a patch check (``ctx.patched``) here.

        Returns the decision for the marker: served when the record holds it
        at this point, or run live (recorded: the new path) when the record
        ends before this point and ``new``; ``None`` when the record reached
        this point without it (the old path: nothing is recorded), or it ends
        before and not ``new`` (``ctx.deprecate_patch``). Added in 0.1.0.

        Raises:
            CassetteMiss: the execution is parked.
        """

    def ended(self, end: StepEnd) -> None:
        """Note how a step of the re-run ended."""

    def child(self, execution_id: str) -> Cassette | None:
        """The cassette of a recorded child execution, to re-run it.

        ``None`` when it cannot be loaded: the child then runs live.
        """


@dataclass(frozen=True, slots=True)
class ExecutionOptions:
    """What one routing call tells the execution it opens, beyond the envelope.

    A child intent (``ctx.route``) and a re-run pass them; a caller's
    ordinary call needs none. An execution with options is never answered from
    the replay cache: it must really run, under the id and links it was given.

    Attributes:
        execution_id: the id to give the execution (a child's is chosen by its
            parent, which records it before the child starts).
        parent_execution_id: the execution routing this one, if any.
        received: extra ``INTENT_RECEIVED`` data (``replayOf`` for a re-run).
        store: record into this store instead of the router's own.
        cassette: answers the execution's step calls (a re-run).
        redaction: the parent's redaction: a child starts knowing the secrets
            its parent has seen.
        recorded: called with the answer as recorded (redacted), for a caller
            that keeps answers (a cache) or records them (a parent's step);
            routing returns the answer unredacted.
        origin_execution_id: the first execution of a resume chain, whose
            id ``ctx.idempotency_key`` is derived from (added in 0.1.0).
        opened: called with the execution's id once its record is open in the
            store (its header, envelope and ``INTENT_RECEIVED`` written: all a
            resumer needs), before any agent runs; not called when nothing is
            recorded. For an asynchronous submit, which answers as soon as it
            is called, and a resume, which links the record it resumes to it
            then. If it raises, the record is closed unfinished and the
            exception propagates: no agent runs. With an idempotency key
            (the only option allowed with one), it is called with the id of
            the execution the key names, once that one's record is open,
            whoever runs it (added in 0.1.0).
        envelope_hash: the hash of the envelope as recorded, when the caller
            computed it already (a keyed call claims its key under it), so it
            is not computed twice; ``None``: hashed when the record opens
            (added in 0.1.0).
    """

    execution_id: str | None = None
    parent_execution_id: str | None = None
    received: JSONObject | None = None
    store: ExecutionStore | None = None
    cassette: Cassette | None = None
    redaction: Redaction | None = None
    recorded: Callable[[AgentResponse], None] | None = None
    origin_execution_id: str | None = None
    opened: Callable[[str], None] | None = None
    envelope_hash: str | None = None


@dataclass(frozen=True, slots=True)
class ObservedExecution:
    """One execution, as an ``ExecutionObserver`` is told about it.

    Attributes:
        execution_id: the execution's id (its record's); for a cache hit, the
            id the answer carries (the record it was served from).
        parent_execution_id: the execution whose agent routed this one
            (``ctx.route``), if any.
        intent: the intent's name.
        intent_version: the intent's version.
        envelope_hash: the envelope's hash, when it was computed (a router
            with a store or a cache).
        cache: ``"hit"`` (answered from a record: no agent ran), ``"miss"``
            (the replay cache was asked and the agents ran) or ``"bypass"``
            (the cache was not read: the router has none, the envelope says
            ``bypass``, or the execution is a child intent or a re-run).
        started_ns: ``time.time_ns()`` when routing began.

    Added in 0.1.0.
    """

    execution_id: str
    parent_execution_id: str | None
    intent: str
    intent_version: str
    envelope_hash: str | None
    cache: str
    started_ns: int


@dataclass(frozen=True, slots=True)
class ObservedStep:
    """One recorded step, as an ``ExecutionObserver`` is told about it.

    Attributes:
        execution_id: the execution whose agent called it.
        step: its number in the execution's record.
        name: what was called, e.g. ``crm.lookup`` or ``route:INTENT``.
        agent: the agent that called it.
        attempt: that agent's attempt number.
        parent: the step it was called inside, if any.
        child_execution_id: the child execution a ``route:`` step opens.

    Added in 0.1.0.
    """

    execution_id: str
    step: int
    name: str
    agent: str
    attempt: int
    parent: int | None
    child_execution_id: str | None


@dataclass(frozen=True, slots=True)
class ObservedCall:
    """One HTTP call through a recording transport, as an observer is told about it.

    Attributes:
        record_id: the call's own record (the one it was recorded in or
            served from), if any.
        execution_id: the execution whose agent made the call, if an agent
            of an observed router made it.
        attempt: that agent's attempt number.
        method: the HTTP method.
        url: the URL as recorded (credential parameters left out).
        status: the response's status code.
        content_type: the response's ``content-type``, if any.
        request_body: the request's body, as sent.
        response_body: the response's body (empty for a response passed
            through to the client as an event stream while it arrives).
        cache: ``"hit"``, ``"miss"`` or ``"bypass"``, as the transport's
            ``x-intentusnet-cache`` header says.
        started_ns: ``time.time_ns()`` when the transport got the request.
        ended_ns: ``time.time_ns()`` when it had the response.

    Added in 0.1.0.
    """

    record_id: str | None
    execution_id: str | None
    attempt: int | None
    method: str
    url: str
    status: int
    content_type: str | None
    request_body: bytes
    response_body: bytes
    cache: str
    started_ns: int
    ended_ns: int


class ExecutionObserver(Protocol):
    """Told what a router's executions do, as they do it (tracing, metrics).

    Added to a router with ``IntentRouter.add_observer``; the OpenTelemetry
    integration is one. Calls come from whichever thread does the work (the
    caller's, a worker thread running a sync agent, the router's event
    loop), so an observer keys what it keeps by execution id, attempt and
    step number, never by thread. A cache hit is told as an execution started
    (when the lookup began) and ended at once, with no attempts. Steps are
    told only for executions that record (a router with a store). A routing
    call cancelled or interrupted is told as ended with a ``CANCELLED`` error
    answer nobody receives (the caller gets the exception; the record is left
    incomplete); its attempts and steps are not told as ended.

    Observing never changes an outcome: what an observer raises is logged
    (the ``intentusnet.observers`` logger) and counted
    (``IntentRouter.observer_errors``; a transport's own observers on
    ``observer_errors`` of the transport), and the execution, the step and
    the HTTP call go on as if it had not (routing/observing.py).

    Two more methods are optional (they are not part of the Protocol, so an
    observer without them still is one; the router looks for them with
    ``getattr`` when an execution starts):

    - ``attempt_scope(execution_id: str, attempt: int) ->
      AbstractContextManager[object] | None``: what to enter around the agent's
      call of that attempt (after ``attempt_started``);
    - ``step_scope(execution_id: str, step: int) ->
      AbstractContextManager[object] | None``: what to enter around the
      function of a recorded step (after ``step_started``).

    The router calls the method and enters what it returns (``None``:
    nothing) in the thread or task where that code runs, a sync agent's
    worker thread or an async agent's task, and leaves it there when the
    code returns or raises, so a context variable set on entry (a tracer's
    current span) is what the code sees. A method or a context manager that
    raises is logged and counted like any observer error: the code runs
    without that scope (the scope cannot swallow the code's exception
    either). An observer that has neither method costs nothing more.

    Added in 0.1.0.
    """

    def execution_started(self, execution: ObservedExecution) -> None:
        """An execution began (its record, if any, is open)."""

    def execution_ended(
        self, execution: ObservedExecution, response: AgentResponse
    ) -> None:
        """An execution answered with ``response`` (its record is closed)."""

    def attempt_started(self, execution_id: str, agent: str, attempt: int) -> None:
        """Agent ``agent`` is about to run as attempt ``attempt``."""

    def attempt_ended(
        self,
        execution_id: str,
        agent: str,
        attempt: int,
        outcome: str,
        error: ErrorInfo | None,
    ) -> None:
        """An attempt ended: ``success``, ``error``, ``timeout`` or ``cancelled``."""

    def step_started(self, step: ObservedStep) -> None:
        """A recorded step began (inside step ``step.parent``, if not ``None``)."""

    def step_ended(self, step: ObservedStep, outcome: str, error: str | None) -> None:
        """The step ended: ``success``, ``error`` or ``cancelled``.

        ``error`` is the failure's message, if any.
        """

    def call_made(self, call: ObservedCall) -> None:
        """A recording transport answered an HTTP call (live or from a record)."""
