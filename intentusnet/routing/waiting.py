"""What an execution waits for, and the answer a waiting execution gives.

An execution that sleeps durably, waits for a signal or waits between the
attempts of a retried step (``waits.py``) stops running in its process: its
:class:`WaitState` is set, every later step call raises
:class:`~intentusnet.errors.ExecutionWaiting`, and the router closes the record
``waiting`` with an ``EXECUTION_WAITING`` event (:func:`close_waiting`). The
caller is answered :func:`waiting_answer`: a ``WAITING`` error naming what the
execution waits for and until when; recovery resumes it when it is due or
signalled (``recovery.py``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final, NoReturn

from .._util.jsonvalue import JSONObject
from .._util.time import utc_now
from ..envelope import AgentResponse, ErrorCode, ErrorInfo, ResponseMetadata
from ..errors import ExecutionWaiting, IntentusNetError
from ..record.model import EventType
from ..store.durable import WaitStore

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord
    from ..store.protocol import ExecutionStore
    from .recorder import Recorder

__all__ = [
    "DURABLE_WAIT_S",
    "WaitState",
    "close_waiting",
    "waiting_answer",
    "waiting_of",
]

#: A wait shorter than this (seconds) waits in place, holding its thread; a
#: longer one is durable: the process lets the execution go.
DURABLE_WAIT_S: Final = 1.0


class WaitState:
    """What one execution waits for, once it waits, and the signals it took.

    Attributes:
        waiting: the ``EXECUTION_WAITING`` data, or ``None`` while it runs.
        taken: the ids of the signals its waits took (none is taken twice).
    """

    __slots__ = ("taken", "waiting")

    def __init__(self) -> None:
        self.waiting: JSONObject | None = None
        self.taken: set[str] = set()

    def check(self, execution_id: str) -> None:
        """At a step boundary: stop if the execution waits.

        Raises:
            ExecutionWaiting: it waits.
        """
        waiting = self.waiting
        if waiting is not None:
            raise ExecutionWaiting(execution_id, waiting)

    def wait(self, execution_id: str, waiting: JSONObject) -> NoReturn:
        """Start waiting (an execution waits for one thing: the first to ask).

        Raises:
            ExecutionWaiting: always.
        """
        if self.waiting is None:
            self.waiting = waiting
        raise ExecutionWaiting(execution_id, self.waiting)


def waiting_answer(execution_id: str, waiting: JSONObject) -> AgentResponse:
    """The answer of an execution that waits: a ``WAITING`` error naming for what."""
    due = waiting.get("dueUtc")
    until = f" until {due}" if due else ""
    error = ErrorInfo(
        code=ErrorCode.WAITING,
        message=f"execution waits for {waiting.get('waitingFor')} "
        f"{waiting.get('name')!r}{until}; recovery resumes it",
        retryable=True,
        details=waiting,
    )
    return AgentResponse(
        status="error",
        error=error,
        metadata=ResponseMetadata(execution_id=execution_id),
    )


def waiting_of(record: ExecutionRecord) -> JSONObject | None:
    """The ``EXECUTION_WAITING`` data of ``record``, if it waits."""
    return next(
        (e.data for e in record.events if e.type is EventType.EXECUTION_WAITING),
        None,
    )


def close_waiting(
    store: ExecutionStore | None,
    recorder: Recorder,
    execution_id: str,
    waiting: JSONObject,
) -> AgentResponse:
    """Close a waiting execution's record and return its answer.

    The wake-up goes first (a record that says it waits always has one: killed
    between the two, it is an interrupted record, resumed as such), then the
    ``EXECUTION_WAITING`` event; the record is closed unfinished (``waiting``).
    A wake-up that cannot be written leaves the event out: the record reads
    ``incomplete``, and recovery resumes it as interrupted.
    A wait with no due time (a signal with no timeout) has no wake-up of its
    own: the signal's sender asks for one.
    """
    data = {**waiting, "atUtc": utc_now()[0]}
    due_us = waiting.get("dueUs")
    try:
        if isinstance(store, WaitStore) and isinstance(due_us, int):
            store.add_wakeup(execution_id, due_us)
    except IntentusNetError:
        pass  # no EXECUTION_WAITING: it reads incomplete, and is resumed so
    else:
        recorder.event(EventType.EXECUTION_WAITING, data)
    recorder.abandon()
    return waiting_answer(execution_id, data)
