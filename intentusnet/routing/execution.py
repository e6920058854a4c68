"""One execution's state: its id, its recorder, and its steps.

``Execution`` is what the router carries through one execution. Its
``StepSession`` numbers and records the steps the agents call (``ctx.step``,
``@step``, ``ctx.route``): a step opens with :meth:`StepSession.open`, which
numbers it, asks the re-run's cassette (if any) what to do and writes
``STEP_START``; it closes with :meth:`~StepSession.serve`,
:meth:`~StepSession.succeeded`, :meth:`~StepSession.failed` or
:meth:`~StepSession.routed`, which write ``STEP_END``. :func:`stepping` is the
flow of one step call; :func:`open_pending` opens a
:class:`PendingStep`, one whose end is written later by whoever sees the call
end (a streamed HTTP response read to its end). :meth:`StepSession.patched`
answers ``ctx.patched``, recording its marker step ``patch:NAME`` when the
execution takes the patch. The event data is described in docs/records.md.
"""

from __future__ import annotations

import builtins
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from contextvars import ContextVar, Token
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final, TypeAlias, TypeVar, cast

from .._util.flow import Flow, drive
from .._util.jsonvalue import JSONObject, JSONValue, copy_json
from .._util.time import ms_since
from ..errors import CassetteMiss, EnvelopeValidationError, ReplayedStepError
from ..hashing import canonical_json, hash_bytes
from ..record.model import EventType
from . import scopes
from .observing import Observers
from .seams import (
    LIVE,
    REPLAY_ERROR,
    Cassette,
    ObservedExecution,
    ObservedStep,
    StepDecision,
    StepEnd,
)
from .waiting import WaitState

if TYPE_CHECKING:
    from ..envelope import AgentResponse
    from ..store.protocol import ExecutionStore
    from .cancel import CancelFlag
    from .recorder import Recorder
    from .redact import Redaction

__all__ = [
    "PATCH_PREFIX",
    "Execution",
    "OpenStep",
    "PendingStep",
    "StepSession",
    "active_step",
    "enter_step",
    "jsonish",
    "leave_step",
    "open_pending",
    "record_value",
    "replayed_error",
    "stepping",
]

_T = TypeVar("_T")
#: A ``repr`` stored for a value that is not JSON is cut to this many characters.
MAX_REPR: Final = 2000
#: Frames of this file (which calls the step) are left out of step tracebacks.
_PACKAGE: Final = os.path.dirname(os.path.dirname(__file__)) + os.sep

_Active: TypeAlias = "tuple[StepSession, int] | None"
#: The step running in this context, if any, and the session it belongs to:
#: a step called from inside it is recorded as its child.
_ACTIVE: ContextVar[_Active] = ContextVar("intentusnet_active_step", default=None)
#: Replayed-error classes by recorded type name (bounded: names come from records).
_REPLAYED: dict[str, type[ReplayedStepError]] = {}
_MAX_REPLAYED: Final = 256
#: The observers of an execution nobody observes.
_NO_OBSERVERS: Final = Observers()
#: ``ctx.patched(NAME)`` is recorded as a step so named, with no arguments.
PATCH_PREFIX: Final = "patch:"
_NO_ARGS_HASH: Final = hash_bytes(canonical_json({}))


def jsonish(value: object) -> tuple[JSONValue, str, str | None]:
    """Return ``value`` as recorded, its canonical hash, and why it is not JSON.

    A value JSON cannot carry is recorded as its ``repr`` (cut to ``MAX_REPR``
    characters), hashed as that string, with the reason.
    """
    try:
        data = canonical_json(cast(JSONValue, value))
    except EnvelopeValidationError as exc:
        text = repr(value)
        if len(text) > MAX_REPR:
            text = text[: MAX_REPR - 3] + "..."
        return text, hash_bytes(canonical_json(text)), f"not JSON ({exc})"
    return cast(JSONValue, value), hash_bytes(data), None


def _redacted(
    shown: JSONValue, value: JSONValue, value_hash: str
) -> tuple[JSONValue, str]:
    """A redacted value and its hash (the hash is taken again only if it changed)."""
    if shown is value:
        return value, value_hash
    return shown, hash_bytes(canonical_json(shown))


