"""The serve flow every recording transport runs: a record, a hit, or a call.

A transport hands :class:`RecordingCore` the request and a function that makes
the call. The core keys the request (``_key``) and serves it: in replay mode
from its record (or ``CacheMiss``), else from a cache hit, else by making the
call (:class:`Call`), which is recorded; the cache is not read for a bypass.
It gives back a :class:`~._response.Response`, which the transport turns into
its library's response. Inside an agent, the request is also a step of the
agent's execution (:class:`AgentStep`). The observers are told about each call
once it is answered.

A call runs as the job of an execution routed through the transport's
``CallRouter``, under the cache's single flight. A response is read whole and
recorded, and the client gets it as it came. An event stream is passed
through instead: the routing runs on a thread (a task, for an async client),
the client reads the body as it arrives, and the job waits to record it whole
(one cut short is recorded as a failure, never served).
"""

from __future__ import annotations

import asyncio
import queue
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import contextmanager
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Final, TypeAlias, TypeVar, cast

from ..._util.choices import choice
from ..._util.jsonvalue import JSONObject
from ...cache.callrouter import JobResult, running_execution
from ...cache.replay_cache import CacheKey, ReplayCache
from ...envelope import AgentResponse, CacheDirective
from ...errors import CacheMiss
from ...routing import observing
from ...routing.agents import add_secrets, current_context, open_step, running_observers
from ...routing.seams import ObservedCall
from ._key import HTTPRequest, Made, RequestKeys, authority, tenant_hint
from ._passthrough import Arrivals, AsyncOutcome, AsyncTee, Interrupted, Outcome, Tee
from ._response import (
    CACHE_HEADER,
    HTTPResponse,
    Response,
    Responses,
    passes,
    record_of,
    response_of,
)

if TYPE_CHECKING:
    from ...routing.execution import PendingStep
    from ...store import ExecutionStore

#: Makes the call: the response's head, its (decoded) body chunks, and how to
#: close it.
Open: TypeAlias = Callable[[], tuple[HTTPResponse, Iterator[bytes], Callable[[], None]]]
AsyncOpen: TypeAlias = Callable[
    [],
    Awaitable[tuple[HTTPResponse, AsyncIterator[bytes], Callable[[], Awaitable[None]]]],
]


class TransportMode(StrEnum):
    """What a recording transport does with a request (added in 0.1.0)."""

    RECORD = "record"
    REPLAY = "replay"
    CACHE = "cache"

    @classmethod
    def parse(cls, value: object) -> TransportMode:
        """Return the mode named by ``value``.

        Raises:
            ValueError: not a mode; the message lists the valid ones.
        """
        return choice(cls, value, "transport mode")


_ASKED: Final = {
    "default": CacheDirective.DEFAULT,
    "bypass": CacheDirective.BYPASS,
    "no-store": CacheDirective.NO_STORE,
    "no_store": CacheDirective.NO_STORE,
}
#: Hits' responses (and their library's headers) are remembered up to this many,
#: by the answer served.
_HITS_KEPT: Final = 1024
_T = TypeVar("_T", Tee, AsyncTee)


