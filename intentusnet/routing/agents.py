"""Agents: what they are, how they are registered, and how they are found.

An agent is a function ``(envelope, ctx)`` or an object with such a ``handle``
method, sync or async, returning a JSON object (``dict``) or an ``AgentResponse``.
The registry orders the candidates of an intent deterministically: priority
ascending, then name.
"""

from __future__ import annotations

import inspect
import random
import threading
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from typing import (
    TYPE_CHECKING,
    Annotated,
    Final,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
    runtime_checkable,
)

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .._util.flow import Flow, adrive, drive
from .._util.jsonvalue import JSONObject, JSONValue, check_json
from ..envelope import AgentResponse, IntentEnvelope, IntentRef
from ..errors import AgentRegistrationError
from .children import Router, child_route
from .execution import (
    Execution,
    PendingStep,
    active_step,
    open_pending,
    record_value,
    stepping,
)
from .guard import AttemptGuard
from .observing import Observers
from .seams import ExecutionObserver
from .waits import sleep, wait_for

if TYPE_CHECKING:
    # imported by the steps that retry: a route that retries none never loads them
    from .retries import Backoff, Retrying, RetryOn

__all__ = [
    "NOW_STEP",
    "RANDOM_STEP",
    "SNAPSHOT_PREFIX",
    "UUID4_STEP",
    "Agent",
    "AgentContext",
    "AgentDefinition",
    "AgentHandler",
    "AgentRegistry",
    "AgentResult",
    "RegisteredAgent",
    "add_secrets",
    "current_context",
    "make_definition",
    "open_step",
    "running_observers",
]

AgentResult: TypeAlias = JSONObject | AgentResponse
AgentHandler: TypeAlias = Callable[
    [IntentEnvelope, "AgentContext"], AgentResult | Awaitable[AgentResult]
]
_T = TypeVar("_T")
_J = TypeVar("_J", bound=JSONValue)
#: Taken only to make an attempt's side-effect guard, once per attempt at most.
_GUARD_LOCK: Final = threading.Lock()
#: A snapshot is recorded as a step named ``snapshot:NAME`` (added in 0.1.0).
SNAPSHOT_PREFIX: Final = "snapshot:"
#: ``ctx.now()``, ``ctx.uuid4()`` and ``ctx.random()`` are recorded as steps
#: so named, with no arguments (added in 0.1.0).
NOW_STEP: Final = "intentusnet.now"
UUID4_STEP: Final = "intentusnet.uuid4"
RANDOM_STEP: Final = "intentusnet.random"

#: The attempt running in this context; the router sets it around every agent
#: call (in worker threads too), so ``@step`` functions find their execution.
CURRENT: ContextVar[AgentContext | None] = ContextVar(
    "intentusnet_agent_context", default=None
)


def current_context() -> AgentContext | None:
    """Return the ``AgentContext`` of the agent running in this context, if any.

    Set for the whole agent call: through ``await``, in nested calls, and in
    the router's worker threads. A thread the agent starts itself sees it only
    if started under ``contextvars.copy_context().run``. Added in 0.1.0.
    """
    return CURRENT.get()


def running_observers() -> Observers | None:
    """The observers of the execution whose agent runs in this context, if any.

    Guarded (observing.py): a recording transport tells them about the calls
    the agent makes, and what they raise is counted on the agent's router.
    """
    ctx = CURRENT.get()
    execution = None if ctx is None else ctx._execution
    return None if execution is None else execution.observers


@runtime_checkable
class Agent(Protocol):
    """An object that handles intents; ``handle`` may be sync or async."""

    def handle(
        self, envelope: IntentEnvelope, ctx: AgentContext
    ) -> AgentResult | Awaitable[AgentResult]:
        """Handle one intent and return a JSON object or an ``AgentResponse``."""


