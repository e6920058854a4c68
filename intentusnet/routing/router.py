"""The intent router: deterministic agent selection, agent runs, recording.

``route`` (async) and ``route_intent`` (sync) drive the one strategy plan of
``strategies.plan``. The synchronous path runs sync agents inline on the calling
thread (or on a worker thread when a timeout must be enforced) and hands async
agents and races to one long-lived background event loop: never a new loop per
call, and safe from many threads at once. ``asyncio`` is imported by the
functions that use it, so a synchronous route of sync agents never loads it
(a fifth of a fresh process's first routed intent; docs/performance.md).
"""

from __future__ import annotations

import contextvars
import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias, TypeVar

from .._util.ids import new_execution_id
from .._util.jsonvalue import JSONObject, JSONValue
from .._util.time import ms_since
from ..envelope import AgentResponse, CacheDirective, IntentEnvelope, IntentRef
from ..hashing import compute_hash
from ..record.model import EventType
from ..store.durable import CancelStore, DurableStore, check_idempotency_key
from .agents import (
    CURRENT,
    Agent,
    AgentContext,
    AgentDefinition,
    AgentHandler,
    AgentRegistry,
    RegisteredAgent,
    make_definition,
)
from .cancel import CancelWatch
from .config import configuration
from .execution import Execution
from .observing import Observers
from .queues import Queue, Queues, make_queue
from .recorder import Recorder
from .redact import Redaction, Redactor
from .seams import (
    ExecutionObserver,
    ExecutionOptions,
    ObservedExecution,
    ResponseCache,
)
from .strategies import (
    Outcome,
    Plan,
    Run,
    cancelled,
    decide,
    from_exception,
    from_result,
    internal_error,
    interrupted,
    plan,
    timed_out,
)
from .waiting import close_waiting

if TYPE_CHECKING:
    import asyncio
    from concurrent.futures import ThreadPoolExecutor

    from ..envelope import RoutingDecision, RoutingStrategy
    from ..store.durable import RecordHold
    from ..store.protocol import ExecutionStore
    from .durable import Routing

__all__ = ["CallNext", "IntentRouter", "Middleware"]

#: The rest of the chain, as a middleware sees it.
CallNext: TypeAlias = Callable[[IntentEnvelope], Awaitable[AgentResponse]]
#: ``async def mw(envelope, call_next) -> AgentResponse``; the first is outermost.
Middleware: TypeAlias = Callable[[IntentEnvelope, CallNext], Awaitable[AgentResponse]]

_H = TypeVar("_H", bound=Callable[..., object])
_DECISION_CACHE_SIZE: Final = 1024
_DecisionKey: TypeAlias = tuple[
    str, str, "RoutingStrategy", str | None, tuple[str, ...]
]
#: An envelope as recorded and hashed, and the redaction that made it.
_Shown: TypeAlias = tuple[Redaction | None, IntentEnvelope]
#: Receives an execution's answer as recorded (redacted).
_Keep: TypeAlias = Callable[[AgentResponse], None]


