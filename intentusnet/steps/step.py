"""Steps inside agents: recorded tool and model calls, and child intents.

An agent records a call it makes as a *step*: ``ctx.step(name, args, fn)``,
``await ctx.astep(name, args, fn)``, or a function decorated with
:func:`step`, which finds the execution it runs in through a context variable
(the router sets it for every attempt, in worker threads too). Each step
leaves a ``STEP_START`` and a ``STEP_END`` line in the record; in a re-run
(``ReplayEngine.rerun``) the record answers the call instead of running it.
``ctx.route(envelope)`` routes a child intent as a step of its own.

Outside an agent, or when the execution records nothing and re-runs nothing,
a step is a plain call.
"""

from __future__ import annotations

import asyncio
import builtins
import functools
import inspect
import threading
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextvars import Token
from typing import TYPE_CHECKING, TypeVar, cast, overload

from .._util.ids import new_execution_id
from .._util.jsonvalue import JSONValue
from ..errors import IntentusNetError, ReplayedStepError
from ..hashing import hashed_view
from ..routing.agents import current_context
from ..routing.hints import RouteHints, hinted
from .cassette import REPLAY_ERROR, Cassette
from .session import OpenStep, StepSession, enter_step, leave_step

if TYPE_CHECKING:
    from ..envelope import AgentResponse, IntentEnvelope
    from ..routing.agents import AgentContext
    from ..routing.strategies import Execution

__all__ = ["aroute_child", "arun_step", "route_child", "run_step", "step"]

_T = TypeVar("_T")
_F = TypeVar("_F", bound=Callable[..., object])
_CREATE = threading.Lock()
#: Parameter names not recorded as arguments of a decorated method.
_SELF_NAMES = frozenset({"self", "cls"})
#: Replayed-error classes by recorded type name (bounded: names come from records).
_REPLAYED: dict[str, type[ReplayedStepError]] = {}
_MAX_REPLAYED = 256


def _session(ctx: AgentContext) -> StepSession | None:
    ex = ctx._execution
    if ex is None:
        return None
    session: StepSession | None = ex.steps
    if session is None and ex.recorder is not None:
        with _CREATE:  # the agents of one execution may run on several threads
            session = ex.steps
            if session is None:
                session = ex.steps = StepSession(ex.execution_id, ex.recorder)
    return session


def _replayed(step: OpenStep) -> ReplayedStepError:
    """The recorded failure of a step, to raise again in a strict re-run."""
    decision = step.decision
    recorded = None if decision is None else decision.recorded
    error = (recorded.error if recorded is not None else None) or {}
    kind = str(error.get("type") or "Error")
    message = str(error.get("message") or "")
    cls = _REPLAYED.get(kind)
    if cls is None:
        cls = _replayed_type(kind)
        if len(_REPLAYED) < _MAX_REPLAYED:
            _REPLAYED[kind] = cls
    return cls(step.name, kind, message)


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
    if opened.decision is not None and opened.decision.action == REPLAY_ERROR:
        raise _replayed(opened)
    return output


def run_step(
    ctx: AgentContext,
    name: str,
    args: object,
    call: Callable[[], _T],
    side_effect: bool,
) -> _T:
    """Run ``call`` as step ``name`` of the execution ``ctx`` belongs to.

    ``args`` is what is recorded and matched; ``call`` does the work.
    """
    session = _session(ctx)
    if session is None:
        return call()
    opened = session.open(ctx, name, args, side_effect=side_effect)
    if opened.served:
        return cast(_T, _served(session, opened))
    token = enter_step(session, opened.number)
    try:
        value = call()
    except BaseException as exc:
        session.failed(opened, exc)
        raise
    finally:
        leave_step(token)
    session.succeeded(opened, value)
    return value