class AgentDefinition(BaseModel):
    """Who an agent is and which intents it handles.

    Args:
        name: unique within a router; letters, digits and ``_ . : -``.
        intents: the intents it handles; a plain string means version ``1.0``.
        version: the agent's own version, recorded with its answers.
        priority: lower runs first among the candidates of an intent.
        description: free text for people.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")]
    intents: tuple[IntentRef, ...] = Field(min_length=1)
    version: str = "1.0"
    priority: int = 100
    description: str | None = None

    @field_validator("intents", mode="before")
    @classmethod
    def _intents_from_strings(cls, value: object) -> object:
        if isinstance(value, str | IntentRef):
            value = [value]
        if isinstance(value, Sequence):
            return [IntentRef(name=v) if isinstance(v, str) else v for v in value]
        return value


class AgentContext:
    """What an agent knows about the execution it runs in.

    Attributes:
        execution_id: the id of this execution (and of its record).
        agent: the name of the agent being run.
        attempt: 1-based number of this attempt within the execution.
        envelope: the envelope being handled.
        deadline: ``time.monotonic()`` value after which the router gives up on
            this attempt, or ``None`` when there is no timeout.
        router: the router running the agent.
        guard: the attempt's side-effect guard: when the router stops the
            attempt (timeout, a lost race), a running side-effect step is let
            finish and a new one is refused (added in 0.1.0).
    """

    __slots__ = (
        "_execution",
        "_guard",
        "agent",
        "attempt",
        "deadline",
        "envelope",
        "execution_id",
        "router",
    )

    def __init__(
        self,
        execution_id: str,
        agent: str,
        attempt: int,
        envelope: IntentEnvelope,
        deadline: float | None,
        router: Router,
        execution: Execution | None = None,
    ) -> None:
        self.execution_id = execution_id
        self.agent = agent
        self.attempt = attempt
        self.envelope = envelope
        self.deadline = deadline
        self.router = router
        # the execution's recorder and step state; None: steps are plain calls
        self._execution = execution
        self._guard: AttemptGuard | None = None  # made when first needed

    @property
    def guard(self) -> AttemptGuard:
        """The attempt's side-effect guard (made on first use: most need none)."""
        guard = self._guard
        if guard is None:
            with _GUARD_LOCK:  # the agent's thread and the router's may race here
                guard = self._guard
                if guard is None:
                    guard = self._guard = AttemptGuard(self.agent, self.attempt)
        return guard

    @property
    def observers(self) -> tuple[ExecutionObserver, ...]:
        """The observers of the router running this execution (``add_observer``).

        A recording transport tells them about the HTTP calls the agent makes.
        Added in 0.1.0.
        """
        execution = self._execution
        return () if execution is None else execution.observers.members

    @property
    def idempotency_key(self) -> str:
        """A key for the far side to de-duplicate this call; a resume keeps it.

        Inside a recorded step (``ctx.step``, ``@step``): ``<origin>:<step>``,
        where ``<origin>`` is the id of the execution's first run (a resumed
        execution keeps it) and ``<step>`` the step's number, which a resume
        keeps too. Elsewhere: ``<origin>``. Pass it to an API that accepts an
        idempotency key, and declare the step ``idempotent=True``. Added in
        0.1.0.
        """
        execution = self._execution
        if execution is None:
            return self.execution_id
        number = active_step(execution)
        origin = execution.origin_id
        return origin if number is None else f"{origin}:{number}"

    @property
    def remaining_ms(self) -> float | None:
        """Milliseconds left before the attempt times out, or ``None``."""
        if self.deadline is None:
            return None
        return max(0.0, (self.deadline - time.monotonic()) * 1000.0)

    def step(
        self,
        name: str,
        args: Mapping[str, object] | None,
        fn: Callable[..., _T],
        *,
        side_effect: bool = False,
        idempotent: bool = False,
        retries: int = 0,
        backoff: Backoff | None = None,
        retry_on: RetryOn | None = None,
    ) -> _T:
        """Call ``fn(**args)`` as a recorded step and return what it returns.

        The record gets ``STEP_START``/``STEP_END`` lines with ``name``, the
        args and their canonical hash, the output (or the error and its
        traceback) and the duration; values that are not JSON are recorded as
        their ``repr`` and make the step not replayable. In a re-run the record
        answers the call instead (docs/debugging.md). Added in 0.1.0.

        Args:
            name: what is called, e.g. ``crm.lookup``.
            args: keyword arguments for ``fn``; recorded and matched on re-run.
            fn: the call to make.
            side_effect: the call changes the world: a re-run never makes it
                again but serves it from the record, and a timeout or a lost
                ``PARALLEL`` race never cuts it in half (it is let finish, or
                refused if the attempt was stopped before it started).
            idempotent: making the call twice does no harm (the far side
                de-duplicates, e.g. by ``ctx.idempotency_key``): a resumed
                execution runs a side effect that never ended again instead
                of parking ``needs_attention`` (added in 0.1.0).
            retries: run it again up to this many times when it fails, each
                attempt recorded (``routing/retries.py``; docs/flow-control.md);
                a side effect only when ``idempotent`` (added in 0.1.0).
            backoff: the wait before each retry (``exponential()`` by
                default); a ``Retry-After`` of a 429/503 answer is honoured.
            retry_on: the errors retried: exception classes, or a predicate
                of the error (every ``Exception`` by default).

        Raises:
            CassetteMiss: in a strict re-run, the record holds no such call.
            SideEffectRefused: a side effect, after its attempt was stopped.
            ExecutionWaiting: a retry's wait is long: the execution waits.
        """
        if retries or retry_on is not None or backoff is not None:
            retrying = self._retrying(
                name, side_effect, idempotent, retries, backoff, retry_on
            )
            once = partial(
                self.step,
                name,
                args,
                fn,
                side_effect=side_effect,
                idempotent=idempotent,
            )
            from .retries import retried

            return cast(_T, drive(retried(retrying, once, time.sleep)))
        run = partial(drive, self._stepping(name, args, fn, side_effect, idempotent))
        return cast(_T, self.guard.run(name, run) if side_effect else run())

    async def astep(
        self,
        name: str,
        args: Mapping[str, object] | None,
        fn: Callable[..., Awaitable[_T]],
        *,
        side_effect: bool = False,
        idempotent: bool = False,
        retries: int = 0,
        backoff: Backoff | None = None,
        retry_on: RetryOn | None = None,
    ) -> _T:
        """Await ``fn(**args)`` as a recorded step: the async ``step``.

        Retried as ``step`` is (a wait in place is an ``asyncio.sleep``).
        Added in 0.1.0.
        """
        if retries or retry_on is not None or backoff is not None:
            retrying = self._retrying(
                name, side_effect, idempotent, retries, backoff, retry_on
            )
            import asyncio  # loaded by async agents only

            aonce = partial(
                self.astep,
                name,
                args,
                fn,
                side_effect=side_effect,
                idempotent=idempotent,
            )
            from .retries import retried

            return cast(_T, await adrive(retried(retrying, aonce, asyncio.sleep)))
        run = partial(adrive, self._stepping(name, args, fn, side_effect, idempotent))
        return cast(_T, await (self.guard.arun(name, run) if side_effect else run()))

    def _stepping(
        self,
        name: str,
        args: Mapping[str, object] | None,
        fn: Callable[..., object],
        side_effect: bool,
        idempotent: bool,
    ) -> Flow[object]:
        """Step ``name``'s flow; a side effect is refused in a stopped attempt."""
        kwargs = dict(args) if args else {}
        # a side effect is never cut in half by a timeout or a lost race
        guard = self.guard if side_effect else None

        def call() -> object:
            if guard is not None:
                guard.check(name)
            return fn(**kwargs)

        ex, agent, attempt = self._execution, self.agent, self.attempt
        return stepping(ex, agent, attempt, name, kwargs, call, side_effect, idempotent)

    def _retrying(
        self,
        name: str,
        side_effect: bool,
        idempotent: bool,
        retries: int,
        backoff: Backoff | None,
        retry_on: RetryOn | None,
    ) -> Retrying:
        """A step's retry options, checked (``step``, ``astep``)."""
        from .retries import Retrying, check_retries, exponential

        check_retries(retries, side_effect, idempotent, retry_on)
        return Retrying(
            self._execution,
            name,
            self.agent,
            self.attempt,
            retries,
            backoff or exponential(),
            retry_on,
        )

    def sleep(self, duration: float | timedelta) -> None:
        """Sleep ``duration`` (seconds or a ``timedelta``), durably.

        Recorded as the step ``intentusnet.sleep`` whose output is the due
        time, so a resume never sleeps again a sleep that ended. A sleep
        shorter than ``DURABLE_WAIT_S`` (1 s) waits in place; a longer one
        lets the execution go: its record is closed ``waiting`` and the caller
        is answered ``WAITING``; recovery, in any process sharing the store,
        resumes it when due (docs/flow-control.md). Added in 0.1.0.

        Raises:
            TypeError, ValueError: ``duration`` is not a duration >= 0.
            ExecutionWaiting: the execution waits durably (let it pass).
        """
        time.sleep(sleep(self._execution, self.agent, self.attempt, duration))

    async def asleep(self, duration: float | timedelta) -> None:
        """The async ``sleep``: a short wait in place is an ``asyncio.sleep``.

        Added in 0.1.0.
        """
        import asyncio  # loaded by async agents only (a sync route never loads it)

        await asyncio.sleep(sleep(self._execution, self.agent, self.attempt, duration))

    def wait_for(
        self, name: str, *, timeout: float | timedelta | None = None
    ) -> JSONValue:
        """The payload of the next signal ``name`` sent to this execution.

        A signal sent before the wait began is kept for it. With none yet,
        the execution waits durably (as ``sleep``) until one is sent
        (``intentusnet signal``, ``router.signal``, ``POST
        /v1/executions/{id}/signals/{name}``) or ``timeout`` passes.
        Recorded as the steps ``intentusnet.wait_for`` and
        ``intentusnet.signal`` (docs/flow-control.md). Added in 0.1.0.

        Raises:
            InvalidSignal: ``name`` is not a signal name.
            WaitTimedOut: ``timeout`` passed with no signal.
            SignalRefused: the router's store keeps no signals.
            ExecutionWaiting: the execution waits durably (let it pass).
        """
        return wait_for(self._execution, self.agent, self.attempt, name, timeout)

    def snapshot(self, name: str, state: _J) -> _J:
        """Record ``state`` under ``name`` and return the state to go on with.

        Use it as ``state = ctx.snapshot("scored", state)``. In a run, it
        records ``state`` (a JSON value) and returns it. In a re-run, the record
        answers, as for a step: a re-run started with ``from_snapshot=NAME``
        (``intentusnet rerun ID --from-snapshot NAME``) serves every step before
        it and returns the recorded state here, restored, then runs the rest
        live; a strict re-run returns the recorded state too. It is recorded
        as a step named ``snapshot:NAME`` whose output is the state; a re-run of
        a record made before the call existed just returns ``state``.
        Added in 0.1.0.

        Raises:
            EnvelopeValidationError: ``state`` is not JSON (names the path).
        """
        check_json(state, f"snapshot {name!r}")
        return cast(_J, self._value_step(SNAPSHOT_PREFIX + name, lambda: state))

    def patched(self, name: str) -> bool:
        """Whether this execution takes the new path of a code change ``name``.

        Put a change of an agent's steps behind it (``if ctx.patched("x"):
        new else: old``) and executions recorded before the deploy finish on
        the old path instead of parking with ``nondeterminism``. True for an
        execution that reaches it on code that has the patch: recorded as the
        step ``patch:NAME`` (no arguments, output ``true``). A resume (or a
        re-run) whose record holds that marker here gets True; one whose
        record reached this point without it gets False, and nothing is
        recorded (the old path, as recorded); one whose record ends before
        this point gets True, and the marker. Only the first check of ``name``
        in an execution asks the record; later ones repeat its answer. See
        docs/durability.md ("Operating"). Added in 0.1.0.

        Raises:
            TypeError: ``name`` is not a string.
            ValueError: ``name`` is empty or blank.
        """
        checked = _patch_name(name)
        execution = self._execution
        session = None if execution is None else execution.steps()
        if session is None:
            return True  # nothing is recorded: today's code
        return session.patched(self.agent, self.attempt, checked, new=True)

    def deprecate_patch(self, name: str) -> None:
        """Retire patch ``name`` once no execution recorded without it remains.

        Replaces ``if ctx.patched(name): new else: old`` by ``new`` preceded by
        this call. It records nothing and requires nothing: where a resumed
        (or re-run) execution's record holds the marker ``patch:NAME`` at this
        point, the marker is served (so the steps after it line up); anywhere
        else it does nothing. Once no record holding the marker can be resumed
        either, remove the call. Added in 0.1.0.

        Raises:
            TypeError: ``name`` is not a string.
            ValueError: ``name`` is empty or blank.
        """
        checked = _patch_name(name)
        execution = self._execution
        session = None if execution is None else execution.steps()
        if session is not None:
            session.patched(self.agent, self.attempt, checked, new=False)

    def now(self) -> datetime:
        """The current time, a timezone-aware UTC ``datetime``, as a step.

        Recorded as the step ``intentusnet.now`` (no arguments; the output is
        the ISO 8601 text, microseconds and ``+00:00`` included), so a re-run
        reads the recorded time: the n-th call gets the n-th recorded value.
        Sync in async agents too: it never waits. Added in 0.1.0.
        """
        text = self._value_step(NOW_STEP, lambda: datetime.now(UTC).isoformat())
        return datetime.fromisoformat(str(text))

    def uuid4(self) -> uuid.UUID:
        """A random UUID (version 4), as a step.

        Recorded as the step ``intentusnet.uuid4`` (the output is the UUID's
        text), so a re-run mints the recorded ids again. Added in 0.1.0.
        """
        return uuid.UUID(str(self._value_step(UUID4_STEP, lambda: str(uuid.uuid4()))))

    def random(self) -> float:
        """A random float in ``[0.0, 1.0)`` (``random.random()``), as a step.

        Recorded as the step ``intentusnet.random`` (the output is the float),
        so a re-run draws the recorded numbers again. Added in 0.1.0.
        """
        value = self._value_step(RANDOM_STEP, random.random)
        return float(cast(float, value))  # 0.0 may come back from JSON as 0

    def _value_step(self, name: str, read: Callable[[], JSONValue]) -> JSONValue:
        """Record ``read()`` as step ``name`` (no arguments); a re-run serves it."""
        ex, agent, attempt = self._execution, self.agent, self.attempt
        return cast(JSONValue, record_value(ex, agent, attempt, name, {}, read))

    def route(
        self, envelope: IntentEnvelope | Mapping[str, JSONValue]
    ) -> AgentResponse:
        """Route a child intent; it gets its own record, linked to this one.

        The child's record names this execution as its parent, and this record
        names the child (a ``route:INTENT`` step). Blocking: from a coroutine
        use :meth:`aroute`. Added in 0.1.0.
        """
        return drive(self._child(envelope, blocking=True))

    async def aroute(
        self, envelope: IntentEnvelope | Mapping[str, JSONValue]
    ) -> AgentResponse:
        """Route a child intent: the async ``route``. Added in 0.1.0."""
        return await adrive(self._child(envelope, blocking=False))

    def _child(
        self, envelope: IntentEnvelope | Mapping[str, JSONValue], *, blocking: bool
    ) -> Flow[AgentResponse]:
        ex, agent, attempt = self._execution, self.agent, self.attempt
        return child_route(
            self.router,
            ex,
            agent,
            attempt,
            self.execution_id,
            envelope,
            blocking=blocking,
        )


