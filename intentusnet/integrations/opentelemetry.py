"""OpenTelemetry traces of a router's executions (the ``otel`` extra).

::

    from intentusnet.integrations.opentelemetry import instrument

    instrumentation = instrument(router)  # the global TracerProvider
    ...
    instrumentation.uninstrument()

Each execution becomes a span, with a span per agent attempt inside it and a
span per step inside its attempt (a step called inside another step nests in
it). A child intent (``ctx.route``) is its parent's ``route:`` step span,
with the child execution's span inside it. A replay-cache hit is one span
with ``intentusnet.cache = "hit"`` and no attempts. An HTTP call through a
recording transport, made by an agent of the router (or through a transport
instrumented itself), is a client span with the GenAI semantic-convention
attributes when it is an LLM call. Spans are parented explicitly, by
execution id, attempt and step number, so a sync agent on a worker thread or
an async one on the router's loop nests the same. While an agent runs, its
attempt's span is the current span (a step's, while the step's function
runs), in the thread or task running it: spans the user's code starts there
nest in it. The attributes are listed in docs/observability.md.

Needs the ``otel`` extra: ``pip install 'intentusnet[otel]'``.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final, Protocol
from urllib.parse import urlsplit

try:
    from opentelemetry import trace
    from opentelemetry.context import Context, attach, detach
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError as exc:  # the extra is not installed
    raise ImportError(
        "intentusnet.integrations.opentelemetry needs OpenTelemetry: "
        "pip install 'intentusnet[otel]'"
    ) from exc

from .. import __version__
from ..routing.seams import ExecutionObserver, ObservedCall, ObservedExecution
from .usage import Usage, read_usage

if TYPE_CHECKING:
    from contextvars import Token

    from ..envelope import AgentResponse, ErrorInfo

__all__ = ["Instrumentation", "Observable", "instrument"]

#: The instrumentation scope of every span.
TRACER_NAME: Final = "intentusnet"
#: Operations ``read_usage`` names that the GenAI conventions call ``chat``
#: (OpenAI's Responses API answers a conversation as chat completions do).
_CHAT_OPERATIONS: Final = frozenset({"chat", "responses"})


class Observable(Protocol):
    """What ``instrument`` instruments: an ``IntentRouter`` or a recording transport.

    Added in 0.1.0.
    """

    def add_observer(self, observer: ExecutionObserver) -> None:
        """Tell ``observer`` what happens from now on."""

    def remove_observer(self, observer: ExecutionObserver) -> None:
        """Stop telling ``observer``."""


#: The instrumentation of each instrumented object (so instrumenting twice is once).
_INSTRUMENTED: weakref.WeakKeyDictionary[Observable, Instrumentation] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()


def instrument(
    target: Observable, tracer_provider: TracerProvider | None = None
) -> Instrumentation:
    """Trace what ``target`` (an ``IntentRouter`` or a recording transport) does.

    Args:
        target: the router whose executions become traces, or a
            ``RecordingTransport`` (httpx or httpx2, sync or async) whose
            calls become spans.
        tracer_provider: where the spans go; the global provider
            (``opentelemetry.trace.get_tracer_provider()``) when ``None``.

    Returns:
        The instrumentation: ``uninstrument()`` stops it. Instrumenting an
        object already instrumented returns its instrumentation as it is
        (``tracer_provider`` is not changed): spans are never doubled.

    Added in 0.1.0.
    """
    with _LOCK:
        found = _INSTRUMENTED.get(target)
        if found is not None:
            return found
        instrumentation = Instrumentation(target, tracer_provider)
        _INSTRUMENTED[target] = instrumentation
    target.add_observer(instrumentation)
    return instrumentation


def _context(span: Span) -> Context:
    return trace.set_span_in_context(span)


class _Current:
    """``span`` as the current span, in this thread or task, until left.

    Its status and events stay the router's to set: an exception leaving the
    block is the attempt's or step's failure, told to the observer as such.
    """

    __slots__ = ("_span", "_token")

    def __init__(self, span: Span) -> None:
        self._span = span
        self._token: Token[Context] | None = None

    def __enter__(self) -> None:
        self._token = attach(_context(self._span))

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            detach(self._token)


class Instrumentation:
    """The ``ExecutionObserver`` that turns what a router does into spans.

    Made by :func:`instrument`; spans already started when it is
    uninstrumented still end.

    Added in 0.1.0.
    """

    def __init__(
        self, target: Observable, tracer_provider: TracerProvider | None = None
    ) -> None:
        self._target: weakref.ref[Observable] = weakref.ref(target)
        self._tracer = trace.get_tracer(
            TRACER_NAME, __version__, tracer_provider=tracer_provider
        )
        # Open spans, by execution id, (execution id, attempt) and (execution
        # id, step); a child execution's parent span by the child's id. One
        # dict operation at a time: the router calls from several threads.
        self._executions: dict[str, Span] = {}
        self._attempts: dict[tuple[str, int], Span] = {}
        self._steps: dict[tuple[str, int], tuple[Span, str | None]] = {}
        self._children: dict[str, Span] = {}

    def uninstrument(self) -> None:
        """Stop making spans for executions that start from now on."""
        target = self._target()
        with _LOCK:
            if target is not None and _INSTRUMENTED.get(target) is self:
                del _INSTRUMENTED[target]
        if target is not None:
            target.remove_observer(self)

    # -- executions ---------------------------------------------------------------

    def execution_started(self, execution: ObservedExecution) -> None:
        """Start the execution's span (a hit's is made whole when it ends)."""
        if execution.cache == "hit":
            return
        parent = self._children.pop(execution.execution_id, None)
        span = self._tracer.start_span(
            f"intent {execution.intent}",
            context=None if parent is None else _context(parent),
            kind=SpanKind.INTERNAL,
            attributes=_execution_attributes(execution),
            start_time=execution.started_ns,
        )
        self._executions[execution.execution_id] = span

    def execution_ended(
        self, execution: ObservedExecution, response: AgentResponse
    ) -> None:
        """End the execution's span with the answer's status and agent."""
        if execution.cache == "hit":
            span = self._tracer.start_span(
                f"intent {execution.intent}",
                kind=SpanKind.INTERNAL,
                attributes=_execution_attributes(execution),
                start_time=execution.started_ns,
            )
        else:
            found = self._executions.pop(execution.execution_id, None)
            if found is None:  # started before this instrumentation was added
                return
            span = found
            self._end_left_open(execution.execution_id, response)
        span.set_attribute("intentusnet.status", response.status)
        agent = response.metadata.agent
        if agent is not None:
            span.set_attribute("intentusnet.agent", agent)
        if response.error is not None:
            _failed(span, response.error)
        span.end()

    def _end_left_open(self, execution_id: str, response: AgentResponse) -> None:
        """End the spans of steps and attempts an interrupted execution left open.

        A routing call that is cancelled or interrupted ends without its steps
        and attempts ending; their spans end with the execution's, failed.
        """
        for key in [k for k in list(self._steps) if k[0] == execution_id]:
            step = self._steps.pop(key, None)
            if step is not None:
                if response.error is not None:
                    _failed(step[0], response.error)
                step[0].end()
        for key in [k for k in list(self._attempts) if k[0] == execution_id]:
            attempt = self._attempts.pop(key, None)
            if attempt is not None:
                if response.error is not None:
                    _failed(attempt, response.error)
                attempt.end()

    # -- attempts -----------------------------------------------------------------

    def attempt_started(self, execution_id: str, agent: str, attempt: int) -> None:
        """Start an attempt's span inside its execution's."""
        parent = self._executions.get(execution_id)
        if parent is None:
            return
        self._attempts[execution_id, attempt] = self._tracer.start_span(
            f"attempt {agent}",
            context=_context(parent),
            attributes={
                "intentusnet.execution_id": execution_id,
                "intentusnet.agent": agent,
                "intentusnet.attempt": attempt,
            },
        )

    def attempt_ended(
        self,
        execution_id: str,
        agent: str,
        attempt: int,
        outcome: str,
        error: ErrorInfo | None,
    ) -> None:
        """End an attempt's span with its outcome (an error status unless success)."""
        span = self._attempts.pop((execution_id, attempt), None)
        if span is None:
            return
        span.set_attribute("intentusnet.outcome", outcome)
        if error is not None:
            _failed(span, error)
        span.end()

    def attempt_scope(
        self, execution_id: str, attempt: int
    ) -> AbstractContextManager[object] | None:
        """Make the attempt's span current while its agent runs.

        Spans the agent's own code starts (with any tracer) nest in it.
        """
        span = self._attempts.get((execution_id, attempt))
        return None if span is None else _Current(span)

    # -- steps --------------------------------------------------------------------

    def step_started(
        self,
        execution_id: str,
        step: int,
        name: str,
        agent: str,
        attempt: int,
        parent: int | None,
        child_execution_id: str | None,
    ) -> None:
        """Start a step's span in its parent step's, else in its attempt's."""
        outer = None
        if parent is not None:
            found = self._steps.get((execution_id, parent))
            outer = None if found is None else found[0]
        if outer is None:
            outer = self._attempts.get((execution_id, attempt))
        if outer is None:
            outer = self._executions.get(execution_id)
        if outer is None:
            return
        attributes: dict[str, str | int] = {
            "intentusnet.execution_id": execution_id,
            "intentusnet.step": step,
            "intentusnet.step.name": name,
            "intentusnet.agent": agent,
            "intentusnet.attempt": attempt,
        }
        if child_execution_id is not None:
            attributes["intentusnet.child_execution_id"] = child_execution_id
        span = self._tracer.start_span(
            f"step {name}", context=_context(outer), attributes=attributes
        )
        self._steps[execution_id, step] = (span, child_execution_id)
        if child_execution_id is not None:
            self._children[child_execution_id] = span

    def step_ended(
        self, execution_id: str, step: int, outcome: str, error: str | None
    ) -> None:
        """End a step's span with its outcome."""
        found = self._steps.pop((execution_id, step), None)
        if found is None:
            return
        span, child = found
        if child is not None:  # its execution took it, or never started
            self._children.pop(child, None)
        span.set_attribute("intentusnet.outcome", outcome)
        if outcome != "success":
            span.set_status(Status(StatusCode.ERROR, error))
        span.end()

    def step_scope(
        self, execution_id: str, step: int
    ) -> AbstractContextManager[object] | None:
        """Make the step's span current while its function runs."""
        found = self._steps.get((execution_id, step))
        return None if found is None else _Current(found[0])

    # -- HTTP calls ---------------------------------------------------------------

    def call_made(self, call: ObservedCall) -> None:
        """A client span for an HTTP call, with GenAI attributes for an LLM's."""
        outer = None
        if call.execution_id is not None and call.attempt is not None:
            outer = self._attempts.get((call.execution_id, call.attempt))
        attributes: dict[str, str | int] = {
            "http.request.method": call.method,
            "url.full": call.url,
            "http.response.status_code": call.status,
            "intentusnet.cache": call.cache,
        }
        if call.record_id is not None:
            attributes["intentusnet.execution_id"] = call.record_id
        usage = read_usage(
            urlsplit(call.url).path,
            call.request_body,
            call.response_body,
            call.content_type,
        )
        name = call.method
        if usage is not None:
            attributes.update(_genai_attributes(usage))
            name = str(attributes["gen_ai.operation.name"])
            if usage.model is not None:
                name += f" {usage.model}"
        span = self._tracer.start_span(
            name,
            context=None if outer is None else _context(outer),
            kind=SpanKind.CLIENT,
            attributes=attributes,
            start_time=call.started_ns,
        )
        if call.status >= 400:
            span.set_status(Status(StatusCode.ERROR, f"HTTP {call.status}"))
        span.end(end_time=call.ended_ns)