class RecordingCore:
    """What every recording transport shares: envelopes, records and responses.

    It sees requests and responses through the small protocols of ``_key``
    and ``_response``, so the httpx and httpx2 transports run this one code
    and cannot drift apart. Its parts are made of the transports' arguments
    (``_transport``).
    """

    def __init__(
        self,
        store: ExecutionStore,
        mode: TransportMode,
        cache: ReplayCache | None,
        keys: RequestKeys,
        responses: Responses,
        headers: Callable[[tuple[tuple[str, str], ...]], object],
    ) -> None:
        self.mode = mode
        self.store = store
        self.keys = keys
        self.responses = responses
        #: makes headers of the transport's library (a hit's, once)
        self.headers = headers
        self.calls = keys.calls
        self.secrets = keys.secrets
        self._hits: dict[int, tuple[AgentResponse, Response]] = {}
        self.tasks: set[asyncio.Future[AgentResponse]] = set()
        self._own_cache = cache is None
        self.cache = cache if cache is not None else ReplayCache(store=store)
        self.cache.bind(store)
        self.directive = (
            CacheDirective.BYPASS
            if mode is TransportMode.RECORD
            or not self.cache.policy.allows(self.calls.intent)
            else CacheDirective.DEFAULT
        )
        #: told about every call (``add_observer`` on the transports)
        self.observers = observing.Observers()

    def handle(self, request: HTTPRequest, body: bytes, open_: Open) -> Response:
        """Answer a request from the records, or make it with ``open_`` and record it.

        The response served after a call is the one that came (unredacted).
        The observers are told about the call once it is answered.
        """
        started, observed = time.time_ns(), observers_of_call(self.observers)
        served = self.decide(request, body)
        if isinstance(served, Call):
            with served.failing():
                served = self._called(served, served.run(open_))
        return self._told(request, body, served, started, observed)

    async def ahandle(
        self, request: HTTPRequest, body: bytes, open_: AsyncOpen
    ) -> Response:
        """The async ``handle``."""
        started, observed = time.time_ns(), observers_of_call(self.observers)
        served = self.decide(request, body)
        if isinstance(served, Call):
            with served.failing():
                served = self._called(served, await served.arun(open_))
        return self._told(request, body, served, started, observed)

    def decide(self, request: HTTPRequest, body: bytes) -> Response | Call:
        """The answer the records hold for a request, or the call it needs.

        In replay mode the request's record answers (or ``CacheMiss``); else a
        cache hit does, unless the request bypasses the cache; else the call
        is made. Inside an agent, a re-run serves the request's step, and a
        failure here fails the step.

        Raises:
            ValueError: the request's cache header names no directive.
            CassetteMiss: a re-run's record does not hold the request.
        """
        key, made, step = self.opened(request, body)
        if step is not None and step.pending.served:
            return step.served()
        try:
            if self.mode is TransportMode.REPLAY:
                found = self.replay(key, request, body)
            elif key.directive is CacheDirective.BYPASS:
                found = None
            else:
                found = self.cache.hit(key)  # a hit needs no thread nor task
            if found is not None:
                return self.served(found, None, ran=False, step=step)
            made = made or self.keys.payload(request, body, key.directive)
        except BaseException as exc:
            if step is not None:
                step.failed(exc)
            raise
        return Call(self, request, made, step)

    def opened(
        self, request: HTTPRequest, body: bytes
    ) -> tuple[CacheKey, Made | None, AgentStep | None]:
        """A request's key and payload, and its step when an agent makes it.

        Raises:
            ValueError: the request's cache header names no directive.
            CassetteMiss: a re-run's record does not hold the request.
        """
        directive = self.asked(request)
        key, made = self.keys.keyed(request, body, directive)
        ctx = current_context()
        if ctx is None:
            return key, made, None
        made = made or self.keys.payload(request, body, directive)
        payload, key, redacted, _, _ = made
        # Its step's arguments are the envelope payload; its name ``http METHOD
        # HOST[:PORT]PATH`` has no scheme, no query (the arguments hold the
        # whole URL), the port only when the URL names one.
        url = request.url
        path = url.raw_path.partition(b"?")[0].decode("ascii")
        name = f"http {request.method} {authority(url)}{path}"
        pending = open_step(ctx, name, payload)
        if pending is None:  # its execution records no steps
            return key, made, None
        if not pending.served:  # a request being made: its keys are secrets
            add_secrets(ctx, self.secrets.of_request(request, redacted))
        return key, made, AgentStep(ctx.execution_id, pending)

    def asked(self, request: HTTPRequest) -> CacheDirective:
        """The directive for this request: the transport's, or what its header asks.

        The header is taken off the request, so it is neither hashed nor sent.

        Raises:
            ValueError: the header names no directive; the message lists them.
        """
        value = request.headers.get(CACHE_HEADER)
        if value is None:
            return self.directive
        del request.headers[CACHE_HEADER]
        asked = _ASKED.get(value.strip().lower())
        if asked is None:
            raise ValueError(
                f"unknown {CACHE_HEADER} request header {value!r}; "
                "use one of 'bypass', 'no-store', 'default'"
            )
        return self.directive if self.directive is CacheDirective.BYPASS else asked

    def replay(self, key: CacheKey, request: HTTPRequest, body: bytes) -> AgentResponse:
        """The recorded answer to a request, or ``CacheMiss`` (a tenant hint in it)."""
        found = self.cache.find(key, serve_errors=True)
        if found is None:
            raise CacheMiss(
                self.secrets.describe(request),
                key.envelope_hash,
                str(self.store.root),
                tenant_hint(self.store, self.keys, request, body, key.directive),
            )
        return found

    def _called(self, call: Call, outcome: AgentResponse | Response) -> Response:
        """What to serve once a call is made: its answer, or its live response."""
        if isinstance(outcome, Response):  # passed through: the step ends later
            return outcome
        return self.served(
            outcome,
            call.live,
            ran=call.ran,
            directive=call.key.directive,
            step=call.step,
        )

    def served(
        self,
        answer: AgentResponse,
        live: JSONObject | None,
        *,
        ran: bool,
        directive: CacheDirective = CacheDirective.DEFAULT,
        step: AgentStep | None = None,
    ) -> Response:
        """What to serve for an answer: the live response if a call was made.

        With the ``step`` of an agent that made the request, the step ends with
        the response as recorded, and that is what the agent gets (a re-run
        serves it the same bytes); the step names the record that answered.
        """
        if step is not None:
            data = self.data(answer, ran=ran)  # a failure is raised: not ended
            record = record_of(answer)
            step.succeeded(data, record)
            state = "hit" if live is None else _state(directive)
            return response_of(data, state, record, step.number)
        if live is None:
            return self.hit(answer, ran=ran)
        return response_of(live, _state(directive), answer.metadata.execution_id)

    def hit(self, answer: AgentResponse, *, ran: bool) -> Response:
        """A recorded answer as the response to serve: a hit.

        ``ran``: this request's own call was made (its exception is raised
        again, where the call failed without a response).
        """
        # A hit returns the same answer object each time: prepare it once.
        found = self._hits.get(id(answer))
        if found is not None and found[0] is answer:
            return found[1]
        hit = response_of(self.data(answer, ran), "hit", record_of(answer))
        hit = hit._replace(made=self.headers(hit.headers))
        if len(self._hits) >= _HITS_KEPT:
            self._hits.clear()
        self._hits[id(answer)] = (answer, hit)
        return hit

    def data(self, answer: AgentResponse, ran: bool) -> JSONObject:
        """A recorded answer's response data (its failure raised, if it has none)."""
        data: object = None
        if answer.payload is not None:
            data = answer.payload.get("response")
        elif answer.error is not None:
            data = answer.error.details.get("response")
        if not isinstance(data, dict):
            # Replay-only mode serves recorded failures, as a cache serving errors does.
            served = self.mode is TransportMode.REPLAY or self.cache.policy.serve_errors
            raise self.calls.failure(answer, ran=ran, from_records=served)
        return cast(JSONObject, data)

    def _told(
        self,
        request: HTTPRequest,
        body: bytes,
        served: Response,
        started: int,
        observed: Observed,
    ) -> Response:
        """``served``, once the observers of ``observed`` are told about the call."""
        observers, execution_id, attempt = observed
        if not observers:
            return served
        content_type = next(
            (v for k, v in served.headers if k.lower() == "content-type"), None
        )
        extensions = served.extensions
        call = ObservedCall(
            record_id=cast("str | None", extensions["intentusnet_record"]),
            execution_id=execution_id,
            attempt=attempt,
            method=request.method,
            url=self.secrets.url(request.url),
            status=served.status,
            content_type=content_type,
            request_body=body,
            response_body=served.content,
            cache=str(extensions["intentusnet_cache"]),
            started_ns=started,
            ended_ns=time.time_ns(),
        )
        for told in observers:
            told.call_made(call)
        return served

    def close(self) -> None:
        """Stop the recording router; write the cache's counts (close it if ours).

        A cache the user gave is shared: only its counts are written.
        """
        self.calls.close()
        if self._own_cache:
            self.cache.close()  # writes the counts; reopens on use
        else:
            self.cache.flush_stats()


