"""What a caller inside IntentusNet tells the next execution it routes.

``ctx.route`` (a child intent) and ``ReplayEngine.rerun`` (a re-run) route an
envelope through the ordinary ``route``/``route_intent`` entry points, so that
middleware and strategies apply as always; what they add (the child's parent
and id, the re-run's link and cassette) travels in a context variable that the
router reads once, when it opens the execution. A hint is claimed by the first
execution that reads it, so a route nested inside that execution does not
inherit it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

from .._util.jsonvalue import JSONObject

if TYPE_CHECKING:
    from ..steps.session import StepSession
    from ..store import ExecutionStore
    from .strategies import Execution

_T = TypeVar("_T")


class RouteHints:
    """What the next execution opened in this context should know.

    Attributes:
        execution_id: the id to give the execution (a child's id is chosen by
            its parent, which records it before the child starts).
        parent_execution_id: the execution routing this one, if any.
        received: extra ``INTENT_RECEIVED`` data (``replayOf`` for a re-run).
        store: record into this store instead of the router's own.
        session: builds the execution's step session (a re-run's cassette).
    """

    __slots__ = (
        "claimed",
        "execution_id",
        "parent_execution_id",
        "received",
        "session",
        "store",
    )

    def __init__(
        self,
        *,
        execution_id: str | None = None,
        parent_execution_id: str | None = None,
        received: JSONObject | None = None,
        store: ExecutionStore | None = None,
        session: Callable[[Execution], StepSession] | None = None,
    ) -> None:
        self.execution_id = execution_id
        self.parent_execution_id = parent_execution_id
        self.received = received
        self.store = store
        self.session = session
        self.claimed = False


_HINTS: ContextVar[RouteHints | None] = ContextVar("intentusnet_hints", default=None)


def claim_hints() -> RouteHints | None:
    """Return the hints for the execution being opened, once; else ``None``."""
    hints = _HINTS.get()
    if hints is None or hints.claimed:
        return None
    hints.claimed = True
    return hints


@contextmanager
def hinted(hints: RouteHints) -> Iterator[None]:
    """Make ``hints`` the hints of the next execution routed in this context."""
    token = _HINTS.set(hints)
    try:
        yield
    finally:
        _HINTS.reset(token)


def carry_hints(coro: Awaitable[_T]) -> Awaitable[_T]:
    """Carry this context's hints into ``coro``, which will run on another thread.

    ``route_intent`` hands work to the router's event loop, whose tasks do not
    see the caller's context variables.
    """
    hints = _HINTS.get()
    if hints is None or hints.claimed:
        return coro

    async def with_hints() -> _T:
        _HINTS.set(hints)  # in the task's own context: nothing to reset
        return await coro

    return with_hints()


def hints_pending() -> bool:
    """Whether the next execution opened in this context has hints to claim.

    The replay cache steps aside for such an execution (a child intent, a
    re-run): it must really run, under the id and links it was given.
    """
    hints = _HINTS.get()
    return hints is not None and not hints.claimed