async def arun_step(
    ctx: AgentContext,
    name: str,
    args: object,
    call: Callable[[], Awaitable[_T] | _T],
    side_effect: bool,
) -> _T:
    """The async ``run_step``: ``call`` may return an awaitable, which is awaited."""
    session = _session(ctx)
    if session is None:
        result = call()
        return await result if inspect.isawaitable(result) else result
    opened = session.open(ctx, name, args, side_effect=side_effect)
    if opened.served:
        return cast(_T, _served(session, opened))
    token = enter_step(session, opened.number)
    try:
        result = call()
        value = await result if inspect.isawaitable(result) else result
    except BaseException as exc:
        session.failed(opened, exc)
        raise
    finally:
        leave_step(token)
    session.succeeded(opened, value)
    return value


# -- the decorator -----------------------------------------------------------------


def _recorded_args(
    signature: inspect.Signature,
    skip: frozenset[str],
    args: tuple[object, ...],
    kwargs: dict[str, object],
) -> dict[str, object] | None:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None  # let the call itself raise its usual error
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in skip}


def _decorate(
    fn: _F, name: str | None, side_effect: bool, exclude: frozenset[str]
) -> _F:
    label = name or f"{fn.__module__}.{fn.__qualname__}"
    signature = inspect.signature(fn)
    params = list(signature.parameters)
    skip = exclude | (frozenset(params[:1]) & _SELF_NAMES)

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def async_wrapper(*args: object, **kwargs: object) -> object:
            ctx = current_context()
            recorded = None
            if ctx is not None:
                recorded = _recorded_args(signature, skip, args, kwargs)
            if ctx is None or recorded is None:
                return await fn(*args, **kwargs)
            return await arun_step(
                ctx, label, recorded, lambda: fn(*args, **kwargs), side_effect
            )

        return cast(_F, async_wrapper)

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> object:
        ctx = current_context()
        recorded = None
        if ctx is not None:
            recorded = _recorded_args(signature, skip, args, kwargs)
        if ctx is None or recorded is None:
            return fn(*args, **kwargs)
        return run_step(ctx, label, recorded, lambda: fn(*args, **kwargs), side_effect)

    return cast(_F, wrapper)


@overload
def step(name: _F, /) -> _F: ...


@overload
def step(
    name: str | None = None,
    /,
    *,
    side_effect: bool = False,
    exclude: Collection[str] = (),
) -> Callable[[_F], _F]: ...


def step(
    name: str | _F | None = None,
    /,
    *,
    side_effect: bool = False,
    exclude: Collection[str] = (),
) -> _F | Callable[[_F], _F]:
    """Record every call of the decorated function made while an agent runs.

    The call's arguments, bound to the function's parameters with defaults
    applied, are the step's args (a first parameter ``self`` or ``cls`` is
    left out, and so are those named in ``exclude``). Called outside an agent,
    the function runs as if undecorated. Works on async functions too.
    Added in 0.1.0.

    Example::

        @step("tools.weather")
        def weather(city: str) -> dict[str, object]:
            return httpx.get(URL, params={"q": city}).json()

        @step("mail.send", side_effect=True)  # never sent again by a re-run
        def send(to: str, body: str) -> None: ...

    Args:
        name: the step's name; ``module.qualname`` of the function by default.
            ``@step`` without parentheses takes the default.
        side_effect: the call changes the world (sends, writes): a re-run
            never makes it again but serves it from the record, and stops with
            ``SideEffectMismatch`` if it would be needed with other arguments.
        exclude: parameters not recorded (clients, connections, secrets).
    """
    skip = frozenset(exclude)
    if callable(name):
        return _decorate(name, None, side_effect, skip)

    def decorate(fn: _F) -> _F:
        return _decorate(fn, name, side_effect, skip)

    return decorate


# -- child intents -----------------------------------------------------------------