def _format(exc: BaseException) -> str:
    """The traceback of ``exc`` from the step's own code on (our frames left out)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename.startswith(_PACKAGE):
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


@dataclass(slots=True, eq=False)
class OpenStep:
    """A step call between its ``STEP_START`` and ``STEP_END`` lines."""

    number: int
    name: str
    args_hash: str
    decision: StepDecision | None
    child: str | None
    #: what its observers were told it is (None: it has none)
    observed: ObservedStep | None = None
    start: float = field(default_factory=time.perf_counter, init=False)

    @property
    def served(self) -> bool:
        """The cassette answers this call; nothing is run."""
        decision = self.decision
        return decision is not None and decision.action != LIVE


@dataclass(slots=True, eq=False)
class StepSession:
    """Numbers, records and (in a re-run) serves the steps of one execution.

    Attributes:
        recorder: where events go, or ``None`` when nothing is recorded.
        cassette: the record being re-run, if any.
        execution_id: the execution's id, as its observers are told it.
        observers: told when each step starts and ends.
        step_scopes: the observers' ``step_scope`` methods (``scopes.scopes_of``).
        cancel: set when an operator cancels the execution (checked at each step).
        waits: set when the execution starts waiting (checked at each step).
    """

    recorder: Recorder | None
    cassette: Cassette | None
    execution_id: str
    observers: Observers
    step_scopes: tuple[scopes.Scope, ...]
    cancel: CancelFlag | None
    waits: WaitState | None
    _count: int = field(default=0, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)
    #: what ``ctx.patched`` answered, by patch name
    _patches: dict[str, bool] = field(default_factory=dict, init=False)

    def open(
        self,
        agent: str,
        attempt: int,
        name: str,
        args: object,
        *,
        side_effect: bool,
        child: str | None = None,
        idempotent: bool = False,
    ) -> OpenStep:
        """Number a step call, decide how to answer it, write ``STEP_START``.

        ``idempotent`` (a side effect safe to make twice) is recorded, so that
        a resumed execution runs it again when it never ended.

        Raises:
            CassetteMiss: in a re-run, no recording answers the call (the miss
                is recorded as the step's failure).
            ExecutionCancelled: an operator cancelled the execution; nothing
                is recorded of this step.
        """
        cancel = self.cancel
        if cancel is not None:  # a step boundary: stop here if cancelled
            cancel.check()
        if self.waits is not None:  # or if it waits (its process lets it go)
            self.waits.check(self.execution_id)
        recorded_args, args_hash, reason = jsonish(args)
        redaction = self.redaction
        if redaction is not None:  # before the hash: a re-run matches the record
            recorded_args, args_hash = _redacted(
                redaction.args(name, recorded_args), recorded_args, args_hash
            )
        decision: StepDecision | None = None
        miss: CassetteMiss | None = None
        if self.cassette is not None:
            try:
                decision = self.cassette.decide(
                    name, recorded_args, args_hash, side_effect=side_effect
                )
            except CassetteMiss as exc:
                miss = exc
        return self._start(
            agent,
            attempt,
            name,
            recorded_args,
            args_hash,
            reason,
            side_effect=side_effect,
            child=child,
            idempotent=idempotent,
            decision=decision,
            miss=miss,
        )

    def patched(self, agent: str, attempt: int, name: str, *, new: bool) -> bool:
        """Whether the execution takes patch ``name``'s new path (``ctx.patched``).

        The first check of ``name`` in the execution decides, later ones give
        the same answer and record nothing. Without a cassette (a new
        execution) the marker step ``patch:NAME`` is recorded and the answer
        is True. With one (a resume, a re-run), its ``patch`` says: the
        recorded marker is served (True); the record reached this point
        without it (False, nothing recorded); or the record ends before it
        (recorded live, True). ``new=False`` (``ctx.deprecate_patch``) records
        no new marker: it only serves a recorded one, so that the record's
        steps still line up.

        Raises:
            CassetteMiss: the resumed execution is parked.
        """
        patches = self._patches
        known = patches.get(name)
        if known is not None:
            return known
        marker = PATCH_PREFIX + name
        decision: StepDecision | None = None
        cassette = self.cassette
        if cassette is not None:
            decision = cassette.patch(marker, _NO_ARGS_HASH, new=new)
            taken = decision is not None
        else:
            taken = new
        if taken:
            step = self._start(
                agent,
                attempt,
                marker,
                {},
                _NO_ARGS_HASH,
                None,
                side_effect=False,
                child=None,
                idempotent=False,
                decision=decision,
                miss=None,
            )
            if step.served:
                self.serve(step)
            else:
                self.succeeded(step, True)
        if new:
            with self._lock:
                taken = patches.setdefault(name, taken)
        return taken

    def _start(
        self,
        agent: str,
        attempt: int,
        name: str,
        recorded_args: JSONValue,
        args_hash: str,
        reason: str | None,
        *,
        side_effect: bool,
        child: str | None,
        idempotent: bool,
        decision: StepDecision | None,
        miss: CassetteMiss | None,
    ) -> OpenStep:
        """Number a step call the cassette (if any) decided, write ``STEP_START``."""
        with self._lock:
            self._count += 1
            number = self._count
        active = _ACTIVE.get()
        parent = active[1] if active is not None and active[0] is self else None
        data: JSONObject = {
            "step": number,
            "name": name,
            "agent": agent,
            "attempt": attempt,
            "parent": parent,
            "args": recorded_args,
            "argsHash": args_hash,
            "sideEffect": side_effect,
            "replayable": reason is None,
        }
        if reason is not None:
            data["reason"] = f"args are {reason}"
        if idempotent:
            data["idempotent"] = True
        position = None if decision is None else decision.position
        if position is not None:  # a resumed execution keeps its numbers
            number = data["step"] = position
            with self._lock:
                self._count = max(self._count, position)
        if child is not None:
            if decision is not None and decision.action != LIVE and decision.recorded:
                child = decision.recorded.child_execution_id  # served: no new child
            data["childExecutionId"] = child
        recorder = self.recorder
        if recorder is not None:
            recorder.event(EventType.STEP_START, data)
        observed = None
        if self.observers:
            observed = ObservedStep(
                self.execution_id, number, name, agent, attempt, parent, child
            )
            self.observers.step_started(observed)
        step = OpenStep(number, name, args_hash, decision, child, observed)
        if miss is not None:
            self._end(step, "error", None, None, error=miss, tb=None, miss=True)
            raise miss
        return step

    def serve(self, step: OpenStep) -> JSONValue:
        """Write ``STEP_END`` from the recorded step and return its output."""
        decision = step.decision
        assert decision is not None
        recorded = decision.recorded
        assert recorded is not None
        output, output_hash = recorded.output, recorded.output_hash
        redaction = self.redaction
        if decision.overridden and redaction is not None and output_hash is not None:
            # an output given to the re-run, not read from the record: it is
            # redacted like a live step's before it is sealed
            output, output_hash = _redacted(
                redaction.output(step.name, output), output, output_hash
            )
        data: JSONObject = {
            "step": step.number,
            "name": step.name,
            "argsHash": step.args_hash,
            "outcome": recorded.outcome,
            "durationMs": ms_since(step.start),
            "output": output,
            "outputHash": output_hash,
            "error": recorded.error,
            "traceback": recorded.traceback,
            "replayable": True,
            "source": "record",
            "servedFrom": {
                "executionId": decision.served_from
                or (self.cassette.execution_id if self.cassette else None),
                "step": recorded.number,
            },
        }
        if recorded.child_execution_id is not None:
            data["childExecutionId"] = recorded.child_execution_id
        if decision.overridden:
            data["overridden"] = True
        self._write_end(step, data, recorded.outcome)
        return copy_json(recorded.output)  # the re-run diffs the record: no alias

    def succeeded(
        self, step: OpenStep, value: object, *, child: str | None = None
    ) -> None:
        """Write ``STEP_END`` for a call that returned ``value``.

        ``child``: the record that answered the call, when it has its own (an
        HTTP request's transport record), written as ``childExecutionId``.
        """
        output, output_hash, reason = jsonish(value)
        redaction = self.redaction
        if redaction is not None:
            output, output_hash = _redacted(
                redaction.output(step.name, output), output, output_hash
            )
        self._end(step, "success", output, output_hash, reason=reason, child=child)

    def failed(self, step: OpenStep, exc: BaseException) -> None:
        """Write ``STEP_END`` for a call that raised ``exc``."""
        # An asyncio.CancelledError exists only once asyncio is loaded; a sync
        # route never loads it (see routing.router), nor does its first failure.
        aio = sys.modules.get("asyncio")
        cancelled = aio is not None and isinstance(exc, aio.CancelledError)
        tb = None if cancelled else _format(exc)
        outcome = "cancelled" if cancelled else "error"
        self._end(step, outcome, None, None, error=exc, tb=tb)

    def routed(self, step: OpenStep, response: AgentResponse) -> None:
        """Write ``STEP_END`` for a child intent, from the child's response.

        ``response`` is the child's answer as its record holds it (redacted).
        """
        summary: JSONObject = {
            "status": response.status,
            "payload": response.payload,
            "error": None
            if response.error is None
            else response.error.model_dump(mode="json"),
        }
        output, output_hash, reason = jsonish(summary)
        redaction = self.redaction
        if redaction is not None:
            output, output_hash = _redacted(
                redaction.output(step.name, output), output, output_hash
            )
        error = response.error
        data = self._end_data(
            step,
            "success" if error is None else "error",
            output,
            output_hash,
            reason,
            None
            if error is None
            else {"type": error.code.value, "message": error.message},
            None,
        )
        if step.child is not None:
            data["childExecutionId"] = step.child
        self._write_end(step, data, str(data["outcome"]))

    @property
    def redaction(self) -> Redaction | None:
        """What the execution redacts, if anything."""
        recorder = self.recorder
        return None if recorder is None else recorder.redaction

    def step_scope(self, number: int) -> AbstractContextManager[object]:
        """What the observers enter around step ``number``'s function."""
        return scopes.enter(self.step_scopes, self.execution_id, number)

    # -- internals ---------------------------------------------------------------

    def _end(
        self,
        step: OpenStep,
        outcome: str,
        output: JSONValue,
        output_hash: str | None,
        *,
        reason: str | None = None,
        error: BaseException | None = None,
        tb: str | None = None,
        miss: bool = False,
        child: str | None = None,
    ) -> None:
        error_data: JSONObject | None = None
        if error is not None:
            error_data = {"type": type(error).__name__, "message": str(error)}
        data = self._end_data(
            step, outcome, output, output_hash, reason, error_data, tb
        )
        if miss:
            data["source"] = "miss"
        if child is not None:
            data["childExecutionId"] = child
        self._write_end(step, data, outcome)

    def _end_data(
        self,
        step: OpenStep,
        outcome: str,
        output: JSONValue,
        output_hash: str | None,
        reason: str | None,
        error: JSONObject | None,
        tb: str | None,
    ) -> JSONObject:
        data: JSONObject = {
            "step": step.number,
            "name": step.name,
            "argsHash": step.args_hash,
            "outcome": outcome,
            "durationMs": ms_since(step.start),
            "output": output,
            "outputHash": output_hash,
            "error": error,
            "traceback": tb,
            "replayable": reason is None,
            "source": "live",
        }
        if reason is not None:
            data["reason"] = f"output is {reason}"
        decision = step.decision
        if decision is not None and decision.miss:
            data["liveMiss"] = True
        return data

    def _write_end(self, step: OpenStep, data: JSONObject, outcome: str) -> None:
        recorder = self.recorder
        if recorder is not None:
            recorder.event(EventType.STEP_END, data)
        if step.observed is not None:
            error = data["error"]
            message = error.get("message") if isinstance(error, dict) else None
            error_text = None if message is None else str(message)
            self.observers.step_ended(step.observed, outcome, error_text)
        if self.cassette is not None:
            source = str(data["source"])
            self.cassette.ended(
                StepEnd(
                    step.number,
                    step.name,
                    step.args_hash,
                    source,
                    step.decision,
                    outcome,
                )
            )


class Execution:
    """What one execution carries from the router into its plan and its agents.

    Attributes:
        execution_id: the execution's id (and its record's).
        envelope_hash: the envelope's hash, when recorded.
        recorder: writes the record, or ``None`` when nothing is recorded.
        store: the store recorded into; child intents record there too.
        started: ``perf_counter()`` when routing began.
        observers: the router's observers, told what the execution does.
        observed: the execution as they are told about it (with observers).
    """

    __slots__ = (
        "_attempt_scopes",
        "_lock",
        "_step_scopes",
        "_steps",
        "cancel",
        "envelope_hash",
        "execution_id",
        "observed",
        "observers",
        "origin_id",
        "recorder",
        "started",
        "store",
        "waits",
    )

    def __init__(
        self,
        execution_id: str,
        envelope_hash: str | None,
        recorder: Recorder | None,
        started: float,
        *,
        store: ExecutionStore | None = None,
        cassette: Cassette | None = None,
        observers: Observers = _NO_OBSERVERS,
        origin_id: str | None = None,
        cancel: CancelFlag | None = None,
    ) -> None:
        self.execution_id = execution_id
        #: set when an operator cancels it (see ``cancel.py``)
        self.cancel = cancel
        #: what it waits for, once it waits (see ``waiting.py``)
        self.waits = WaitState()
        self.envelope_hash = envelope_hash
        self.recorder = recorder
        self.started = started
        self.store = store
        self.observers = observers
        self.observed: ObservedExecution | None = None
        self._attempt_scopes: tuple[scopes.Scope, ...] = ()
        self._step_scopes: tuple[scopes.Scope, ...] = ()
        if observers.members:
            self._attempt_scopes = observers.scopes(scopes.ATTEMPT_SCOPE)
            self._step_scopes = observers.scopes(scopes.STEP_SCOPE)
        self._lock = threading.Lock()
        # A re-run's session exists from the start; else it is made at the
        # first step of an execution that records.
        self._steps = self._session(cassette) if cassette else None
        #: the first execution of its resume chain (``ctx.idempotency_key``)
        self.origin_id = origin_id or execution_id

    @property
    def redaction(self) -> Redaction | None:
        """What the execution redacts, if anything (it is the recorder's)."""
        recorder = self.recorder
        return None if recorder is None else recorder.redaction

    @property
    def has_attempt_scopes(self) -> bool:
        """Whether an observer enters a scope around each attempt's agent call."""
        return bool(self._attempt_scopes)

    def attempt_scope(self, attempt: int) -> AbstractContextManager[object]:
        """What the observers enter around attempt ``attempt``'s agent call.

        Entered in the thread or task the agent runs in (scopes.py).
        """
        return scopes.enter(self._attempt_scopes, self.execution_id, attempt)

    def attention(self) -> JSONObject | None:
        """Why the execution must be parked (its journal says), or ``None``."""
        session = self._steps
        cassette = None if session is None else session.cassette
        return None if cassette is None else cassette.attention

    def steps(self) -> StepSession | None:
        """The step session; ``None`` when steps are plain calls (no record)."""
        session = self._steps
        if session is None and self.recorder is not None:
            with self._lock:  # the agents of one execution may run on several threads
                session = self._steps
                if session is None:
                    session = self._steps = self._session(None)
        return session

    def _session(self, cassette: Cassette | None) -> StepSession:
        return StepSession(
            self.recorder,
            cassette,
            execution_id=self.execution_id,
            observers=self.observers,
            step_scopes=self._step_scopes,
            cancel=self.cancel,
            waits=self.waits,
        )


def active_step(ex: Execution) -> int | None:
    """The number of ``ex``'s step running in this context, if one is."""
    active = _ACTIVE.get()
    session = ex._steps
    if active is None or session is None or active[0] is not session:
        return None
    return active[1]


def enter_step(session: StepSession, number: int) -> Token[_Active]:
    """Mark step ``number`` as running in this context; return the reset token."""
    return _ACTIVE.set((session, number))


def leave_step(token: Token[_Active]) -> None:
    """Undo :func:`enter_step`."""
    _ACTIVE.reset(token)


def replayed_error(name: str, error: JSONObject | None) -> ReplayedStepError:
    """The recorded failure ``error`` (``{"type", "message"}``) of step ``name``."""
    error = error or {}
    kind = str(error.get("type") or "Error")
    message = str(error.get("message") or "")
    cls = _REPLAYED.get(kind)
    if cls is None:
        cls = _replayed_type(kind)
        if len(_REPLAYED) < _MAX_REPLAYED:
            _REPLAYED[kind] = cls
    return cls(name, kind, message)


def _replayed_type(kind: str) -> type[ReplayedStepError]:
    """A ``ReplayedStepError`` named ``kind``, and a ``kind`` if it is a builtin."""
    namespace = {"__module__": "intentusnet.replayed", "__qualname__": kind}
    builtin = getattr(builtins, kind, None)
    if isinstance(builtin, type) and issubclass(builtin, Exception):
        try:
            made = type(kind, (ReplayedStepError, builtin), namespace)
            made("probe", kind, "")  # some builtins need other arguments
        except TypeError:
            pass
        else:
            return made
    return type(kind, (ReplayedStepError,), namespace)


def _served(session: StepSession, opened: OpenStep) -> object:
    """Return a served step's recorded output, or raise its recorded error."""
    output = session.serve(opened)
    decision = opened.decision
    if decision is not None and decision.action == REPLAY_ERROR:
        recorded = decision.recorded
        raise replayed_error(opened.name, None if recorded is None else recorded.error)
    return output


class PendingStep:
    """A step opened now whose end is written later, by whoever sees it end.

    For a call that outlives the function making it: an HTTP response whose
    body the agent reads after the transport has returned it ends when the
    body has been read to its end, maybe on another thread. Exactly one of
    :meth:`serve`, :meth:`succeeded` and :meth:`failed` ends it.
    """

    __slots__ = ("_opened", "_session")

    def __init__(self, session: StepSession, opened: OpenStep) -> None:
        self._session = session
        self._opened = opened

    @property
    def number(self) -> int:
        """The step's number in its execution's record."""
        return self._opened.number

    @property
    def served(self) -> bool:
        """A re-run's record answers this call: :meth:`serve` it, call nothing."""
        return self._opened.served

    def serve(self) -> JSONValue:
        """The recorded output (its recorded failure is raised again)."""
        return cast(JSONValue, _served(self._session, self._opened))

    def succeeded(self, value: object, *, child: str | None = None) -> None:
        """Write ``STEP_END`` for a call whose result is ``value``.

        ``child``: the id of the record that answered the call, if it has one.
        """
        self._session.succeeded(self._opened, value, child=child)

    def failed(self, exc: BaseException) -> None:
        """Write ``STEP_END`` for a call that failed with ``exc``."""
        self._session.failed(self._opened, exc)


def open_pending(
    ex: Execution | None, agent: str, attempt: int, name: str, args: JSONValue
) -> PendingStep | None:
    """Open step ``name`` of ``ex``; ``None`` when ``ex`` records no steps.

    Raises:
        CassetteMiss: in a re-run, no recording answers the call (recorded as
            the step's failure).
    """
    session = None if ex is None else ex.steps()
    if session is None:
        return None
    return PendingStep(
        session, session.open(agent, attempt, name, args, side_effect=False)
    )


def stepping(
    ex: Execution | None,
    agent: str,
    attempt: int,
    name: str,
    args: object,
    call: Callable[[], object],
    side_effect: bool,
    idempotent: bool = False,
) -> Flow[object]:
    """Make ``call`` step ``name`` of ``ex``, made by ``agent``'s ``attempt``.

    ``args`` is what is recorded and matched; ``call`` does the work. A flow
    (``_util.flow``): ``ctx.step`` drives it, ``ctx.astep`` awaits the call.
    """
    session = None if ex is None else ex.steps()
    if session is None:
        return (yield call)
    opened = session.open(
        agent, attempt, name, args, side_effect=side_effect, idempotent=idempotent
    )
    if opened.served:
        return _served(session, opened)
    token = enter_step(session, opened.number)
    try:
        with session.step_scope(opened.number):
            value = yield call
    except BaseException as exc:
        session.failed(opened, exc)
        raise
    finally:
        leave_step(token)
    session.succeeded(opened, value)
    return value


def record_value(
    ex: Execution | None,
    agent: str,
    attempt: int,
    name: str,
    args: object,
    read: Callable[[], object],
) -> object:
    """Make ``read`` step ``name`` of ``ex`` (no side effect); a re-run serves it."""
    return drive(stepping(ex, agent, attempt, name, args, read, False))
