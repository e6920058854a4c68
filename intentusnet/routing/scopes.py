"""The contexts observers give the code an execution runs: attempt and step scopes.

An ``ExecutionObserver`` may have two optional methods (seams.py says what they
mean): ``attempt_scope(execution_id, attempt)`` and ``step_scope(execution_id,
step)``. Each returns a context manager, or ``None`` for nothing, that the router
enters around an agent's call and a step's function, in the thread or task where
that code runs, and leaves there when it returns or raises. A tracer makes its
span the current one that way, so spans the user's code makes nest inside it.

The observers that have each method are found once per execution (``scopes_of``);
without any, entering a scope is entering one shared ``nullcontext``.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from types import TracebackType
from typing import TYPE_CHECKING, Final, TypeAlias

if TYPE_CHECKING:
    from .seams import ExecutionObserver

__all__ = ["ATTEMPT_SCOPE", "STEP_SCOPE", "Scope", "enter", "scopes_of"]

#: The optional observer methods, by name.
ATTEMPT_SCOPE: Final = "attempt_scope"
STEP_SCOPE: Final = "step_scope"

#: An observer's bound ``attempt_scope`` or ``step_scope``: ``(execution_id,
#: number)`` to a context manager, or ``None`` when it has nothing to enter.
Scope: TypeAlias = Callable[[str, int], "AbstractContextManager[object] | None"]

#: What is entered when no observer has a scope (reusable: it holds nothing).
_NO_SCOPE: Final = nullcontext()


def scopes_of(
    observers: tuple[ExecutionObserver, ...], method: str
) -> tuple[Scope, ...]:
    """The bound ``method`` (``ATTEMPT_SCOPE`` or ``STEP_SCOPE``) of each observer.

    Observers without it are left out: the method is optional.
    """
    found = (getattr(observer, method, None) for observer in observers)
    return tuple(scope for scope in found if callable(scope))


def enter(
    scopes: tuple[Scope, ...], execution_id: str, number: int
) -> AbstractContextManager[object]:
    """What to enter around attempt or step ``number`` of ``execution_id``.

    The observers' methods are called when it is entered, not before: in the
    thread or task that runs the code. Entered as nested ``with`` blocks: the
    first observer's outermost.
    """
    entered: AbstractContextManager[object] = _NO_SCOPE
    for scope in reversed(scopes):
        entered = _Entered(scope, execution_id, number, entered)
    return entered


class _Entered:
    """One observer's scope, around ``inner`` (the later observers' scopes)."""

    __slots__ = ("_execution_id", "_inner", "_made", "_number", "_scope")

    def __init__(
        self,
        scope: Scope,
        execution_id: str,
        number: int,
        inner: AbstractContextManager[object],
    ) -> None:
        self._scope = scope
        self._execution_id = execution_id
        self._number = number
        self._inner = inner
        self._made: AbstractContextManager[object] | None = None

    def __enter__(self) -> None:
        made = self._made = self._scope(self._execution_id, self._number)
        if made is None:
            self._inner.__enter__()
            return
        made.__enter__()
        try:
            self._inner.__enter__()
        except BaseException as exc:  # left as a `with` block leaves it
            made.__exit__(type(exc), exc, exc.__traceback__)
            raise

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # What the code raised goes on: a scope is told, it cannot swallow it.
        try:
            self._inner.__exit__(kind, exc, tb)
        finally:
            if self._made is not None:
                self._made.__exit__(kind, exc, tb)