def add_secrets(ctx: AgentContext, values: Iterable[str]) -> None:
    """Name secrets of the running execution, to be replaced wherever they appear.

    For the parts that make agents of their own (the httpx transports name a
    request's keys, so that an error message quoting its URL is recorded
    without them). Nothing happens when the execution redacts nothing.
    """
    execution = ctx._execution
    redaction = None if execution is None else execution.redaction
    if redaction is not None:
        redaction.add_texts(values)


def open_step(ctx: AgentContext, name: str, args: JSONObject) -> PendingStep | None:
    """Open step ``name`` of ``ctx``'s execution for a call that ends later.

    For the parts that record calls outliving the function that makes them
    (the HTTP transports: a streamed body is read after the transport
    returned). ``None`` when the execution records no steps.

    Raises:
        CassetteMiss: in a re-run, no recording answers the call.
    """
    return open_pending(ctx._execution, ctx.agent, ctx.attempt, name, args)


def _patch_name(name: object) -> str:
    """``name`` checked as a patch's name (``ctx.patched``)."""
    if not isinstance(name, str):
        raise TypeError(
            f"a patch name must be a string, not {type(name).__name__}: {name!r}"
        )
    if not name.strip():
        raise ValueError(f"a patch name must not be empty or blank: {name!r}")
    return name