def _state(directive: CacheDirective) -> str:
    """The cache state of a call made: ``bypass`` when the cache was not read."""
    return "bypass" if directive is CacheDirective.BYPASS else "miss"


class Call:
    """One call of a request: made, recorded, and ended in its agent's step.

    ``run`` (or ``arun``) gives the call's answer as routed, or the live
    response handed to the client when its body is passed through.
    """

    def __init__(
        self,
        core: RecordingCore,
        request: HTTPRequest,
        made: Made,
        step: AgentStep | None,
    ) -> None:
        self.core = core
        self.request = request
        self.payload, self.key, self.redacted, self.sent, self.tenant = made
        self.step = step
        #: the execution of the agent making the call, if one is
        self.parent = None if step is None else step.execution_id
        #: the response as it came, when the call was made and read whole
        self.live: JSONObject | None = None
        #: the call was made (not answered by one in flight)
        self.ran = False
        #: its body is passed through as it arrives
        self.passed = False

    def run(self, open_: Open) -> AgentResponse | Response:
        """Route the call on a thread; its answer, or its live response."""
        hand: queue.SimpleQueue[AgentResponse | Response | BaseException] = (
            queue.SimpleQueue()
        )
        settled = threading.Event()  # set once the routing is over

        def job() -> JobResult:
            self.ran = True
            response, chunks, close = open_()
            if not passes(response):
                try:
                    content = b"".join(chunks)
                finally:
                    close()
                return self._read(response, content)
            tee = Tee(chunks, close, settled)
            outcome = self._pass(response, tee, hand.put).outcome
            del tee  # the client's: a response it drops unclosed frees it
            return self._whole(response, outcome.body(), outcome)

        core, key = self.core, self.key

        def route() -> AgentResponse:
            with self.failing(once_passed=True):
                answer = core.cache.answer(
                    key,
                    lambda: core.calls.run(self.payload, job, *self._routed()),
                    missed=key.directive is not CacheDirective.BYPASS,
                )
            return self._ended(answer)

        threading.Thread(
            target=_outcome,
            args=(route, hand, settled),
            daemon=True,
            name="intentusnet-call",
        ).start()
        found = hand.get()
        if isinstance(found, BaseException):
            raise found
        return found

    async def arun(self, open_: AsyncOpen) -> AgentResponse | Response:
        """The async ``run``: the routing runs as a task."""
        hand: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        handed: list[Response] = []  # emptied when taken: nothing else keeps the tee
        settled = asyncio.Event()

        def handing(live: Response) -> None:
            handed.append(live)
            hand.set_result(None)

        async def job() -> JobResult:
            self.ran = True
            response, chunks, aclose = await open_()
            if not passes(response):
                try:
                    content = b"".join([chunk async for chunk in chunks])
                finally:
                    await aclose()
                return self._read(response, content)
            tee = AsyncTee(chunks, aclose, settled)
            outcome = self._pass(response, tee, handing).outcome
            del tee  # the client's: a response it drops unclosed frees it
            return self._whole(response, await outcome.body(), outcome)

        core, key = self.core, self.key

        async def route() -> AgentResponse:
            with self.failing(once_passed=True):
                answer = await core.cache.aanswer(
                    key,
                    lambda: core.calls.arun(self.payload, job, *self._routed()),
                    missed=key.directive is not CacheDirective.BYPASS,
                )
            return self._ended(answer)

        def done(task: asyncio.Future[AgentResponse]) -> None:
            core.tasks.discard(task)
            settled.set()
            if not task.cancelled():
                task.exception()  # after a stream was handed over, nobody awaits it

        task = asyncio.ensure_future(route())
        core.tasks.add(task)  # kept until done: it records the stream
        task.add_done_callback(done)
        either: set[asyncio.Future[Any]] = {task, hand}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if hand.done():
            return handed.pop()
        return task.result()

    def _routed(self) -> tuple[list[str], CacheDirective, str | None, str | None]:
        """How ``calls`` routes the call, after its payload and job."""
        secrets = self.core.secrets.of_request(self.request, self.redacted)
        return secrets, self.key.directive, self.parent, self.tenant

    def _pass(
        self, response: HTTPResponse, tee: _T, hand: Callable[[Response], object]
    ) -> _T:
        """Hand the live response to the client, its body passed through ``tee``.

        It is always a miss (or a bypass); its step ends once it is recorded.
        """
        self.passed = True
        number = None if self.step is None else self.step.number
        state, execution_id = _state(self.key.directive), running_execution.get()
        hand(self.core.responses.passed(response, tee, state, execution_id, number))
        return tee

    def _read(
        self, response: HTTPResponse, content: bytes, arrivals: Arrivals | None = None
    ) -> JobResult:
        """A body read whole: recorded, and kept as it came to serve."""
        self.live, recorded = self.core.responses.recorded(
            response, content, self.sent, arrivals
        )
        return recorded

    def _whole(
        self,
        response: HTTPResponse,
        content: bytes | None,
        outcome: Outcome | AsyncOutcome,
    ) -> JobResult:
        """A passed-through body, recorded once the client has read all of it.

        One cut short is the call's failure, saying who cut it: the upstream
        (reading failed) or the client (it closed the response early).
        """
        if content is None:
            who = (
                "failed before its end (the upstream broke off)"
                if outcome.failed
                else "was closed by the client before its end"
            )
            raise Interrupted(
                f"the response to {self.core.secrets.describe(self.request)} "
                f"{who}; it is not recorded as an answer"
            )
        return self._read(response, content, outcome)

    def _ended(self, answer: AgentResponse) -> AgentResponse:
        """End a passed-through response's step once it is recorded (or failed)."""
        step = self.step
        if self.passed and step is not None:  # the stream was read to its end
            try:
                data = self.core.data(answer, True)
            except Exception as exc:  # the stream was cut short, say
                step.failed(exc)
            else:
                step.succeeded(data, record_of(answer))
        return answer

    def failed(self, exc: BaseException) -> None:
        """Fail the call's step, if an agent made it (unless it has ended)."""
        if self.step is not None:
            self.step.failed(exc)

    @contextmanager
    def failing(self, *, once_passed: bool = False) -> Iterator[None]:
        """Around the call: what it raises fails its step (unless it has ended).

        ``once_passed``: around the routing, only once the client has the
        response (before that, the call's own ``failing`` does it).
        """
        try:
            yield
        except BaseException as exc:
            if self.passed or not once_passed:
                self.failed(exc)
            raise


