"""The recording core every HTTP transport shares (httpx and httpx2).

A transport hands :class:`RecordingCore` the request and a function that makes
the call. The core keys the request (``_key``) and serves it: in replay mode
from its record (or ``CacheMiss``), else from a cache hit, else by making the
call, which is recorded (``_call``); the cache is not read for a bypass. It
gives back a :class:`Served`: the response in plain values, which the
transport turns into its library's response, and the state its headers tell
(``_served``). Inside an agent, the request is also a step of the agent's
execution (``_steps``).
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Final, cast

from ..._util.jsonvalue import JSONObject
from ...cache.replay_cache import CacheKey, ReplayCache
from ...envelope import AgentResponse, CacheDirective
from ...errors import CacheMiss
from ...routing.agents import current_context
from ._call import Call, Handed
from ._http import AsyncOpen, HTTPRequest, Open, TransportMode
from ._key import Made, RequestKeys
from ._observed import Observed, Observers, observers_of_call, tell_call
from ._response import Responses, ready_of
from ._served import CACHE_HEADER, Served, record_of
from ._steps import AgentStep, opened_step

if TYPE_CHECKING:
    from ...store import ExecutionStore

_ASKED: Final = {
    "default": CacheDirective.DEFAULT,
    "bypass": CacheDirective.BYPASS,
    "no-store": CacheDirective.NO_STORE,
    "no_store": CacheDirective.NO_STORE,
}
#: Prepared responses are remembered up to this many.
_READY_KEPT: Final = 1024


class RecordingCore:
    """What every recording transport shares: envelopes, records and responses.

    It sees requests and responses through the small protocols of ``_http``,
    so the httpx and httpx2 transports run this one code and cannot drift
    apart. Its parts are made of the transports' arguments (``_shell``).
    """

    def __init__(
        self,
        store: ExecutionStore,
        mode: TransportMode,
        cache: ReplayCache | None,
        keys: RequestKeys,
        responses: Responses,
    ) -> None:
        self.mode = mode
        self.store = store
        self.keys = keys
        self.responses = responses
        self.calls = keys.calls
        self.secrets = keys.secrets
        self._ready: dict[int, tuple[AgentResponse, Served]] = {}
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
        self.observers = Observers()

    def handle(self, request: HTTPRequest, body: bytes, open_: Open) -> Served:
        """Answer a request from the records, or make it with ``open_`` and record it.

        The response served after a call is the one that came (unredacted).
        The observers are told about the call once it is answered.
        """
        started = time.time_ns()
        observed = observers_of_call(self.observers())
        served = self.decide(request, body)
        if isinstance(served, Call):
            call = served
            try:
                served = self._called(call, call.run(open_))
            except BaseException as exc:
                call.failed(exc)
                raise
        if observed[0]:
            self._tell(request, body, served, started, observed)
        return served

    async def ahandle(
        self, request: HTTPRequest, body: bytes, open_: AsyncOpen
    ) -> Served:
        """The async ``handle``."""
        started = time.time_ns()
        observed = observers_of_call(self.observers())
        served = self.decide(request, body)
        if isinstance(served, Call):
            call = served
            try:
                served = self._called(call, await call.arun(open_))
            except BaseException as exc:
                call.failed(exc)
                raise
        if observed[0]:
            self._tell(request, body, served, started, observed)
        return served

    def decide(self, request: HTTPRequest, body: bytes) -> Served | Call:
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
                found = self.replay(key, request)
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
        if current_context() is None:
            return key, made, None
        made = made or self.keys.payload(request, body, directive)
        payload, key, redacted, _, _ = made
        step = opened_step(
            request, payload, lambda: self.secrets.of_request(request, redacted)
        )
        return key, made, step

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

    def replay(self, key: CacheKey, request: HTTPRequest) -> AgentResponse:
        """The recorded answer to a request, or ``CacheMiss``."""
        found = self.cache.find(key, serve_errors=True)
        if found is None:
            raise CacheMiss(
                self.secrets.describe(request), key.envelope_hash, str(self.store.root)
            )
        return found

    def _called(self, call: Call, outcome: AgentResponse | Handed) -> Served:
        """What to serve once a call is made: its answer, or its live response."""
        directive, step = call.key.directive, call.step
        if isinstance(outcome, Handed):  # always a miss; the step ends later
            number = None if step is None else step.number
            ready = self.responses.head(outcome.response)
            return Served(ready, _state(directive), outcome.record, outcome.tee, number)
        return self.served(
            outcome, call.live, ran=call.ran, directive=directive, step=step
        )

    def served(
        self,
        answer: AgentResponse,
        live: JSONObject | None,
        *,
        ran: bool,
        directive: CacheDirective = CacheDirective.DEFAULT,
        step: AgentStep | None = None,
    ) -> Served:
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
            return Served(ready_of(data), state, record, step=step.number)
        if live is None:
            return self.ready(answer, ran=ran)
        return Served(ready_of(live), _state(directive), answer.metadata.execution_id)

    def ready(self, answer: AgentResponse, *, ran: bool) -> Served:
        """A recorded answer as the response to serve: a hit.

        ``ran``: this request's own call was made (its exception is raised
        again, where the call failed without a response).
        """
        # A hit returns the same answer object each time: prepare it once.
        found = self._ready.get(id(answer))
        if found is not None and found[0] is answer:
            return found[1]
        ready = Served(ready_of(self.data(answer, ran)), "hit", record_of(answer))
        if len(self._ready) >= _READY_KEPT:
            self._ready.clear()
        self._ready[id(answer)] = (answer, ready)
        return ready

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

    def _tell(
        self,
        request: HTTPRequest,
        body: bytes,
        served: Served,
        started: int,
        observed: Observed,
    ) -> None:
        ready = served.ready
        tell_call(
            (request.method, self.secrets.url(request.url), body),
            (ready.status, ready.headers, ready.content),
            served.cache,
            served.record,
            started,
            observed,
        )

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