class _ChildRoute:
    """One ``ctx.route`` call: the parent's ``route:`` step and the child's hints."""

    __slots__ = ("env", "hints", "made", "opened", "session")

    def __init__(
        self, ctx: AgentContext, envelope: IntentEnvelope | Mapping[str, JSONValue]
    ) -> None:
        from ..envelope import IntentEnvelope

        env = (
            envelope
            if isinstance(envelope, IntentEnvelope)
            else IntentEnvelope.model_validate(envelope)
        )
        self.env = env
        self.session = session = _session(ctx)
        #: the child's id is chosen here, so the parent records it first
        self.hints = RouteHints(
            execution_id=new_execution_id(),
            parent_execution_id=ctx.execution_id,
            store=None if session is None else session.store,
        )
        self.made: list[StepSession] = []  # a re-run child's step session
        self.opened: OpenStep | None = None
        if session is not None:
            self.opened = session.open(
                ctx,
                f"route:{env.intent.name}",
                hashed_view(env.to_wire()),
                side_effect=False,
                child=self.hints.execution_id,
            )

    def served(self) -> AgentResponse | None:
        """The recorded answer, when the re-run serves this step; else prepare."""
        opened, session = self.opened, self.session
        if opened is None or session is None:
            return None
        if opened.served:
            return _served_response(opened, session.serve(opened))
        self._rerun_child(session, opened)
        return None

    def _rerun_child(self, session: StepSession, opened: OpenStep) -> None:
        """In a re-run, route the child as a re-run of the child it recorded."""
        cassette, decision = session.cassette, opened.decision
        recorded = None if decision is None else decision.recorded
        source = session.source_store
        child_id = None if recorded is None else recorded.child_execution_id
        if cassette is None or source is None or child_id is None:
            return
        try:
            record = source.load(child_id)
        except IntentusNetError:
            return  # gone or damaged: the child runs live
        child_cassette = Cassette(
            record, from_failure=cassette.from_failure, allow_live=cassette.allow_live
        )

        def child_session(ex: Execution) -> StepSession:
            made = StepSession(
                ex.execution_id,
                ex.recorder,
                cassette=child_cassette,
                store=session.store,
                source_store=source,
            )
            self.made.append(made)
            return made

        self.hints.received = {"replayOf": child_id}
        self.hints.session = child_session

    def enter(self) -> Token[tuple[StepSession, int] | None] | None:
        """Mark the step as running (a step inside the child is not its child)."""
        if self.session is None or self.opened is None:
            return None
        return enter_step(self.session, self.opened.number)

    def failed(self, exc: BaseException) -> None:
        """Record that routing the child raised."""
        if self.session is not None and self.opened is not None:
            self.session.failed(self.opened, exc)

    def done(self, response: AgentResponse) -> AgentResponse:
        """Record the child's answer and return it."""
        session, opened = self.session, self.opened
        if session is not None and opened is not None:
            for child in self.made:  # a miss inside a re-run child fails the re-run
                session.misses.extend(child.misses)
            session.routed(opened, response)
        return response


def _served_response(opened: OpenStep, output: JSONValue) -> AgentResponse:
    from ..envelope import AgentResponse

    summary = output if isinstance(output, dict) else {}
    child = opened.child
    return AgentResponse.model_validate(
        {
            "status": summary.get("status", "error"),
            "payload": summary.get("payload"),
            "error": summary.get("error"),
            "metadata": {
                "executionId": child,
                "fromReplay": True,
                "originalExecutionId": child,
            },
        }
    )


def route_child(
    ctx: AgentContext, envelope: IntentEnvelope | Mapping[str, JSONValue]
) -> AgentResponse:
    """Route a child intent from inside an agent, as a step of the parent."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        pass
    else:
        raise RuntimeError(
            "ctx.route() blocks and cannot run inside a coroutine; "
            "use `await ctx.aroute(envelope)`"
        )
    call = _ChildRoute(ctx, envelope)
    served = call.served()
    if served is not None:
        return served
    token = call.enter()
    try:
        with hinted(call.hints):
            response = ctx.router.route_intent(call.env)
    except BaseException as exc:
        call.failed(exc)
        raise
    finally:
        if token is not None:
            leave_step(token)
    return call.done(response)


async def aroute_child(
    ctx: AgentContext, envelope: IntentEnvelope | Mapping[str, JSONValue]
) -> AgentResponse:
    """The async ``route_child``."""
    call = _ChildRoute(ctx, envelope)
    served = call.served()
    if served is not None:
        return served
    token = call.enter()
    try:
        with hinted(call.hints):
            response = await ctx.router.route(call.env)
    except BaseException as exc:
        call.failed(exc)
        raise
    finally:
        if token is not None:
            leave_step(token)
    return call.done(response)