@dataclass(frozen=True, slots=True)
class RegisteredAgent:
    """An agent definition with its callable, as the router runs it."""

    definition: AgentDefinition
    call: AgentHandler
    is_async: bool
    #: the definition's name, kept at hand: the router reads it on every attempt
    name: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "name", self.definition.name)


def _as_callable(handler: AgentHandler | Agent) -> AgentHandler:
    if isinstance(handler, Agent) and not inspect.isfunction(handler):
        return handler.handle
    if callable(handler):
        return handler
    raise AgentRegistrationError(
        f"an agent must be callable or have a handle() method, got "
        f"{type(handler).__name__}"
    )


def _is_async(call: object) -> bool:
    if inspect.iscoroutinefunction(call):
        return True
    dunder = getattr(call, "__call__", None)  # noqa: B004 -- async __call__ objects
    return inspect.iscoroutinefunction(dunder)


class AgentRegistry:
    """Agents by name, and the ordered candidates of each intent.

    Thread-safe: registration takes a lock; lookups read immutable snapshots.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, RegisteredAgent] = {}
        self._by_intent: dict[tuple[str, str], tuple[RegisteredAgent, ...]] = {}
        #: bumped on every change, so callers can cache derived decisions
        self.generation = 0

    def register(
        self, definition: AgentDefinition, handler: AgentHandler | Agent
    ) -> RegisteredAgent:
        """Add an agent.

        Raises:
            AgentRegistrationError: the name is taken, or the handler is not
                callable.
        """
        call = _as_callable(handler)
        entry = RegisteredAgent(definition, call, _is_async(call))
        with self._lock:
            if definition.name in self._by_name:
                raise AgentRegistrationError(
                    f"an agent named {definition.name!r} is already registered"
                )
            by_name = {**self._by_name, definition.name: entry}
            by_intent = dict(self._by_intent)
            for ref in definition.intents:
                key = (ref.name, ref.version)
                found = (*by_intent.get(key, ()), entry)
                by_intent[key] = tuple(
                    sorted(found, key=lambda a: (a.definition.priority, a.name))
                )
            self._by_name, self._by_intent = by_name, by_intent
            self.generation += 1
        return entry

    def get(self, name: str) -> RegisteredAgent | None:
        """Return the agent with that name, or ``None``."""
        return self._by_name.get(name)

    def candidates(self, intent: IntentRef) -> tuple[RegisteredAgent, ...]:
        """Agents registered for the intent's name and version, in routing order."""
        return self._by_intent.get((intent.name, intent.version), ())

    def intents(self) -> list[tuple[str, str]]:
        """Every (intent name, version) some agent handles, sorted."""
        return sorted(self._by_intent)

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name


def make_definition(
    intent: str | IntentRef | Sequence[str | IntentRef],
    *,
    name: str,
    version: str,
    priority: int,
    description: str | None,
) -> AgentDefinition:
    """Build an ``AgentDefinition``, turning validation errors into ours."""
    try:
        return AgentDefinition(
            name=name,
            intents=intent,  # strings are converted
            version=version,
            priority=priority,
            description=description,
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise AgentRegistrationError(
            f"invalid agent definition {name!r}: {where}: {first['msg']}"
        ) from None
