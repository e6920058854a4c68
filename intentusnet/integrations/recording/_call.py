"""A request's call made and recorded: a miss, or a bypass.

The call runs as the job of an execution routed through the transport's
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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple, Protocol, TypeVar

from ..._util.jsonvalue import JSONObject
from ...cache.callrouter import CallRouter, JobResult, running_execution
from ...cache.replay_cache import ReplayCache
from ...envelope import AgentResponse, CacheDirective
from ._http import AsyncOpen, HTTPRequest, HTTPResponse, Open
from ._key import Made
from ._passthrough import Arrivals, AsyncOutcome, AsyncTee, Interrupted, Outcome, Tee
from ._response import Responses, passes
from ._secrets import Secrets
from ._served import record_of
from ._steps import AgentStep

_T = TypeVar("_T", Tee, AsyncTee)


class Recorder(Protocol):
    """What a call is made and recorded with (a ``RecordingCore``)."""

    cache: ReplayCache
    calls: CallRouter
    responses: Responses
    secrets: Secrets
    #: async routings still recording a stream handed over (kept until done)
    tasks: set[asyncio.Future[AgentResponse]]

    def data(self, answer: AgentResponse, ran: bool) -> JSONObject:
        """A recorded answer's response data (its failure raised, if it has none)."""
        ...


class Handed(NamedTuple):
    """A live response handed to the client: its head, its body, its record id."""

    response: HTTPResponse
    tee: Tee | AsyncTee
    record: str | None


class Call:
    """One call of a request: made, recorded, and ended in its agent's step.

    ``run`` (or ``arun``) gives the call's answer as routed, or the live
    response handed to the client when its body is passed through.
    """

    def __init__(
        self,
        recorder: Recorder,
        request: HTTPRequest,
        made: Made,
        step: AgentStep | None,
    ) -> None:
        self.recorder = recorder
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

    def run(self, open_: Open) -> AgentResponse | Handed:
        """Route the call on a thread; its answer, or its live response."""
        hand: queue.SimpleQueue[AgentResponse | Handed | BaseException] = (
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

        recorder, key = self.recorder, self.key

        def route() -> AgentResponse:
            with self._routing():
                answer = recorder.cache.answer(
                    key,
                    lambda: recorder.calls.run(self.payload, job, *self._routed()),
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

    async def arun(self, open_: AsyncOpen) -> AgentResponse | Handed:
        """The async ``run``: the routing runs as a task."""
        hand: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        handed: list[Handed] = []  # emptied when taken: nothing else keeps the tee
        settled = asyncio.Event()

        def handing(live: Handed) -> None:
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

        recorder, key = self.recorder, self.key

        async def route() -> AgentResponse:
            with self._routing():
                answer = await recorder.cache.aanswer(
                    key,
                    lambda: recorder.calls.arun(self.payload, job, *self._routed()),
                    missed=key.directive is not CacheDirective.BYPASS,
                )
            return self._ended(answer)

        def done(task: asyncio.Future[AgentResponse]) -> None:
            recorder.tasks.discard(task)
            settled.set()
            if not task.cancelled():
                task.exception()  # after a stream was handed over, nobody awaits it

        task = asyncio.ensure_future(route())
        recorder.tasks.add(task)  # kept until done: it records the stream
        task.add_done_callback(done)
        either: set[asyncio.Future[Any]] = {task, hand}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if hand.done():
            return handed.pop()
        return task.result()

    def _routed(self) -> tuple[list[str], CacheDirective, str | None, str | None]:
        """How ``calls`` routes the call, after its payload and job."""
        return self._secrets(), self.key.directive, self.parent, self.tenant

    @contextmanager
    def _routing(self) -> Iterator[None]:
        """Around the routing: once the client has the response, it fails the step."""
        try:
            yield
        except BaseException as exc:
            if self.passed:
                self.failed(exc)
            raise

    def _pass(
        self, response: HTTPResponse, tee: _T, hand: Callable[[Handed], object]
    ) -> _T:
        """Hand the live response to the client, its body passed through ``tee``."""
        self.passed = True
        hand(Handed(response, tee, running_execution.get()))
        return tee

    def _secrets(self) -> list[str]:
        return self.recorder.secrets.of_request(self.request, self.redacted)

    def _read(
        self, response: HTTPResponse, content: bytes, arrivals: Arrivals | None = None
    ) -> JobResult:
        """A body read whole: recorded, and kept as it came to serve."""
        self.live, recorded = self.recorder.responses.recorded(
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
                f"the response to {self.recorder.secrets.describe(self.request)} "
                f"{who}; it is not recorded as an answer"
            )
        return self._read(response, content, outcome)

    def _ended(self, answer: AgentResponse) -> AgentResponse:
        """End a passed-through response's step once it is recorded (or failed)."""
        step = self.step
        if self.passed and step is not None:  # the stream was read to its end
            try:
                data = self.recorder.data(answer, True)
            except Exception as exc:  # the stream was cut short, say
                step.failed(exc)
            else:
                step.succeeded(data, record_of(answer))
        return answer

    def failed(self, exc: BaseException) -> None:
        """Fail the call's step, if an agent made it (unless it has ended)."""
        if self.step is not None:
            self.step.failed(exc)


def _outcome(
    route: Callable[[], AgentResponse],
    hand: queue.SimpleQueue[AgentResponse | Handed | BaseException],
    settled: threading.Event,
) -> None:
    """Run ``route`` on a thread; its answer or exception goes to ``hand``."""
    try:
        hand.put(route())
    except BaseException as exc:  # handed to the caller, who raises it
        hand.put(exc)
    finally:
        settled.set()
