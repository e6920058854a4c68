"""One call of a plain callable, routed and recorded like any intent.

``@cached`` and the httpx transports turn a call (a function's arguments, an
HTTP request) into an envelope and route it through a router with one agent, so
that it is recorded, hashed and replayed exactly like an intent a caller sends.
The agent runs the call's own job, found by the envelope's request id; an
exception the job raised is kept (by execution id) so that the caller gets the
very exception back, not a description of it. A failure served from a record
later is a ``CachedCallError``, in this process as in any other.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Final, TypeAlias

from .._util.ids import new_request_id
from .._util.jsonvalue import JSONObject
from ..envelope import AgentResponse, CacheDirective, IntentEnvelope, IntentRef
from ..errors import CachedCallError
from ..hashing import canonical_json, hash_bytes, hash_parts, hashed_view
from ..routing.agents import AgentContext, add_secrets
from ..routing.router import IntentRouter
from ..routing.seams import ExecutionOptions
from .replay_cache import CacheKey

if TYPE_CHECKING:
    from ..routing.redact import Redactor
    from ..store import ExecutionStore

__all__ = [
    "AsyncJob",
    "CallRouter",
    "Job",
    "JobResult",
    "running_execution",
]

#: What a job returns: the answer's payload, or an AgentResponse (an error).
JobResult: TypeAlias = JSONObject | AgentResponse
Job: TypeAlias = Callable[[], JobResult]
AsyncJob: TypeAlias = Callable[[], Awaitable[JobResult]]
#: The id of the execution whose job is running (read by a job that hands its
#: response over before it is recorded).
running_execution: ContextVar[str | None] = ContextVar(
    "intentusnet_running_execution", default=None
)
#: Exceptions of failed calls are kept this long (in calls), for their waiters.
_KEPT_FAILURES: Final = 64
#: Tenants whose hashed bytes after the payload are kept (emptied when full).
_SUFFIXES_KEPT: Final = 1024


class CallRouter:
    """Routes calls of one kind (one intent) through a one-agent router.

    Each call names its tenant (hashed with it), so one router serves any
    number of tenants.

    Args:
        store: where the calls are recorded.
        intent: the intent name of every call.
        version: its version.
        agent: the agent's name in the records.
        is_async: the jobs are coroutines (``arun``) rather than plain (``run``).
        redactor: the router's redactor (its answers and error texts are
            recorded redacted).
    """

    def __init__(
        self,
        store: ExecutionStore,
        *,
        intent: str,
        version: str,
        agent: str,
        is_async: bool,
        redactor: Redactor | None = None,
    ) -> None:
        self.intent = intent
        self.version = version
        self.router = IntentRouter(store=store, max_workers=4, redactor=redactor)
        #: each call's job and the secrets it names, by request id
        self._jobs: dict[str, tuple[Job | AsyncJob, Collection[str]]] = {}
        self._failures: OrderedDict[str, BaseException] = OrderedDict()
        self._lock = threading.Lock()
        handler = self._ahandle if is_async else self._handle
        self.router.agent(IntentRef(name=intent, version=version), name=agent)(handler)
        self._intent: JSONObject = {"name": intent, "version": version}
        # The hashed view (DESIGN §3) but for the payload and the tenant never
        # changes: its canonical bytes before the payload are made once, as
        # the envelope model does, and those after it hold the tenant.
        self._prefix, _ = hash_parts(hashed_view(self._wire(None)))
        #: the canonical bytes after the payload, per tenant (made once each)
        self._suffixes: dict[str | None, bytes] = {}

    def _wire(self, tenant: str | None) -> JSONObject:
        return {"intent": self._intent, "context": {"tenant": tenant}}

    def key(
        self,
        payload: JSONObject,
        directive: CacheDirective = CacheDirective.DEFAULT,
        tenant: str | None = None,
    ) -> CacheKey:
        """The cache key of a call with this payload for ``tenant`` (its hash).

        Raises:
            EnvelopeValidationError: the payload holds a value JSON cannot carry;
                the path is relative to the payload.
        """
        body = canonical_json(payload)
        suffix = self._suffixes.get(tenant)
        if suffix is None:
            if len(self._suffixes) >= _SUFFIXES_KEPT:
                self._suffixes.clear()
            _, suffix = hash_parts(hashed_view(self._wire(tenant)))
            self._suffixes[tenant] = suffix
        return CacheKey(
            hash_bytes(self._prefix + body + suffix),
            self.intent,
            self.version,
            directive,
        )

    def envelope(
        self,
        payload: JSONObject,
        request_id: str,
        directive: CacheDirective = CacheDirective.DEFAULT,
        tenant: str | None = None,
    ) -> IntentEnvelope:
        """The envelope a call is recorded with (its cache directive included)."""
        wire: JSONObject = {
            **self._wire(tenant),
            "payload": payload,
            "metadata": {"requestId": request_id},
        }
        if directive is not CacheDirective.DEFAULT:
            # Not hashed; a no_store record is never adopted by a cache later.
            wire["routing"] = {"cache": directive.value}
        return IntentEnvelope.model_validate(wire)

    def run(
        self,
        payload: JSONObject,
        job: Job,
        secrets: Collection[str] = (),
        directive: CacheDirective = CacheDirective.DEFAULT,
        parent: str | None = None,
        tenant: str | None = None,
    ) -> AgentResponse:
        """Route one call whose work is ``job``; its answer as recorded.

        ``secrets`` (a request's keys) are replaced by markers wherever they
        appear in what is recorded, error messages included; ``directive`` is
        recorded in the envelope; ``parent`` is the execution whose agent made
        the call, if any (the record's ``parentExecutionId``); ``tenant`` the
        tenant it is made for.
        """
        with self._routing(job, secrets, parent) as (request_id, options, kept):
            env = self.envelope(payload, request_id, directive, tenant)
            live = self.router.route_intent(env, options=options)
        return kept[0] if kept else live

    async def arun(
        self,
        payload: JSONObject,
        job: AsyncJob,
        secrets: Collection[str] = (),
        directive: CacheDirective = CacheDirective.DEFAULT,
        parent: str | None = None,
        tenant: str | None = None,
    ) -> AgentResponse:
        """The async ``run``."""
        with self._routing(job, secrets, parent) as (request_id, options, kept):
            env = self.envelope(payload, request_id, directive, tenant)
            live = await self.router.route(env, options=options)
        return kept[0] if kept else live

    @contextmanager
    def _routing(
        self, job: Job | AsyncJob, secrets: Collection[str], parent: str | None
    ) -> Iterator[tuple[str, ExecutionOptions, list[AgentResponse]]]:
        """A call's request id and options while ``run`` or ``arun`` routes it.

        Its job is found by the request id meanwhile; the list gets the answer
        as recorded.
        """
        request_id = new_request_id()
        self._jobs[request_id] = (job, secrets)
        kept: list[AgentResponse] = []
        options = ExecutionOptions(parent_execution_id=parent, recorded=kept.append)
        try:
            yield request_id, options, kept
        finally:
            del self._jobs[request_id]

    def failure(
        self, response: AgentResponse, *, ran: bool, from_records: bool
    ) -> BaseException:
        """What to raise for an error ``response`` that carries no answer.

        The call's own exception, if this process saw it and the caller ran the
        job or waited on the call that did (``ran``, or ``from_records`` False:
        the cache serves no recorded failure, so one shared with the caller came
        from a call in flight). Otherwise the failure was served from a record,
        here or in another process: ``CachedCallError`` carrying the recorded
        error, as documented.

        Args:
            response: the error answer.
            ran: this caller's own call ran the job.
            from_records: recorded failures may be served to this caller (the
                cache serves errors, or replay-only mode).
        """
        metadata = response.metadata
        execution_id = metadata.original_execution_id or metadata.execution_id
        if execution_id is not None and (ran or not from_records):
            with self._lock:
                kept = self._failures.get(execution_id)
            if kept is not None:
                return kept
        error = response.error
        return CachedCallError(
            {} if error is None else error.model_dump(mode="json"),
            execution_id or "",
        )

    def close(self) -> None:
        """Stop the router's threads."""
        self.router.close()

    # -- the agent ----------------------------------------------------------------

    def _handle(self, env: IntentEnvelope, ctx: AgentContext) -> JobResult:
        with self._running(env, ctx) as job:
            result = job()
        assert not isinstance(result, Awaitable)  # a sync job by construction
        return result

    async def _ahandle(self, env: IntentEnvelope, ctx: AgentContext) -> JobResult:
        with self._running(env, ctx) as job:
            result = job()
            return await result if isinstance(result, Awaitable) else result

    @contextmanager
    def _running(
        self, env: IntentEnvelope, ctx: AgentContext
    ) -> Iterator[Job | AsyncJob]:
        """The agent's flow around its job (``_handle``, ``_ahandle``).

        What the job raises is kept for its caller.
        """
        job, secrets = self._jobs[env.metadata.request_id]
        if secrets:
            add_secrets(ctx, secrets)
        running = running_execution.set(ctx.execution_id)
        try:
            yield job
        except Exception as exc:
            self._keep(ctx.execution_id, exc)
            raise
        finally:
            running_execution.reset(running)

    def _keep(self, execution_id: str, exc: BaseException) -> None:
        with self._lock:
            self._failures[execution_id] = exc
            while len(self._failures) > _KEPT_FAILURES:
                self._failures.popitem(last=False)