class IntentRouter:
    """Routes intents to agents and records every execution.

    Args:
        registry: the agents to route to; a new empty registry by default.
        store: where executions are recorded; ``None`` records nothing and
            costs nothing.
        middleware: ``async def mw(envelope, call_next)`` callables, outermost
            first, wrapping every routing call.
        max_workers: threads for sync agents that run under a timeout or in a
            race, and for sync agents called from ``route``.
        cache: a ``ReplayCache`` answering equal envelopes from earlier
            records before any record is opened or agent runs (needs
            ``store``, which it is bound to). Added in 0.1.0.
        redactor: replaces secrets by keyed markers in everything recorded:
            the envelope is hashed, recorded and looked up in the cache
            redacted; agents get it as sent, and the caller gets the answer
            unredacted, while replay and cache hits return it redacted
            (docs/redaction.md). Child intents use it too. Added in 0.1.0.

    Raises:
        ValueError: ``cache`` without ``store``.
    """

    def __init__(
        self,
        registry: AgentRegistry | None = None,
        *,
        store: ExecutionStore | None = None,
        middleware: Sequence[Middleware] = (),
        max_workers: int = 32,
        cache: ResponseCache | None = None,
        redactor: Redactor | None = None,
    ) -> None:
        self.registry = registry if registry is not None else AgentRegistry()
        self._queues = Queues()
        self.store = store  # (a property: the store's abilities are read once)
        self.cache = cache
        self.redactor = redactor
        if cache is not None:
            if store is None:
                raise ValueError("a ReplayCache serves records: give a store too")
            cache.bind(store)
        self._middleware: list[Middleware] = list(middleware)
        self._decisions: dict[
            _DecisionKey,
            tuple[int, RoutingDecision, JSONObject, tuple[RegisteredAgent, ...]],
        ] = {}
        #: the header's configuration per (generation, intent, version, strategy)
        self._configs: dict[tuple[int, str, str, RoutingStrategy], JSONObject] = {}
        self._max_workers = max_workers
        self._pool: ThreadPoolExecutor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread: threading.Thread | None = None
        self._loop_lock = threading.Lock()
        #: replaced, never changed in place: a routing call reads it once
        self._observers = Observers()

    @property
    def store(self) -> ExecutionStore | None:
        """Where executions are recorded; ``None`` records nothing."""
        return self._store

    @store.setter
    def store(self, store: ExecutionStore | None) -> None:
        self._store = store
        self._durable = store if isinstance(store, DurableStore) else None
        old = getattr(self, "_cancels", None)
        if old is not None:
            old.close()
        self._cancels = CancelWatch(store) if isinstance(store, CancelStore) else None
        self._queues.bind(store, self._resume_held)

    def _resume_held(self, execution_id: str, hold: RecordHold) -> None:
        """Resume a queued execution whose record ``hold`` holds (its turn came)."""
        from . import durable

        durable.resume(self._routing(), execution_id, held=hold)

    @property
    def durable_store(self) -> DurableStore | None:
        """The store, if it keeps idempotency keys and resume links; else ``None``.

        Known when the store is given, so a keyed call asks nothing of it.
        Added in 0.1.0.
        """
        return self._durable

    # -- registration ----------------------------------------------------------

    def agent(
        self,
        intent: str | IntentRef | Sequence[str | IntentRef],
        *,
        name: str | None = None,
        version: str = "1.0",
        priority: int = 100,
        description: str | None = None,
        queue: str | None = None,
    ) -> Callable[[_H], _H]:
        """Register the decorated function (or class instance) as an agent.

        Args:
            intent: the intent name(s) it handles (version ``1.0``), or
                ``IntentRef`` values for other versions.
            name: unique agent name; the function's name by default.
            version: the agent's version.
            priority: lower runs first.
            description: free text.
            queue: put its intents on this declared queue (``router.queue``);
                added in 0.1.0.

        Raises:
            UnknownQueue: ``queue`` is not declared (nothing is registered).
            InvalidQueue: an intent of it is on another queue.
        """
        if queue is not None:
            self._queues.check(queue)

        def register(handler: _H) -> _H:
            agent_name = name or str(
                getattr(handler, "__name__", type(handler).__name__)
            )
            definition = make_definition(
                intent,
                name=agent_name,
                version=version,
                priority=priority,
                description=description,
            )
            if queue is not None:
                for ref in definition.intents:
                    self._queues.assign(ref.name, queue)
            self.registry.register(definition, handler)  # type: ignore[arg-type]
            return handler

        return register

    def queue(
        self,
        name: str,
        *,
        concurrency: int | None = None,
        per_tenant: int | None = None,
        per_worker: int | None = None,
        rate: str | None = None,
        priority: bool = False,
        intents: Sequence[str] = (),
        run_queued: bool = True,
    ) -> Queue:
        """Declare a queue: limits on its intents' executions (docs/flow-control.md).

        Every router sharing the store counts ``concurrency``, ``per_tenant``
        and ``rate`` together; a limit left ``None`` does not apply.

        Args:
            name: 1 to 64 of ``A-Z a-z 0-9 _ . -``.
            concurrency: at most this many of its executions run at once.
            per_tenant: at most this many of one tenant's (the envelope's
                ``context.tenant``; none is one tenant) run at once.
            per_worker: at most this many run at once in this router.
            rate: at most ``COUNT/PERIOD`` start (``"60/min"``, ``"100/s"``).
            priority: the waiting start by ``context.priority``, lower first,
                instead of in the order they came.
            intents: intents to put on it (``@router.agent(queue=)`` does too).
            run_queued: this router starts the queue's queued executions (an
                asynchronous submit's); ``False`` for one that only submits.

        Raises:
            InvalidQueue: a bad name, limit or rate, or a name declared twice;
                nothing is declared.

        Added in 0.1.0.
        """
        made = make_queue(
            name,
            concurrency=concurrency,
            per_tenant=per_tenant,
            per_worker=per_worker,
            rate=rate,
            priority=priority,
            run_queued=run_queued,
        )
        return self._queues.declare(made, intents)

    @property
    def queues(self) -> Mapping[str, Queue]:
        """The declared queues, by name (``router.queue``). Added in 0.1.0."""
        return self._queues.declared

    def register(
        self, definition: AgentDefinition, handler: AgentHandler | Agent
    ) -> RegisteredAgent:
        """Register an agent from its definition and handler.

        Raises:
            AgentRegistrationError: the name is taken or the handler is unusable.
        """
        return self.registry.register(definition, handler)

    def use(self, middleware: Middleware) -> None:
        """Add a middleware inside those already added."""
        self._middleware.append(middleware)

    # -- observers -------------------------------------------------------------

    @property
    def observers(self) -> tuple[ExecutionObserver, ...]:
        """The observers told what each execution does, in the order added.

        Added in 0.1.0.
        """
        return self._observers.members

    @property
    def observer_errors(self) -> int:
        """How many times one of this router's observers raised.

        Observing never changes an outcome: what an observer raises is
        logged (the ``intentusnet.observers`` logger, with its traceback)
        and counted here, and the execution goes on as if it had not.

        Added in 0.1.0.
        """
        return self._observers.errors.count

    def add_observer(self, observer: ExecutionObserver) -> None:
        """Tell ``observer`` what every execution from now on does.

        Executions already running are not told. Adding an observer that is
        already there does nothing. Child intents (``ctx.route``) run
        through this router and are told too. Without observers, routing
        pays one check per event.

        Added in 0.1.0.
        """
        self._observers = self._observers.adding(observer)

    def remove_observer(self, observer: ExecutionObserver) -> None:
        """Stop telling ``observer``; an observer not there is ignored.

        Executions already running still tell it about the rest of their
        work, so that it sees each one it saw start end.

        Added in 0.1.0.
        """
        self._observers = self._observers.removing(observer)

    # -- routing ---------------------------------------------------------------

    async def route(
        self,
        envelope: IntentEnvelope | Mapping[str, JSONValue],
        *,
        options: ExecutionOptions | None = None,
        idempotency_key: str | None = None,
    ) -> AgentResponse:
        """Route an intent and return the answer; agent faults come back as data.

        Args:
            envelope: the intent, as a model or in wire form.
            options: what a child intent or a re-run tells the execution it
                opens (its id, links and cassette); callers leave it out, but
                for ``ExecutionOptions(opened=...)``, told when the record is
                open (an asynchronous submit; such a call is not answered from
                the replay cache).
            idempotency_key: 1 to 255 printable ASCII characters (space to
                ``~``) naming this request: the agent runs once per key, and
                a caller repeating it gets that execution's answer (recorded,
                waited for, or finished by resuming it); see
                docs/durability.md. Needs a store that keeps keys. Added in
                0.1.0.

        Raises:
            EnvelopeValidationError: ``envelope`` is a mapping that is not a valid
                envelope.
            InvalidIdempotencyKey: the key is malformed, or the store keeps none.
            IdempotencyConflict: the key was used with another envelope.
            IdempotencyTimeout: the key's execution still ran when the wait
                (``routing.timeoutMs``, else 30 s) ran out.
        """
        import asyncio

        env = _as_envelope(envelope)
        if idempotency_key is not None:
            opened = _keyed(idempotency_key, options)
            return await asyncio.to_thread(
                self._route_with_key, env, idempotency_key, opened
            )

        async def call_last(env: IntentEnvelope) -> AgentResponse:
            if self.cache is not None and options is None:
                return await self._aserve(self.cache, env)
            return await self._execute_async(env, options)

        call: CallNext = call_last
        for mw in reversed(self._middleware):
            call = _bind(mw, call)
        return await call(env)

    def route_intent(
        self,
        envelope: IntentEnvelope | Mapping[str, JSONValue],
        *,
        options: ExecutionOptions | None = None,
        idempotency_key: str | None = None,
    ) -> AgentResponse:
        """Synchronous ``route``: same strategies, same records, same answers.

        Raises:
            EnvelopeValidationError: ``envelope`` is a mapping that is not a valid
                envelope.
            InvalidIdempotencyKey, IdempotencyConflict, IdempotencyTimeout: as
                for ``route``.
        """
        env = _as_envelope(envelope)
        if idempotency_key is not None:
            opened = _keyed(idempotency_key, options)
            return self._route_with_key(env, idempotency_key, opened)
        if self._middleware:
            return self._in_loop(self.route(env, options=options))
        if self.cache is not None and options is None:
            return self._serve(self.cache, env)
        return self._execute_sync(env, options)

    def resume(self, execution_id: str, *, force: bool = False) -> AgentResponse:
        """Finish an interrupted execution; return its answer.

        The agent runs again with the interrupted record as its journal: every
        step that ended is served from it (never run again), the first step
        without a recorded end runs live, and so does everything after. The
        answer is recorded as a new record naming the old one (``resumeOf``);
        the store links the old one to it. Given an execution already resumed,
        the newest record of its chain is resumed. A side-effect step that
        started and never ended parks the execution ``needs_attention``
        (unless declared ``idempotent=True``), as does a step asked for out of
        recorded order. See docs/durability.md. Added in 0.1.0.

        Args:
            execution_id: the interrupted execution (or any of its chain).
            force: resume although the router's configuration for the intent
                changed since it ran.

        Raises:
            ResumeRefused: ``reason`` says why: ``complete``, ``owned`` (a live
                process writes or resumes it), ``no_agent``,
                ``configuration_changed`` or ``no_store``.
            RecordNotFound, InvalidExecutionId: there is no such record.
        """
        from . import durable

        return durable.resume(self._routing(), execution_id, force=force)

    def resolve(
        self,
        execution_id: str,
        *,
        step: int | None = None,
        happened: bool,
        output: JSONValue = None,
        by: str | None = None,
    ) -> str:
        """Record an operator's decision about a parked execution.

        The side-effect step ``step`` started and its end is in no record:
        say whether it ``happened`` (and the ``output`` it gave, JSON) or not.
        An execution parked ``attempts_exhausted`` is tried again with no
        ``step`` and ``happened=False``.
        The decision (who, when, what) is a record of the execution's resume
        chain, sealed like any record; the next resume (recovery's, or
        ``resume``) serves the step's output, or runs the step. Nothing runs
        here. See docs/durability.md. Added in 0.1.0.

        Args:
            execution_id: the parked execution (or any record of its chain).
            step: the number of the step in doubt (its ``ATTENTION_NEEDED``
                event's ``step``); ``None`` for ``attempts_exhausted``.
            happened: whether the side effect took place.
            output: what the step returned, when it happened.
            by: who decides; the OS user by default.

        Returns:
            The id of the decision's record.

        Raises:
            ResolveRefused: ``reason`` says why (``not_parked``,
                ``not_in_doubt``, ``wrong_step``, ``owned``, ``resolved``,
                ``no_store``); nothing was written.
            InvalidResolution: ``output`` is not JSON, or given for a step that
                did not happen.
            RecordNotFound, InvalidExecutionId: there is no such record.
        """
        from . import durable

        return durable.resolve(
            self,
            execution_id,
            step=step,
            happened=happened,
            output=output,
            by=_who(by),
            via="python",
        )

    def cancel(self, execution_id: str, *, by: str | None = None) -> tuple[str, bool]:
        """Cancel an execution, on any host; nothing of it runs after.

        A running execution stops at its next step boundary (its router
        polls the store for cancel requests, off the steps' path) and is
        recorded ``cancelled``; an interrupted, parked or resolved one is
        closed ``cancelled`` now. Recovery never resumes it, and a retry of
        its idempotency key answers with the cancellation. See
        docs/durability.md. Added in 0.1.0.

        Args:
            execution_id: the execution (any record of its chain).
            by: who cancels; the OS user by default.

        Returns:
            The record that holds the cancellation (or, for a running
            execution, the record its router will close so), and whether it
            is closed already.

        Raises:
            CancelRefused: ``finished`` (it completed, failed or was
                cancelled), ``cancelled`` (another request came first),
                ``no_store``; nothing was written.
            RecordNotFound, InvalidExecutionId: there is no such record.
        """
        from . import durable

        return durable.cancel(self, execution_id, by=_who(by), via="python")

    def signal(
        self,
        execution_id: str,
        name: str,
        payload: JSONValue = None,
        *,
        by: str | None = None,
    ) -> str:
        """Send signal ``name`` with a JSON ``payload`` to an execution.

        Kept in the store for the execution (its resume chain) until a
        ``ctx.wait_for(name)`` takes it, even one that has not begun; an
        execution waiting for it is resumed by the next recovery scan. See
        docs/flow-control.md. Added in 0.1.0.

        Args:
            execution_id: the execution (any record of its chain).
            name: the signal's name.
            payload: what ``wait_for`` returns (JSON, at most 64 KiB).
            by: who sends it; the OS user by default.

        Returns:
            The signal's id.

        Raises:
            InvalidSignal: the name or payload is not valid.
            SignalRefused: ``finished``, ``full`` (``MAX_SIGNALS`` kept) or
                ``no_store``; nothing was written.
            RecordNotFound, InvalidExecutionId: there is no such record.
        """
        from .signals import signal

        return signal(self, execution_id, name, payload, by=_who(by), via="python")

    async def aresume(self, execution_id: str, *, force: bool = False) -> AgentResponse:
        """The async ``resume`` (it runs on a worker thread). Added in 0.1.0."""
        import asyncio

        return await asyncio.to_thread(self.resume, execution_id, force=force)

    def _routing(self) -> Routing:
        """What resuming and keyed routing need of this router."""

        def route(env: IntentEnvelope, options: ExecutionOptions) -> AgentResponse:
            return self.route_intent(env, options=options)

        from .durable import Routing

        return Routing(self.store, self._durable, self.registry, route)

    def _route_with_key(
        self, env: IntentEnvelope, key: str, opened: Callable[[str], None] | None
    ) -> AgentResponse:
        envelope_hash = self.envelope_hash(env)
        from .durable import route_with_key

        return route_with_key(self._routing(), env, key, envelope_hash, opened)

    def envelope_hash(self, envelope: IntentEnvelope) -> str:
        """The hash ``envelope`` is recorded and looked up under (redacted if so).

        Added in 0.1.0.
        """
        return compute_hash(self._shown(envelope, None)[1])

    def configuration_for(self, envelope: IntentEnvelope) -> JSONObject:
        """The configuration ``envelope`` is routed under, as a header records it.

        ``{"fingerprint", "strategy", "agents"}``. Added in 0.1.0.
        """
        return self._configuration(envelope)

    def _serve(self, cache: ResponseCache, env: IntentEnvelope) -> AgentResponse:
        """Answer from the cache or by running; the cache gets what was recorded.

        The cache looks the redacted envelope up and keeps the redacted
        answer; the caller of a fresh execution gets it unredacted.
        """
        serving = _Serving(self, env)

        def execute(_: IntentEnvelope) -> AgentResponse:
            return serving.ran(
                self._execute_sync(env, None, serving.shown, serving.kept.append)
            )

        return serving.answer(cache.serve(serving.shown[1], execute))

    async def _aserve(self, cache: ResponseCache, env: IntentEnvelope) -> AgentResponse:
        """The async ``_serve``."""
        serving = _Serving(self, env)

        async def execute(_: IntentEnvelope) -> AgentResponse:
            return serving.ran(
                await self._execute_async(env, None, serving.shown, serving.kept.append)
            )

        return serving.answer(await cache.aserve(serving.shown[1], execute))

    def _shown(self, env: IntentEnvelope, options: ExecutionOptions | None) -> _Shown:
        """The envelope as recorded and hashed, and the redaction that made it."""
        redactor = self.redactor
        if redactor is None:
            return None, env
        parent = None if options is None else options.redaction
        redaction = Redaction(redactor, parent)
        return redaction, redaction.envelope(env)

    def _execute_sync(
        self,
        env: IntentEnvelope,
        options: ExecutionOptions | None = None,
        shown: _Shown | None = None,
        keep: _Keep | None = None,
    ) -> AgentResponse:
        ex, steps = self._begin(env, options, shown)
        steps = self._queues.gate(env, options, ex, steps)  # waits for its turn
        try:
            run = next(steps)
            while True:
                run = steps.send(self._run_sync(run, env, ex))
        except StopIteration as stop:
            response: AgentResponse = stop.value
        except BaseException as exc:
            response = self._failed(ex, exc)
        return self._end(ex, response, options, keep)

    async def _execute_async(
        self,
        env: IntentEnvelope,
        options: ExecutionOptions | None = None,
        shown: _Shown | None = None,
        keep: _Keep | None = None,
    ) -> AgentResponse:
        ex, steps = self._begin(env, options, shown)
        try:
            steps = await self._queues.agate(env, options, ex, steps)  # its turn
            run = next(steps)
            while True:
                run = steps.send(await self._run_async(run, env, ex))
        except StopIteration as stop:
            response: AgentResponse = stop.value
        except BaseException as exc:
            response = self._failed(ex, exc)
        return self._end(ex, response, options, keep)

    def _failed(self, ex: Execution, exc: BaseException) -> AgentResponse:
        """What a driver of ``ex``'s plan answers when running it raised ``exc``.

        A bug of ours is still an answer, never a crash; a cancellation or an
        interruption closes the record unfinished and goes on.
        """
        if isinstance(exc, Exception):
            return internal_error(ex, exc)
        self._abandoned(ex, exc)
        raise exc

    def _end(
        self,
        ex: Execution,
        response: AgentResponse,
        options: ExecutionOptions | None,
        keep: _Keep | None,
    ) -> AgentResponse:
        """Record and observe ``ex``'s answer; the drivers of its plan end here."""
        if ex.recorder is not None:
            if keep is None and options is not None:
                keep = options.recorded
            response = self._finish(ex, response, keep)
        if ex.observed is not None:
            ex.observers.execution_ended(ex.observed, response)
        return response

    def _begin(
        self,
        env: IntentEnvelope,
        options: ExecutionOptions | None,
        shown: _Shown | None = None,
    ) -> tuple[Execution, Plan]:
        """Open an execution (its id and, with a store, its record) and its plan.

        The record holds the envelope as ``shown`` (redacted), hashed so. The
        plan (``strategies.plan``) is the one flow of the drivers: ``_execute_sync``
        runs its agent runs here, ``_execute_async`` in the event loop.
        """
        started = time.perf_counter()
        decision, decision_wire, order = self._decide(env)
        opts = options or _NO_OPTIONS
        store = opts.store or self.store
        if store is None:
            ex = Execution(
                opts.execution_id or new_execution_id(),
                None,
                None,
                started,
                cassette=opts.cassette,
                observers=self._observers,
                origin_id=opts.origin_execution_id,
            )
        else:
            redaction, recorded = shown or self._shown(env, options)
            envelope_hash = opts.envelope_hash or compute_hash(recorded)
            recorder = Recorder(
                store,
                recorded.to_wire(),
                envelope_hash,
                env.metadata.request_id,
                execution_id=opts.execution_id,
                parent_execution_id=opts.parent_execution_id,
                received=opts.received,
                configuration=self._configuration(env),
                redaction=redaction,
                started=started,
                announce=opts.opened is not None,
            )
            execution_id = recorder.execution_id or new_execution_id()
            watch = self._cancels if store is self._store else None
            ex = Execution(
                execution_id,
                envelope_hash,
                recorder,
                started,
                store=store,
                cassette=opts.cassette,
                observers=self._observers,
                origin_id=opts.origin_execution_id,
                cancel=None
                if watch is None
                else watch.watch(
                    opts.origin_execution_id or execution_id, execution_id
                ),
            )
        if opts.opened is not None and (
            ex.recorder is not None and ex.recorder.error is None
        ):
            try:
                opts.opened(ex.execution_id)  # the record is open: say so
            except BaseException:
                ex.recorder.abandon()  # no agent runs: it reads incomplete
                raise
        if ex.observers.members:
            self._observe(ex, env, options)
        return ex, plan(env, decision, decision_wire, order, ex)

    def _observe(
        self, ex: Execution, env: IntentEnvelope, options: ExecutionOptions | None
    ) -> None:
        """What ``ex``'s observers are told about it (``plan`` tells them it began)."""
        looked_up = (
            self.cache is not None
            and options is None
            and env.routing.cache is not CacheDirective.BYPASS
        )
        ex.observed = ObservedExecution(
            ex.execution_id,
            None if options is None else options.parent_execution_id,
            env.intent.name,
            env.intent.version,
            ex.envelope_hash,
            "miss" if looked_up else "bypass",
            time.time_ns(),
        )

    def _configuration(self, env: IntentEnvelope) -> JSONObject:
        """The configuration ``env`` is routed under, for the record's header."""
        key = (
            self.registry.generation,
            env.intent.name,
            env.intent.version,
            env.routing.strategy,
        )
        found = self._configs.get(key)
        if found is None:
            if len(self._configs) >= _DECISION_CACHE_SIZE:
                self._configs.clear()
            found = configuration(self.registry, env.intent, env.routing.strategy)
            self._configs[key] = found
        return found

    def _abandoned(self, ex: Execution, exc: BaseException) -> None:
        """A routing call cancelled or interrupted: no answer to record.

        The record is closed unfinished at once (it reads incomplete) and
        observers are told the execution ended, ``CANCELLED``.
        """
        if ex.recorder is not None:
            ex.recorder.abandon()
        self._queues.abandon(ex)
        self._unwatch(ex)
        if ex.observed is not None:
            answer = interrupted(ex, exc)
            ex.observers.execution_ended(ex.observed, answer)

    def _unwatch(self, ex: Execution) -> None:
        """Stop looking for cancel requests of ``ex`` (it ended)."""
        cancel, watch = ex.cancel, self._cancels
        if cancel is not None and watch is not None:
            watch.unwatch(ex.origin_id, cancel)

    def _finish(
        self, ex: Execution, response: AgentResponse, keep: _Keep | None
    ) -> AgentResponse:
        """Close the record; hand ``keep`` the answer as recorded, return it live."""
        recorder = ex.recorder
        assert recorder is not None  # the drivers call this only when recording
        attention = ex.attention()
        waiting = ex.waits.waiting
        cancel = ex.cancel
        if cancel is not None:
            self._unwatch(ex)
            if cancel.observed and cancel.request is not None:
                # stopped at a step boundary: recorded as its cancellation
                request = cancel.request
                from . import durable

                recorder.event(EventType.OPERATOR_DECISION, durable.cancelling(request))
                response = durable.cancelled(response, request)
                attention = waiting = None
        if attention is not None:  # a resumed execution its journal parked
            from .durable import parked

            recorder.event(EventType.ATTENTION_NEEDED, attention)
            response = parked(response, attention)
        elif waiting is not None:  # it waits: its process lets it go
            return close_waiting(ex.store, recorder, ex.execution_id, waiting)
        recorded = recorder.complete(response)
        error = recorder.error
        if error is not None:
            same = recorded is response
            response = _failed(response, error)
            recorded = response if same else _failed(recorded, error)
        if keep is not None:
            keep(recorded)
        return response

    def _decide(
        self, env: IntentEnvelope
    ) -> tuple[RoutingDecision, JSONObject, tuple[RegisteredAgent, ...]]:
        """The decision for ``env``, its wire form and the agents to run, in order.

        Cached per intent, strategy, target and fallback agents until the
        registry changes; the wire form is shared by every record of it.
        """
        routing = env.routing
        intent = env.intent
        fallback = routing.fallback_agents
        key = (
            intent.name,
            intent.version,
            routing.strategy,
            routing.target_agent,
            tuple(fallback) if fallback else (),
        )
        generation = self.registry.generation
        cached = self._decisions.get(key)
        if cached is not None and cached[0] == generation:
            return cached[1], cached[2], cached[3]
        decision, order = decide(self.registry, env)
        wire = decision.model_dump(mode="json")
        if len(self._decisions) >= _DECISION_CACHE_SIZE:
            self._decisions.clear()
        self._decisions[key] = (generation, decision, wire, order)
        return decision, wire, order

    # -- the drivers -----------------------------------------------------------

    def _context(
        self, agent: RegisteredAgent, env: IntentEnvelope, ex: Execution, attempt: int
    ) -> AgentContext:
        timeout_ms = env.routing.timeout_ms
        deadline = None if timeout_ms is None else time.monotonic() + timeout_ms / 1000
        return AgentContext(
            ex.execution_id, agent.name, attempt, env, deadline, self, ex
        )

    def _run_sync(self, run: Run, env: IntentEnvelope, ex: Execution) -> list[Outcome]:
        agents, race, attempt = run
        agent = agents[0]
        if race or agent.is_async:
            return self._in_loop(self._run_async(run, env, ex))
        ctx = self._context(agent, env, ex, attempt)
        timeout_ms = env.routing.timeout_ms
        start = time.perf_counter()
        if timeout_ms is None:
            token = CURRENT.set(ctx)  # for @step functions the agent calls
            try:
                result = _call(agent, env, ctx, ex)
            except Exception as exc:
                return [from_exception(agent.name, exc, ms_since(start))]
            finally:
                CURRENT.reset(token)
        else:
            from concurrent.futures import wait

            future = self._executor.submit(
                _entered(ctx).run, _call, agent, env, ctx, ex
            )
            done, _ = wait([future], timeout=timeout_ms / 1000)
            if not done:
                # A thread cannot be stopped: the attempt is abandoned and its
                # eventual result ignored; a side effect it is making is let
                # finish first, and none is started after.
                future.cancel()
                guard = ctx.guard
                finished = guard.wait() if guard.stop("timeout") else []
                return [timed_out(agent.name, timeout_ms, ms_since(start), finished)]
            error = future.exception()
            if error is not None:
                return [from_exception(agent.name, error, ms_since(start))]
            result = future.result()
        if type(result) is not dict and inspect.isawaitable(result):
            return self._in_loop(self._await_result(agent, result, start, ctx, ex))
        return [from_result(agent.name, result, ms_since(start))]

    async def _await_result(
        self,
        agent: RegisteredAgent,
        result: Awaitable[object],
        start: float,
        ctx: AgentContext,
        ex: Execution,
    ) -> list[Outcome]:
        CURRENT.set(ctx)  # in this task's own context: nothing to reset
        try:
            with ex.attempt_scope(ctx.attempt):
                value = await result
        except Exception as exc:
            return [from_exception(agent.name, exc, ms_since(start))]
        return [from_result(agent.name, value, ms_since(start))]

    async def _invoke(
        self,
        agent: RegisteredAgent,
        env: IntentEnvelope,
        ctx: AgentContext,
        ex: Execution,
    ) -> object:
        CURRENT.set(ctx)  # in this task's own context: nothing to reset
        if agent.is_async:
            with ex.attempt_scope(ctx.attempt):  # this task runs the agent
                result: object = agent.call(env, ctx)
                return await result if inspect.isawaitable(result) else result
        import asyncio

        loop = asyncio.get_running_loop()
        result = await loop.run_in_executor(
            self._executor, contextvars.copy_context().run, _call, agent, env, ctx, ex
        )
        if inspect.isawaitable(result):  # a sync callable that made a coroutine
            with ex.attempt_scope(ctx.attempt):
                result = await result
        return result

    async def _run_async(
        self, run: Run, env: IntentEnvelope, ex: Execution
    ) -> list[Outcome]:
        import asyncio

        agents, race, first_attempt = run
        timeout_ms = env.routing.timeout_ms
        start = time.perf_counter()
        contexts = [
            self._context(agent, env, ex, number)
            for number, agent in enumerate(agents, first_attempt)
        ]
        tasks = {
            asyncio.ensure_future(self._invoke(agent, env, ctx, ex)): agent
            for agent, ctx in zip(agents, contexts, strict=True)
        }
        attempts = dict(zip(tasks, contexts, strict=True))
        deadline = start + timeout_ms / 1000 if timeout_ms else None
        outcomes: list[Outcome] = []
        pending = set(tasks)
        while pending:
            remaining = None if deadline is None else deadline - time.perf_counter()
            done, pending = await asyncio.wait(
                pending,
                timeout=remaining if remaining is None else max(remaining, 0),
                return_when=asyncio.FIRST_COMPLETED,
            )
            if not done:
                break  # the deadline passed
            for task in done:
                name = tasks[task].name
                error = task.exception()
                if error is not None:
                    outcomes.append(from_exception(name, error, ms_since(start)))
                else:
                    outcomes.append(from_result(name, task.result(), ms_since(start)))
            if race and any(o.ok for o in outcomes):
                break
        expired = deadline is not None and time.perf_counter() >= deadline
        guards = {task: attempts[task].guard for task in pending}
        running = [
            guards[task]
            for task in pending
            if guards[task].stop("timeout" if expired else "cancelled")
        ]
        for task in pending:
            task.cancel()
        for guard in running:  # side effects are let finish, never cut in half
            await asyncio.to_thread(guard.wait)
        for task in pending:
            name, finished = tasks[task].name, guards[task].finished
            if timeout_ms is not None and expired:
                outcomes.append(timed_out(name, timeout_ms, ms_since(start), finished))
            else:
                outcomes.append(cancelled(name, ms_since(start), finished))
        return outcomes

    # -- the background loop ---------------------------------------------------

    def _in_loop(self, coro: Awaitable[_T]) -> _T:
        import asyncio

        loop = self._loop or self._start_loop()
        return asyncio.run_coroutine_threadsafe(coro, loop).result()  # type: ignore[arg-type]

    def _start_loop(self) -> asyncio.AbstractEventLoop:
        with self._loop_lock:
            if self._loop is None:
                import asyncio

                loop = asyncio.new_event_loop()
                thread = threading.Thread(
                    target=loop.run_forever, name="intentusnet-loop", daemon=True
                )
                thread.start()
                self._loop, self._loop_thread = loop, thread
            return self._loop

    @property
    def _executor(self) -> ThreadPoolExecutor:
        """The worker threads that run sync agents with a timeout, or from async.

        Made on first use: a router that never needs them does not import
        ``concurrent.futures``.
        """
        pool = self._pool
        if pool is None:
            from concurrent.futures import ThreadPoolExecutor

            with self._loop_lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(
                        max_workers=self._max_workers,
                        thread_name_prefix="intentusnet-agent",
                    )
                pool = self._pool
        return pool

    def close(self) -> None:
        """Stop the background loop and the worker threads (idempotent)."""
        if self._cancels is not None:
            self._cancels.close()
        self._queues.close()
        with self._loop_lock:
            loop, self._loop = self._loop, None
            thread, self._loop_thread = self._loop_thread, None
            pool = self._pool
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join()
            loop.close()
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> IntentRouter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


