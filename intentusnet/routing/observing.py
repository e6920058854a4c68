"""Telling observers what an execution does, without letting them change it.

An ``ExecutionObserver`` (seams.py) is told; it never decides. ``Observers``
tells each of a router's (or a transport's) observers in turn, and what one
raises is logged on the ``intentusnet.observers`` logger and counted
(``ObserverErrors``, read as ``IntentRouter.observer_errors``), never passed
on: the answer, the attempt, the step and the HTTP call stand as they were.
The optional scopes (scopes.py) are guarded the same way: a scope whose method
or context manager raises is left out, and the code runs without it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager
from types import TracebackType
from typing import TYPE_CHECKING

from . import scopes

if TYPE_CHECKING:
    from ..envelope import AgentResponse, ErrorInfo
    from .seams import (
        ExecutionObserver,
        ObservedCall,
        ObservedExecution,
        ObservedStep,
    )

__all__ = ["ObserverErrors", "Observers"]


class ObserverErrors:
    """How many times an observer raised: logged once each, counted here."""

    __slots__ = ("_count", "_lock")

    def __init__(self) -> None:
        self._count = 0
        self._lock = threading.Lock()

    @property
    def count(self) -> int:
        """The errors counted so far."""
        return self._count

    def failed(self, observer: object, method: str) -> None:
        """Log the exception being handled (``observer.method`` raised it); count it."""
        import logging  # only once an observer fails: routing does not need it

        with self._lock:
            self._count += 1
        logging.getLogger("intentusnet.observers").exception(
            "observer %s.%s raised (the execution goes on as it was)",
            type(observer).__qualname__,
            method,
        )


class Observers:
    """A fixed set of observers, told in the order added, each call guarded.

    Immutable: ``adding`` and ``removing`` make a new set counting into the
    same ``errors``, so an execution keeps the observers it started with.
    """

    __slots__ = ("errors", "members")

    def __init__(
        self,
        members: tuple[ExecutionObserver, ...] = (),
        errors: ObserverErrors | None = None,
    ) -> None:
        #: the observers, in the order added
        self.members = members
        #: where what they raise is counted
        self.errors = ObserverErrors() if errors is None else errors

    def __bool__(self) -> bool:
        return bool(self.members)

    def __iter__(self) -> Iterator[ExecutionObserver]:
        return iter(self.members)

    def adding(self, observer: ExecutionObserver) -> Observers:
        """These observers and ``observer`` (once, if it is there already)."""
        if observer in self.members:
            return self
        return Observers((*self.members, observer), self.errors)

    def removing(self, *observers: ExecutionObserver) -> Observers:
        """These observers but ``observers`` (those not there are ignored)."""
        kept = tuple(o for o in self.members if all(o is not r for r in observers))
        return self if len(kept) == len(self.members) else Observers(kept, self.errors)

    def scopes(self, method: str) -> tuple[scopes.Scope, ...]:
        """The members' ``method`` (``ATTEMPT_SCOPE`` or ``STEP_SCOPE``), guarded."""
        return tuple(
            _GuardedScope(scope, self.errors)
            for scope in scopes.scopes_of(self.members, method)
        )

    # -- what they are told (ExecutionObserver's methods) -------------------------

    def execution_started(self, execution: ObservedExecution) -> None:
        """Tell each that an execution began."""
        self._tell("execution_started", execution)

    def execution_ended(
        self, execution: ObservedExecution, response: AgentResponse
    ) -> None:
        """Tell each that an execution answered."""
        self._tell("execution_ended", execution, response)

    def attempt_started(self, execution_id: str, agent: str, attempt: int) -> None:
        """Tell each that an attempt began."""
        self._tell("attempt_started", execution_id, agent, attempt)

    def attempt_ended(
        self,
        execution_id: str,
        agent: str,
        attempt: int,
        outcome: str,
        error: ErrorInfo | None,
    ) -> None:
        """Tell each that an attempt ended."""
        self._tell("attempt_ended", execution_id, agent, attempt, outcome, error)

    def step_started(self, step: ObservedStep) -> None:
        """Tell each that a step began."""
        self._tell("step_started", step)

    def step_ended(self, step: ObservedStep, outcome: str, error: str | None) -> None:
        """Tell each that a step ended."""
        self._tell("step_ended", step, outcome, error)

    def call_made(self, call: ObservedCall) -> None:
        """Tell each about an HTTP call a recording transport answered."""
        self._tell("call_made", call)

    def _tell(self, method: str, *args: object) -> None:
        # Each observer in turn; what one raises is counted and logged, and the
        # next is told all the same.
        for observer in self.members:
            try:
                getattr(observer, method)(*args)
            except Exception:
                self.errors.failed(observer, method)


class _GuardedScope:
    """An observer's scope method whose failures are counted, not raised."""

    __slots__ = ("_errors", "_scope")

    def __init__(self, scope: scopes.Scope, errors: ObserverErrors) -> None:
        self._scope = scope
        self._errors = errors

    def __call__(
        self, execution_id: str, number: int
    ) -> AbstractContextManager[object] | None:
        try:
            made = self._scope(execution_id, number)
        except Exception:
            self.failed()
            return None
        return None if made is None else _GuardedContext(made, self)

    def failed(self) -> None:
        """Count the exception being handled, raised by the scope or its context."""
        scope = self._scope
        observer = getattr(scope, "__self__", scope)  # a bound method's observer
        self._errors.failed(observer, str(getattr(scope, "__name__", "scope")))


class _GuardedContext:
    """A scope's context manager: not entered if entering raises; never raising."""

    __slots__ = ("_entered", "_made", "_scope")

    def __init__(
        self, made: AbstractContextManager[object], scope: _GuardedScope
    ) -> None:
        self._made = made
        self._scope = scope
        self._entered = False

    def __enter__(self) -> None:
        try:
            self._made.__enter__()
        except Exception:
            self._scope.failed()
            return
        self._entered = True

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if not self._entered:
            return
        try:
            self._made.__exit__(kind, exc, tb)  # told; what it returns is ignored
        except Exception as raised:
            if raised is not exc:  # the code's own exception, passed on, is not
                self._scope.failed()
