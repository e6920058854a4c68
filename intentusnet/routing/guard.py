"""Side effects are never cut in half: the guard of one agent attempt.

The router stops an attempt when its timeout passes or when another agent wins a
``PARALLEL`` race. A thread cannot be stopped and a cancelled coroutine stops at
its next ``await``, which may be in the middle of an e-mail being sent. So a
side-effect step (``side_effect=True``) runs under its attempt's guard:

* one that is running when the attempt is stopped is let finish, its
  ``STEP_END`` written, and the router waits for it before it records the
  attempt's end, which names it (``sideEffectsFinished``); a coroutine is
  cancelled right after it, at the agent's next ``await``;
* one that would start after the attempt was stopped is refused: it raises
  ``SideEffectRefused`` in the agent's code, recorded as that step's failure.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from ..errors import SideEffectRefused

__all__ = ["AttemptGuard"]

_T = TypeVar("_T")


class AttemptGuard:
    """Tracks the side-effect steps running in one agent attempt.

    Args:
        agent: the agent's name.
        attempt: the attempt's number.
    """

    __slots__ = ("_idle", "_running", "_stopped", "agent", "attempt", "finished")

    def __init__(self, agent: str, attempt: int) -> None:
        self.agent = agent
        self.attempt = attempt
        self._idle = threading.Condition()
        self._running: list[str] = []
        self._stopped: str | None = None
        #: side-effect steps that were running when the attempt was stopped
        self.finished: list[str] = []

    def run(self, name: str, step: Callable[[], _T]) -> _T:
        """Run ``step`` (the whole step: its call and its record lines) as running.

        The router waits for it to end before recording the attempt's end.
        """
        self._enter(name)
        try:
            return step()
        finally:
            self._leave(name)

    async def arun(self, name: str, step: Callable[[], Awaitable[_T]]) -> _T:
        """Await ``step`` as running, shielded from the attempt's cancellation.

        A cancellation that arrives while it runs waits for it to end (its
        ``STEP_END`` written); the attempt is cancelled again right after, at
        its next ``await``.
        """
        import asyncio  # not on a sync route's path (see routing.router)

        self._enter(name)
        try:
            inner = asyncio.ensure_future(step())
            try:
                return await asyncio.shield(inner)
            except asyncio.CancelledError:
                if inner.cancelled():
                    raise  # the step itself was cancelled, not the attempt
                try:
                    return await inner  # let it finish ...
                finally:
                    task = asyncio.current_task()
                    if task is not None:
                        task.cancel()  # ... then stop at the next await
        finally:
            self._leave(name)

    def check(self, name: str) -> None:
        """Refuse to start side effect ``name`` in a stopped attempt.

        Raises:
            SideEffectRefused: the attempt was stopped (timeout, a lost race).
        """
        with self._idle:
            why = self._stopped
        if why is not None:
            stopped = "timed out" if why == "timeout" else "was cancelled"
            raise SideEffectRefused(
                name,
                f"attempt {self.attempt} of agent {self.agent!r} {stopped} before "
                "it started; a side effect is not started in a stopped attempt",
            )

    def stop(self, why: str) -> bool:
        """Stop the attempt (``timeout`` or ``cancelled``): refuse new side effects.

        Returns:
            Whether side-effect steps are running (wait for them with
            :meth:`wait`); they are listed in ``finished``.
        """
        with self._idle:
            self._stopped = why
            self.finished.extend(self._running)
            return bool(self._running)

    def wait(self) -> list[str]:
        """Block until no side-effect step runs; return those let finish."""
        with self._idle:
            self._idle.wait_for(lambda: not self._running)
            return list(self.finished)

    def _enter(self, name: str) -> None:
        with self._idle:
            self._running.append(name)

    def _leave(self, name: str) -> None:
        with self._idle:
            self._running.remove(name)
            self._idle.notify_all()