def _execution_attributes(execution: ObservedExecution) -> dict[str, str]:
    attributes = {
        "intentusnet.execution_id": execution.execution_id,
        "intentusnet.intent": execution.intent,
        "intentusnet.intent_version": execution.intent_version,
        "intentusnet.cache": execution.cache,
    }
    if execution.envelope_hash is not None:
        attributes["intentusnet.envelope_hash"] = execution.envelope_hash
    if execution.parent_execution_id is not None:
        attributes["intentusnet.parent_execution_id"] = execution.parent_execution_id
    return attributes


def _failed(span: Span, error: ErrorInfo) -> None:
    """Mark ``span`` failed: an error status and the error as an exception event."""
    span.set_attribute("intentusnet.error.code", error.code.value)
    exception = error.details.get("exception")
    span.add_event(
        "exception",
        {
            "exception.type": str(exception or error.code.value),
            "exception.message": error.message,
        },
    )
    span.set_status(Status(StatusCode.ERROR, error.message))


def _genai_attributes(usage: Usage) -> dict[str, str | int]:
    """The GenAI semantic-convention attributes of an LLM call."""
    operation = "chat" if usage.operation in _CHAT_OPERATIONS else usage.operation
    attributes: dict[str, str | int] = {
        # gen_ai.system is the older name of gen_ai.provider.name: both are set
        "gen_ai.provider.name": usage.provider,
        "gen_ai.system": usage.provider,
        "gen_ai.operation.name": operation,
    }
    optional = {
        "gen_ai.request.model": usage.model,
        "gen_ai.response.model": usage.response_model,
        "gen_ai.usage.input_tokens": usage.input_tokens,
        "gen_ai.usage.output_tokens": usage.output_tokens,
    }
    attributes.update({k: v for k, v in optional.items() if v is not None})
    return attributes
