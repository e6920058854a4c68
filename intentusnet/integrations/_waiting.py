"""An agent's HTTP step spans, waiting for their calls (the OpenTelemetry integration).

A call an agent makes through a recording transport is recorded as a step
(``http METHOD HOST/PATH``), and the transport tells the observers about the
call once it is answered, just after that step ended (while it is open still,
for an answer streamed through). So the step's span is not ended with the
step: it waits, by the agent's execution id and attempt, for its call, which
makes it the call's span (``chat MODEL`` for an LLM call): one span per call.
A step that failed (no answer to tell) ends at once, and one whose call is
never told ends with its attempt, as a tool's span.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from . import _spans

if TYPE_CHECKING:
    from opentelemetry.trace import Span

    from ..routing.seams import ObservedCall

__all__ = ["OpenStep", "WaitingCalls"]


class OpenStep:
    """An open step's span, and what its end needs."""

    __slots__ = ("attempt", "child", "name", "span")

    def __init__(
        self, span: Span, name: str, child: str | None, attempt: tuple[str, int]
    ) -> None:
        self.span = span
        self.name = name
        self.child = child
        #: the execution id and attempt number of the agent running it
        self.attempt = attempt


class WaitingCalls:
    """The HTTP steps whose calls have not been told yet, by execution and attempt.

    Steps end and calls are told from whichever thread runs the agent: one
    operation at a time.
    """

    __slots__ = ("_lock", "_waiting")

    def __init__(self) -> None:
        #: the steps, each with when it ended (0: open still)
        self._waiting: dict[tuple[str, int], list[tuple[OpenStep, int]]] = {}
        self._lock = threading.Lock()

    def opened(self, step: OpenStep) -> None:
        """An HTTP step began: its call will be told."""
        with self._lock:
            self._waiting.setdefault(step.attempt, []).append((step, 0))

    def ended(self, step: OpenStep, outcome: str) -> bool:
        """Keep an ended HTTP step's span for its call: ``False`` to end it now.

        A step whose call was told already ends now, and so does one that
        failed, as a tool's span (there is no answer to tell).
        """
        with self._lock:
            waiting = self._waiting.get(step.attempt, [])
            index = next((i for i, w in enumerate(waiting) if w[0] is step), None)
            if index is None:
                return False
            if outcome == "success":
                waiting[index] = (step, time.time_ns())
                return True
            del waiting[index]
        step.span.set_attributes(_spans.tool_attributes(step.name))
        return False

    def take(self, call: ObservedCall) -> tuple[OpenStep, int] | None:
        """The agent's HTTP step that made ``call``, and when it ended (0: open)."""
        if call.execution_id is None or call.attempt is None:
            return None
        name = _spans.http_step_name(call)
        with self._lock:
            waiting = self._waiting.get((call.execution_id, call.attempt), [])
            for index, (step, ended_ns) in enumerate(waiting):
                if step.name == name:
                    del waiting[index]
                    return step, ended_ns
        return None

    def attempt_ended(self, attempt: tuple[str, int]) -> None:
        """End the ended HTTP steps of an attempt whose calls were never told."""
        with self._lock:
            waiting = self._waiting.pop(attempt, [])
        for step, ended_ns in waiting:
            if ended_ns:
                step.span.set_attributes(_spans.tool_attributes(step.name))
                step.span.end(end_time=ended_ns)