_T = TypeVar("_T")


def _call(
    agent: RegisteredAgent, env: IntentEnvelope, ctx: AgentContext, ex: Execution
) -> object:
    """Call ``agent`` inside its observers' attempt scopes, in this thread."""
    if not ex.has_attempt_scopes:
        return agent.call(env, ctx)
    with ex.attempt_scope(ctx.attempt):
        return agent.call(env, ctx)


def _entered(ctx: AgentContext) -> contextvars.Context:
    """A copy of this context in which ``ctx`` is the running agent's context.

    Sync agents that run on worker threads get it, so that ``@step`` functions
    (and the caller's own context variables) work there too.
    """
    context = contextvars.copy_context()
    context.run(CURRENT.set, ctx)
    return context


def _bind(mw: Middleware, call_next: CallNext) -> CallNext:
    async def call(env: IntentEnvelope) -> AgentResponse:
        return await mw(env, call_next)

    return call


_NO_OPTIONS: Final = ExecutionOptions()


class _Serving:
    """One call answered through the cache: what ``_serve`` and ``_aserve`` share."""

    __slots__ = ("env", "kept", "live", "observers", "shown", "started")

    def __init__(self, router: IntentRouter, env: IntentEnvelope) -> None:
        self.env = env
        self.shown = router._shown(env, None)
        self.kept: list[AgentResponse] = []  # the answer as recorded, once it ran
        self.live: list[AgentResponse] = []
        self.observers = router._observers
        self.started = time.time_ns() if self.observers else 0

    def ran(self, response: AgentResponse) -> AgentResponse:
        """Take the live answer; return the one the cache keeps."""
        self.live.append(response)
        return self.kept[0] if self.kept else response

    def answer(self, answer: AgentResponse) -> AgentResponse:
        """What the caller gets for the cache's answer; a hit is observed."""
        live, kept, observers = self.live, self.kept, self.observers
        if observers and not live:  # served by the cache: no attempts ran
            metadata, intent = answer.metadata, self.env.intent
            observed = ObservedExecution(
                metadata.original_execution_id or metadata.execution_id or "",
                None,
                intent.name,
                intent.version,
                metadata.envelope_hash,
                "hit",
                self.started,
            )
            observers.execution_started(observed)
            observers.execution_ended(observed, answer)
        return live[0] if kept and answer is kept[0] else answer


def _failed(response: AgentResponse, error: str) -> AgentResponse:
    """``response`` marked as not recorded, with why."""
    metadata = response.metadata.model_copy(update={"recording_error": error})
    return response.model_copy(update={"metadata": metadata})


def _keyed(key: str, options: ExecutionOptions | None) -> Callable[[str], None] | None:
    """Check a caller's idempotency key where it enters; return ``opened``."""
    check_idempotency_key(key)
    if options is None:
        return None
    if options != ExecutionOptions(opened=options.opened):
        raise ValueError(
            "an idempotency key is for callers: with one, options may carry only opened"
        )
    return options.opened


def _who(by: str | None) -> str:
    """Who an operator's call is by: ``by``, else the OS user."""
    import getpass

    return by if by is not None else getpass.getuser()


def _as_envelope(envelope: IntentEnvelope | Mapping[str, JSONValue]) -> IntentEnvelope:
    if isinstance(envelope, IntentEnvelope):
        return envelope
    return IntentEnvelope.model_validate(envelope)
