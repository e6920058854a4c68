r"""Asynchronous submit over HTTP: the handles ``submit`` returns, and its headers.

``IntentusClient.submit(envelope, idempotency_key=None)`` sends ``POST
/v1/intents`` with ``Prefer: respond-async``: the service answers ``202`` with
the execution's ``Location`` once its record is in the store (so it is
finished even if that worker dies), or ``200`` with the answer when it has one
at once (a repeated key's). The handle's ``result(timeout=)`` long-polls
``GET /v1/executions/{id}?wait=`` until the execution is finished and returns
its ``AgentResponse``, from whichever record finished it (a resume's too). A
poll that gets no answer (the worker holding the connection was killed, the
service restarts: ``ServiceUnavailable``) is tried again after a pause, until
the timeout.

An idempotency key is sent as the IETF draft's ``Idempotency-Key`` header, an
RFC 8941 string: ``"order-7"``, with ``"`` and ``\\`` escaped. It is checked
here first, as the router checks it, so a bad key raises
``InvalidIdempotencyKey`` before anything is sent.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Final, Generic, TypeVar

from .._util.jsonvalue import JSONObject
from ..envelope import AgentResponse
from ..errors import ExecutionPending, ServiceError, ServiceUnavailable
from ..store.durable import check_idempotency_key

__all__ = [
    "MAX_WAIT_S",
    "AsyncSubmission",
    "Submission",
    "intent_headers",
]

#: The longest ``?wait=`` the service accepts, in seconds; one request asks no more.
MAX_WAIT_S: Final = 60.0
#: Seconds between polls that got no answer.
RETRY_S: Final = 0.5
#: The statuses of a finished execution, as records name them.
_FINISHED: Final = frozenset({"completed", "failed", "needs_attention", "cancelled"})

#: Reads ``GET /v1/executions/{id}?wait=SECONDS``: the newest record's JSON.
Poll = Callable[[str, float], JSONObject]
AsyncPoll = Callable[[str, float], Awaitable[JSONObject]]


def intent_headers(idempotency_key: str | None, respond_async: bool) -> dict[str, str]:
    """The headers of ``POST /v1/intents`` for a key and a preference.

    Raises:
        InvalidIdempotencyKey: the key is not 1 to 255 printable ASCII characters.
    """
    headers: dict[str, str] = {}
    if idempotency_key is not None:
        key = check_idempotency_key(idempotency_key)
        quoted = key.replace("\\", "\\\\").replace('"', '\\"')
        headers["Idempotency-Key"] = f'"{quoted}"'
    if respond_async:
        headers["Prefer"] = "respond-async"
    return headers


def accepted(data: JSONObject) -> str:
    """The execution id of a ``202`` answer.

    Raises:
        ServiceError: the answer names none.
    """
    found = data.get("executionId")
    if not isinstance(found, str):
        raise ServiceError("the service accepted the intent but named no execution")
    return found


class _Wait:
    """How long the next poll waits, and whether the time is up."""

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self._deadline = None if timeout is None else time.monotonic() + timeout

    def at_most(self, seconds: float) -> float:
        """``seconds``, or what is left of the time if less (0: the time is up)."""
        if self._deadline is None:
            return seconds
        return max(0.0, min(seconds, self._deadline - time.monotonic()))

    def answer(self, execution_id: str, record: JSONObject) -> AgentResponse | None:
        """The answer in ``record`` once finished; ``None``: poll again.

        Raises:
            ExecutionPending: not finished, and the time is up.
        """
        header = record.get("header")
        status = header.get("status") if isinstance(header, dict) else None
        if status in _FINISHED:
            return AgentResponse.model_validate(record.get("finalResponse"))
        if self._deadline is not None and time.monotonic() >= self._deadline:
            assert self.timeout is not None
            raise ExecutionPending(execution_id, str(status), self.timeout)
        return None


_P = TypeVar("_P", Poll, AsyncPoll)


class _Handle(Generic[_P]):
    """An execution submitted, its way to poll, and its answer once known."""

    __slots__ = ("_answer", "_poll", "execution_id")

    def __init__(
        self, execution_id: str | None, poll: _P, answer: AgentResponse | None = None
    ) -> None:
        self.execution_id = execution_id
        self._poll: _P = poll
        self._answer = answer

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.execution_id!r})"


class Submission(_Handle[Poll]):
    """An execution submitted with ``IntentusClient.submit``. Added in 0.1.0.

    Attributes:
        execution_id: the execution's id (``GET /v1/executions/{id}``);
            ``None`` only for an answer that came at once from a service that
            records nothing.
    """

    __slots__ = ()

    def result(self, timeout: float | None = None) -> AgentResponse:
        """Wait for the execution's answer (agent faults are data).

        Args:
            timeout: seconds to wait at most; ``None`` waits as long as it
                takes (an execution left incomplete waits for recovery).

        Raises:
            ExecutionPending: it had not finished when ``timeout`` ran out.
            ServiceUnavailable: no answer from the service, until the timeout.
            ServiceError, RecordNotFound: as the client's other calls.
        """
        wait = _Wait(timeout)
        while self._answer is None:
            assert self.execution_id is not None  # a 202 names it
            try:
                record = self._poll(self.execution_id, wait.at_most(MAX_WAIT_S))
            except ServiceUnavailable:
                if not (pause := wait.at_most(RETRY_S)):
                    raise
                time.sleep(pause)
                continue
            self._answer = wait.answer(self.execution_id, record)
        return self._answer


class AsyncSubmission(_Handle[AsyncPoll]):
    """The asyncio twin of :class:`Submission`. Added in 0.1.0.

    Attributes:
        execution_id: the execution's id (``None`` as for ``Submission``).
    """

    __slots__ = ()

    async def result(self, timeout: float | None = None) -> AgentResponse:
        """Wait for the execution's answer (see ``Submission.result``)."""
        wait = _Wait(timeout)
        while self._answer is None:
            assert self.execution_id is not None  # a 202 names it
            try:
                record = await self._poll(self.execution_id, wait.at_most(MAX_WAIT_S))
            except ServiceUnavailable:
                if not (pause := wait.at_most(RETRY_S)):
                    raise
                await asyncio.sleep(pause)
                continue
            self._answer = wait.answer(self.execution_id, record)
        return self._answer
