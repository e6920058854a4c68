"""What an operator may do to an execution through the service: one door each.

Resume, resolve, cancel and fork, as the JSON API's endpoints
(``POST /v1/executions/{id}/resume``, ``.../resolution``, ``.../cancel``,
``.../fork``) and the explorer's buttons both call them: the same library
functions the CLI and Python call (``routing/durable.py``, ``steps/fork.py``),
over the router's own store. Each is synchronous (it may run agents); the
callers run it on a worker thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import MalformedRequest
from ..routing.durable import cancel, resolve
from ..routing.signals import signal
from ..steps.fork import fork

if TYPE_CHECKING:
    from .._util.jsonvalue import JSONObject, JSONValue
    from ..envelope import AgentResponse
    from ..routing.router import IntentRouter
    from ..steps.options import StepRef
    from ..steps.rerun import RerunResult
    from ..store import ExecutionStore

__all__ = ["Levers", "fork_answer"]


class Levers:
    """The operator's levers over ``router``'s executions.

    Args:
        router: today's router and agents; its store holds the executions.
        store: the store the service reads; the levers refuse to act when it
            is not the router's (they would decide about records the router
            cannot see).
    """

    def __init__(self, router: IntentRouter, store: ExecutionStore | None) -> None:
        self.router = router
        self._store = store

    @property
    def usable(self) -> bool:
        """Whether the service reads the store its router writes."""
        return self._store is not None and self._store is self.router.store

    def _check(self) -> None:
        if not self.usable:
            raise MalformedRequest("this service reads another store than it routes")

    def resume(self, execution_id: str) -> AgentResponse:
        """Resume an interrupted execution now, in this process."""
        self._check()
        return self.router.resume(execution_id)

    def resolve(
        self,
        execution_id: str,
        *,
        step: int | None,
        happened: bool,
        output: JSONValue,
        by: str,
        via: str,
    ) -> str:
        """Record an operator's resolution of a parked execution."""
        self._check()
        return resolve(
            self.router,
            execution_id,
            step=step,
            happened=happened,
            output=output,
            by=by,
            via=via,
        )

    def cancel(self, execution_id: str, *, by: str, via: str) -> tuple[str, bool]:
        """Cancel an execution: closed now, or stopped at its next step."""
        self._check()
        return cancel(self.router, execution_id, by=by, via=via)

    def signal(
        self, execution_id: str, name: str, payload: JSONValue, *, by: str, via: str
    ) -> str:
        """Send signal ``name`` to an execution; the id the signal is kept by."""
        self._check()
        return signal(self.router, execution_id, name, payload, by=by, via=via)

    def fork(self, execution_id: str, from_step: StepRef) -> JSONObject:
        """Fork an execution from ``from_step`` with today's code; its answer."""
        self._check()
        return fork_answer(fork(self.router, execution_id, from_step))


def fork_answer(result: RerunResult) -> JSONObject:
    """What ``POST .../fork`` answers of a fork: ids, step, status and links."""
    new, old = result.execution_id or "", result.original_execution_id
    return {
        "executionId": new,
        "forkOf": old,
        "fromStep": result.from_step,
        "status": result.response.status,
        "links": {
            "self": f"/v1/executions/{new}",
            "forkOf": f"/v1/executions/{old}",
        },
    }