def _outcome(
    route: Callable[[], AgentResponse],
    hand: queue.SimpleQueue[AgentResponse | Response | BaseException],
    settled: threading.Event,
) -> None:
    """Run ``route`` on a thread; its answer or exception goes to ``hand``."""
    try:
        hand.put(route())
    except BaseException as exc:  # handed to the caller, who raises it
        hand.put(exc)
    finally:
        settled.set()


class AgentStep:
    """A request's step in the execution of the agent that made it.

    Ended once: with the response as recorded and the record that answered
    it, or with the failure.
    """

    __slots__ = ("ended", "execution_id", "pending")

    def __init__(self, execution_id: str, pending: PendingStep) -> None:
        self.execution_id = execution_id
        self.pending = pending
        self.ended = False

    @property
    def number(self) -> int:
        """The step's number in the agent's execution."""
        return self.pending.number

    def served(self) -> Response:
        """A re-run's answer: the recorded response (or the recorded failure)."""
        output = self.pending.serve()
        if not isinstance(output, dict):
            raise ValueError(
                f"step {self.number} of record {self.execution_id} is not an "
                "HTTP response"
            )
        return response_of(output, "hit", self.execution_id, self.number)

    def succeeded(self, data: JSONObject, record: str | None) -> None:
        """End the step with the response ``data``, answered by ``record``."""
        self.ended = True  # first: a write that fails is not ended again
        self.pending.succeeded(data, child=record)

    def failed(self, exc: BaseException) -> None:
        """End the step with ``exc``, unless it has ended."""
        if not self.ended:
            self.ended = True
            self.pending.failed(exc)


#: Who to tell about a call (the transport's observers, then the running
#: router's), and the execution and attempt of the agent making it.
Observed: TypeAlias = tuple[tuple[observing.Observers, ...], str | None, int | None]


def observers_of_call(own: observing.Observers) -> Observed:
    """Who to tell about a call made now, and the agent's execution and attempt.

    ``own`` (the transport's) and the observers of the router whose agent is
    running, each once (an observer of both is the transport's: what it raises
    is counted there); none when nobody observes.
    """
    ctx = current_context()
    theirs = running_observers()
    if ctx is None or not theirs:
        return ((own,) if own else ()), None, None
    told = (own, theirs.removing(*own.members))
    return tuple(o for o in told if o), ctx.execution_id, ctx.attempt
