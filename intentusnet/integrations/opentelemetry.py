"""OpenTelemetry traces of a router's executions (the ``otel`` extra).

::

    from intentusnet.integrations.opentelemetry import instrument

    instrumentation = instrument(router)  # the global TracerProvider
    ...
    instrumentation.uninstrument()

Each execution becomes a span, with an ``invoke_agent`` span per agent
attempt inside it and an ``execute_tool`` span per step inside its attempt (a
step called inside another step nests in it), named and attributed as the
OpenTelemetry GenAI semantic conventions say, with OpenInference's span kinds
(_spans.py). A child intent (``ctx.route``) is its parent's ``route:`` step
span, with the child execution's span inside it. A replay-cache hit is one
span with ``intentusnet.cache = "hit"`` and no attempts. An HTTP call through
a recording transport is one client span: an agent's call is its step's span
(``chat MODEL`` for an LLM call); a call outside any agent, through a
transport instrumented itself, a span of its own. Spans are parented explicitly, by
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
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Final, Protocol

try:
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
except ImportError as exc:  # the extra is not installed
    raise ImportError(
        "intentusnet.integrations.opentelemetry needs OpenTelemetry: "
        "pip install 'intentusnet[otel]'"
    ) from exc

from .. import __version__
from ..errors import IntentusNetError
from ..routing.seams import (
    ExecutionObserver,
    ObservedCall,
    ObservedExecution,
    ObservedStep,
)
from . import _spans
from ._waiting import OpenStep, WaitingCalls

if TYPE_CHECKING:
    from ..cache.prices import PriceTable
    from ..envelope import AgentResponse, ErrorInfo
    from ..record.model import ExecutionRecord
    from ..store.protocol import ExecutionStore
    from .usage import Usage

__all__ = ["TRACER_NAME", "Instrumentation", "Observable", "instrument"]

#: The instrumentation scope of every span.
TRACER_NAME: Final = "intentusnet"
#: The steps a recording transport records an agent's HTTP calls as.
_HTTP_STEP: Final = "http "


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
    target: Observable,
    tracer_provider: TracerProvider | None = None,
    *,
    capture_content: bool = False,
    prices: PriceTable | None = None,
) -> Instrumentation:
    """Trace what ``target`` (an ``IntentRouter`` or a recording transport) does.

    Args:
        target: the router whose executions become traces, or a
            ``RecordingTransport`` (httpx or httpx2, sync or async) whose
            calls become spans.
        tracer_provider: where the spans go; the global provider
            (``opentelemetry.trace.get_tracer_provider()``) when ``None``.
        capture_content: also put inputs and outputs on the spans: an
            execution's payload and answer (``input.value``,
            ``output.value``) and an LLM call's messages
            (``gen_ai.input.messages``, ``gen_ai.output.messages``), read
            from ``target``'s store, so redacted as the records are. Off by
            default: spans then carry no payload, body or prompt. Added in
            0.1.0.
        prices: price LLM calls with this table: a call's span carries what
            it cost (``intentusnet.cost``, and ``llm.cost.total`` in USD), a
            cache hit 0 and what it saved (``intentusnet.cache.saved_cost``).
            None (the default): no cost on the spans. Added in 0.1.0.

    Returns:
        The instrumentation: ``uninstrument()`` stops it. Instrumenting an
        object already instrumented returns its instrumentation as it is
        (``tracer_provider``, ``capture_content`` and ``prices`` are not
        changed): spans
        are never doubled.

    Added in 0.1.0.
    """
    with _LOCK:
        found = _INSTRUMENTED.get(target)
        if found is not None:
            return found
        instrumentation = Instrumentation(
            target, tracer_provider, capture_content=capture_content, prices=prices
        )
        _INSTRUMENTED[target] = instrumentation
    target.add_observer(instrumentation)
    return instrumentation


def _current(span: Span) -> AbstractContextManager[object]:
    """``span`` as the current span, in this thread or task, until left.

    Its status and events stay the router's to set: an exception leaving the
    block is the attempt's or step's failure, told to the observer as such.
    """
    return trace.use_span(span, record_exception=False, set_status_on_exception=False)


class Instrumentation:
    """The ``ExecutionObserver`` that turns what a router does into spans.

    Made by :func:`instrument`; spans already started when it is
    uninstrumented still end.

    Added in 0.1.0.
    """

    def __init__(
        self,
        target: Observable,
        tracer_provider: TracerProvider | None = None,
        *,
        capture_content: bool = False,
        prices: PriceTable | None = None,
    ) -> None:
        self._target: weakref.ref[Observable] = weakref.ref(target)
        self._tracer = trace.get_tracer(
            TRACER_NAME, __version__, tracer_provider=tracer_provider
        )
        store: ExecutionStore | None = getattr(target, "store", None)
        #: where inputs and outputs are read from, when they are captured
        self._content = store if capture_content else None
        self._prices = prices
        # Open spans, by execution id, (execution id, attempt) and (execution
        # id, step); a child execution's parent span by the child's id. An
        # agent's HTTP step ends before its call is told: its span waits for
        # the call (by execution id and attempt) to be made its LLM span. One
        # dict operation at a time: the router calls from several threads.
        self._executions: dict[str, Span] = {}
        self._attempts: dict[tuple[str, int], Span] = {}
        self._steps: dict[tuple[str, int], OpenStep] = {}
        self._children: dict[str, Span] = {}
        self._calls = WaitingCalls()

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
        span = self._execution_span(execution, parent)
        self._executions[execution.execution_id] = span

    def _execution_span(
        self, execution: ObservedExecution, parent: Span | None
    ) -> Span:
        name, attributes = _spans.execution_span(execution)
        return self._tracer.start_span(
            name,
            context=None if parent is None else trace.set_span_in_context(parent),
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            start_time=execution.started_ns,
        )

    def execution_ended(
        self, execution: ObservedExecution, response: AgentResponse
    ) -> None:
        """End the execution's span with the answer's status and agent."""
        if execution.cache == "hit":
            span = self._execution_span(execution, None)
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
        self._capture(span, execution.execution_id, _spans.content_of_execution)
        span.end()

    def _end_left_open(self, execution_id: str, response: AgentResponse) -> None:
        """End the spans of steps and attempts an interrupted execution left open.

        A routing call that is cancelled or interrupted ends without its steps
        and attempts ending; their spans end with the execution's, failed.
        """

        def end(span: Span | None) -> None:
            if span is not None:
                if response.error is not None:
                    _failed(span, response.error)
                span.end()

        for key in [k for k in list(self._steps) if k[0] == execution_id]:
            step = self._steps.pop(key, None)
            end(None if step is None else step.span)
        for key in [k for k in list(self._attempts) if k[0] == execution_id]:
            end(self._attempts.pop(key, None))
            self._calls.attempt_ended(key)

    # -- attempts -----------------------------------------------------------------

    def attempt_started(self, execution_id: str, agent: str, attempt: int) -> None:
        """Start an ``invoke_agent`` span inside its execution's."""
        parent = self._executions.get(execution_id)
        if parent is None:
            return
        name, attributes = _spans.attempt_span(execution_id, agent, attempt)
        self._attempts[execution_id, attempt] = self._tracer.start_span(
            name, context=trace.set_span_in_context(parent), attributes=attributes
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
        self._calls.attempt_ended((execution_id, attempt))
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
        return None if span is None else _current(span)

    # -- steps --------------------------------------------------------------------

    def step_started(self, step: ObservedStep) -> None:
        """Start a step's span in its parent step's, else in its attempt's.

        An HTTP step is a client span: the call's, once it is told.
        """
        execution_id, name, attempt = step.execution_id, step.name, step.attempt
        parent, child_execution_id = step.parent, step.child_execution_id
        outer = None
        if parent is not None:
            found = self._steps.get((execution_id, parent))
            outer = None if found is None else found.span
        if outer is None:
            outer = self._attempts.get((execution_id, attempt))
        if outer is None:
            outer = self._executions.get(execution_id)
        if outer is None:
            return
        span_name, attributes = _spans.step_span(
            execution_id, step.step, name, step.agent, attempt
        )
        if child_execution_id is not None:
            attributes["intentusnet.child_execution_id"] = child_execution_id
        http = name.startswith(_HTTP_STEP)
        if http:  # a tool's, or an LLM call's: its call says
            for key in _spans.tool_attributes(name):
                del attributes[key]
        span = self._tracer.start_span(
            span_name,
            context=trace.set_span_in_context(outer),
            kind=SpanKind.CLIENT if http else SpanKind.INTERNAL,
            attributes=attributes,
        )
        opened = OpenStep(span, name, child_execution_id, (execution_id, attempt))
        self._steps[execution_id, step.step] = opened
        if child_execution_id is not None:
            self._children[child_execution_id] = span
        if http:  # told its call while open (a stream), or soon after it ends
            self._calls.opened(opened)

    def step_ended(self, step: ObservedStep, outcome: str, error: str | None) -> None:
        """End a step's span with its outcome (an HTTP step's waits for its call)."""
        found = self._steps.pop((step.execution_id, step.step), None)
        if found is None:
            return
        span = found.span
        if found.child is not None:  # its execution took it, or never started
            self._children.pop(found.child, None)
        span.set_attribute("intentusnet.outcome", outcome)
        if outcome != "success":
            span.set_status(Status(StatusCode.ERROR, error))
        if found.name.startswith(_HTTP_STEP) and self._calls.ended(found, outcome):
            return
        span.end()

    def step_scope(
        self, execution_id: str, step: int
    ) -> AbstractContextManager[object] | None:
        """Make the step's span current while its function runs."""
        found = self._steps.get((execution_id, step))
        return None if found is None else _current(found.span)

    # -- HTTP calls ---------------------------------------------------------------

    def call_made(self, call: ObservedCall) -> None:
        """An HTTP call: its step's span, or a client span; GenAI for an LLM's."""
        usage = _spans.call_usage(call)
        attributes: dict[str, str | int | bool | float] = dict(
            _spans.call_attributes(call, usage)
        )
        if usage is not None and self._prices is not None:
            attributes.update(_cost(usage, call.cache == "hit", self._prices))
        waiting = self._calls.take(call)
        if waiting is not None:  # the agent's HTTP step: one span for the call
            step, ended_ns = waiting
            span = step.span
            if usage is None:
                attributes.update(_spans.tool_attributes(step.name))
            else:
                span.update_name(_spans.call_name(call, usage))
            span.set_attributes(attributes)
            if call.record_id is not None:
                span.set_attribute("intentusnet.child_execution_id", call.record_id)
        else:
            if call.record_id is not None:
                attributes["intentusnet.execution_id"] = call.record_id
            outer = None
            if call.execution_id is not None and call.attempt is not None:
                outer = self._attempts.get((call.execution_id, call.attempt))
            span = self._tracer.start_span(
                _spans.call_name(call, usage),
                context=None if outer is None else trace.set_span_in_context(outer),
                kind=SpanKind.CLIENT,
                attributes=attributes,
                start_time=call.started_ns,
            )
            ended_ns = call.ended_ns
        if call.status >= 400:
            span.set_status(Status(StatusCode.ERROR, f"HTTP {call.status}"))
        if usage is not None and call.record_id is not None:
            self._capture(span, call.record_id, _spans.content_of_call)
        if ended_ns:  # else its step is open still: the step ends it
            span.end(end_time=ended_ns)

    def _capture(
        self,
        span: Span,
        record_id: str,
        content: Callable[[ExecutionRecord], _spans.Attributes],
    ) -> None:
        """Put what ``content`` reads from record ``record_id`` on ``span``."""
        store = self._content
        if store is None:
            return
        try:
            record = store.load(record_id)
        except IntentusNetError:  # not in this store, or unreadable: nothing shown
            return
        span.set_attributes(content(record))


def _cost(usage: Usage, hit: bool, prices: PriceTable) -> dict[str, str | float]:
    """What an LLM call cost with ``prices``: a hit nothing, and what it saved.

    ``llm.cost.total`` is OpenInference's, in USD: set for a table in USD only.
    A call whose model has no price, or whose answer gave no counts, has none
    (a hit still costs 0).
    """
    cost = None
    if usage.input_tokens is not None and usage.output_tokens is not None:
        model = usage.response_model or usage.model
        cost = prices.cost(model, usage.input_tokens, usage.output_tokens)
    if cost is None and not hit:
        return {}
    found: dict[str, str | float] = {
        "intentusnet.cost": 0.0 if hit else cost or 0.0,
        "intentusnet.cost.currency": prices.currency,
    }
    if hit and cost is not None:
        found["intentusnet.cache.saved_cost"] = cost
    if prices.currency == "USD":
        found["llm.cost.total"] = found["intentusnet.cost"]
    return found


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
