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

from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
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
    found: list[Scope] = []
    for observer in observers:
        scope = getattr(observer, method, None)
        if callable(scope):
            found.append(scope)
    return tuple(found)


def enter(
    scopes: tuple[Scope, ...], execution_id: str, number: int
) -> AbstractContextManager[object]:
    """What to enter around attempt or step ``number`` of ``execution_id``.

    The observers' methods are called when it is entered, not before: in the
    thread or task that runs the code.
    """
    return _NO_SCOPE if not scopes else _entered(scopes, execution_id, number)


@contextmanager
def _entered(
    scopes: tuple[Scope, ...], execution_id: str, number: int
) -> Iterator[None]:
    with ExitStack() as stack:
        for scope in scopes:
            made = scope(execution_id, number)
            if made is not None:
                stack.enter_context(made)
        yield
