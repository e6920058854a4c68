"""A request made inside an agent: a step of the agent's execution."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ..._util.jsonvalue import JSONObject
from ...routing.agents import add_secrets, current_context, open_step
from ._http import HTTPRequest, authority
from ._response import ready_of
from ._served import Served

if TYPE_CHECKING:
    from ...routing.execution import PendingStep


class AgentStep:
    """A request's step in the execution of the agent that made it.

    Ended once: with the response as recorded and the record that answered
    it, or with the failure.
    """

    __slots__ = ("ended", "execution_id", "pending")

    def __init__(self, execution_id: str, pending: PendingStep) -> None:
        self.execution_id = execution_id
        self.pending = pending
        self.ended = False

    @property
    def number(self) -> int:
        """The step's number in the agent's execution."""
        return self.pending.number

    def served(self) -> Served:
        """A re-run's answer: the recorded response (or the recorded failure)."""
        output = self.pending.serve()
        if not isinstance(output, dict):
            raise ValueError(
                f"step {self.number} of record {self.execution_id} is not an "
                "HTTP response"
            )
        return Served(ready_of(output), "hit", self.execution_id, step=self.number)

    def succeeded(self, data: JSONObject, record: str | None) -> None:
        """End the step with the response ``data``, answered by ``record``."""
        self.ended = True  # first: a write that fails is not ended again
        self.pending.succeeded(data, child=record)

    def failed(self, exc: BaseException) -> None:
        """End the step with ``exc``, unless it has ended."""
        if not self.ended:
            self.ended = True
            self.pending.failed(exc)


def opened_step(
    request: HTTPRequest,
    payload: JSONObject,
    secrets: Callable[[], list[str]],
) -> AgentStep | None:
    """The step this request opens in the running agent's execution.

    ``None`` outside an agent, or when its execution records no steps. The
    step's arguments are the request's envelope payload; ``secrets`` gives
    the request's keys, which the agent's record keeps out when the request
    is being made.

    Raises:
        CassetteMiss: a re-run's record does not hold the request.
    """
    ctx = current_context()
    if ctx is None:
        return None
    step = open_step(ctx, step_name(request), payload)
    if step is None:
        return None
    if not step.served:  # a request being made: its keys are secrets
        add_secrets(ctx, secrets())
    return AgentStep(ctx.execution_id, step)


def step_name(request: HTTPRequest) -> str:
    """The step a request made inside an agent is recorded as.

    ``http METHOD HOST[:PORT]PATH``: no scheme, no query (the arguments
    hold the whole URL), the port only when the URL names one.
    """
    url = request.url
    path = url.raw_path.partition(b"?")[0].decode("ascii")
    return f"http {request.method} {authority(url)}{path}"
