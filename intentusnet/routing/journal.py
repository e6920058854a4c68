"""An interrupted record as the journal of its resumed execution.

A resumed execution runs its agent again from the start; each step it opens is
matched to the record *by position*: the n-th step the code opens must be the
n-th recorded step (same name, same ``argsHash``); steps nested in a step that
is served were answered with it and are skipped. What the recorded step holds
says what happens (docs/durability.md):

- it ended: served (its output, or its recorded failure raised again); never
  run twice;
- it started and never ended: run live, unless it is a side effect not
  declared ``idempotent=True``: then it may or may not have happened, and the
  execution is parked (``SideEffectInDoubt``);
- there is no recorded step at this position: run live, as is everything after;
- the code asks for another step than the recorded one: the code does not
  replay the record, and the execution is parked (``NondeterminismError``).

Once parked, every later step call is refused with the same error, and the
router records the execution ``needs_attention`` (an ``ATTENTION_NEEDED``
event, see :attr:`Journal.attention`) whatever the agent answers. The journal
numbers the steps of the new record as the interrupted one did, so a step
keeps its number (and its ``ctx.idempotency_key``) through every resume.

It implements the ``Cassette`` seam (``seams.py``) as the re-run's cassette
does, so resume needs nothing from ``steps/``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import (
    CassetteMiss,
    IntentusNetError,
    NondeterminismError,
    SideEffectInDoubt,
)
from ..record.model import EventType
from .seams import LIVE, REPLAY_ERROR, SERVE, StepDecision

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord
    from ..store.protocol import ExecutionStore

__all__ = ["Journal", "JournalDecision", "JournalStep"]


@dataclass(frozen=True, slots=True)
class JournalStep:
    """One recorded step, as the journal serves it (a ``RecordedCall``)."""

    number: int
    name: str
    args_hash: str
    parent: int | None
    side_effect: bool
    idempotent: bool
    ended: bool
    outcome: str
    output: JSONValue
    output_hash: str | None
    error: JSONObject | None
    traceback: str | None
    child_execution_id: str | None


@dataclass(frozen=True, slots=True)
class JournalDecision:
    """What the journal does with one step call (a ``StepDecision``)."""

    action: str
    recorded: JournalStep | None
    position: int
    miss: bool = False
    overridden: bool = False
    served_from: str | None = None


def journal_steps(record: ExecutionRecord) -> list[JournalStep]:
    """The recorded steps of ``record``, in the order they started."""
    starts: list[JSONObject] = []
    ends: dict[int, JSONObject] = {}
    for event in record.events:
        if event.type is EventType.STEP_START:
            starts.append(event.data)
        elif event.type is EventType.STEP_END:
            number = event.data.get("step")
            if type(number) is int:
                ends[number] = event.data
    steps: list[JournalStep] = []
    for start in starts:
        number = start.get("step")
        if type(number) is not int:
            continue
        end = ends.get(number)
        done = end or {}
        parent, error = start.get("parent"), done.get("error")
        child = done.get("childExecutionId", start.get("childExecutionId"))
        steps.append(
            JournalStep(
                number=number,
                name=str(start.get("name", "")),
                args_hash=str(start.get("argsHash", "")),
                parent=parent if type(parent) is int else None,
                side_effect=start.get("sideEffect") is True,
                idempotent=start.get("idempotent") is True,
                ended=end is not None,
                outcome=str(done.get("outcome", "unfinished")),
                output=done.get("output"),
                output_hash=_text(done.get("outputHash")),
                error=error if isinstance(error, dict) else None,
                traceback=_text(done.get("traceback")),
                child_execution_id=_text(child),
            )
        )
    return steps


def _text(value: JSONValue) -> str | None:
    return value if isinstance(value, str) else None


class Journal:
    """The record of an interrupted execution, answering its resumed steps.

    Args:
        record: the interrupted record (the newest of its resume chain).
        store: where the records of its child intents are loaded from.

    Attributes:
        attention: why the execution is parked (``reason``: ``nondeterminism``
            or ``side_effect_in_doubt``, ``step``, ``name``, ``message``), or
            ``None`` while it is not.
        served: how many recorded steps were served.
        ran: the numbers of the steps run live.
    """

    def __init__(
        self, record: ExecutionRecord, *, store: ExecutionStore | None = None
    ) -> None:
        self.execution_id = record.execution_id
        self.attention: JSONObject | None = None
        self.served = 0
        self.ran: list[int] = []
        self._store = store
        self._steps = journal_steps(record)
        self._children: dict[int, list[int]] = {}
        for step in self._steps:
            if step.parent is not None:
                self._children.setdefault(step.parent, []).append(step.number)
        self._cursor = 0
        self._consumed: set[int] = set()
        self._next = max((s.number for s in self._steps), default=0) + 1
        self._stop: CassetteMiss | None = None
        self._lock = threading.Lock()

    def decide(
        self, name: str, args: JSONValue, args_hash: str, *, side_effect: bool
    ) -> StepDecision:
        """Match the next step call by position and say what to do.

        Raises:
            NondeterminismError: the recorded step at this position is another.
            SideEffectInDoubt: the recorded step is a side effect that started
                and never ended, not declared idempotent.
        """
        with self._lock:
            if self._stop is not None:
                raise self._stop  # parked: nothing more runs
            steps = self._steps
            while self._cursor < len(steps) and (
                steps[self._cursor].number in self._consumed
            ):
                self._cursor += 1
            if self._cursor >= len(steps):
                position, self._next = self._next, self._next + 1
                self.ran.append(position)
                return JournalDecision(LIVE, None, position)
            recorded = steps[self._cursor]
            self._cursor += 1
            if recorded.name != name or recorded.args_hash != args_hash:
                self._park(
                    "nondeterminism",
                    recorded,
                    NondeterminismError(
                        recorded.number,
                        (recorded.name, recorded.args_hash),
                        (name, args_hash),
                        execution_id=self.execution_id,
                    ),
                )
            if recorded.ended and recorded.outcome in ("success", "error"):
                self._consume(recorded.number)
                self.served += 1
                action = SERVE if recorded.outcome == "success" else REPLAY_ERROR
                return JournalDecision(action, recorded, recorded.number)
            if (side_effect or recorded.side_effect) and not recorded.idempotent:
                self._park(
                    "side_effect_in_doubt",
                    recorded,
                    SideEffectInDoubt(
                        recorded.number, name, args_hash, self.execution_id
                    ),
                )
            self.ran.append(recorded.number)
            return JournalDecision(LIVE, recorded, recorded.number)

    def _park(self, reason: str, recorded: JournalStep, error: CassetteMiss) -> None:
        self._stop = error
        self.attention = {
            "reason": reason,
            "step": recorded.number,
            "name": recorded.name,
            "message": str(error),
            "resumeOf": self.execution_id,
        }
        raise error

    def _consume(self, number: int) -> None:
        # A served step's nested steps were answered with it.
        pending = [number]
        while pending:
            current = pending.pop()
            self._consumed.add(current)
            pending.extend(self._children.get(current, ()))

    def ended(
        self,
        number: int,
        name: str,
        args_hash: str,
        source: str,
        decision: StepDecision | None,
        outcome: str,
    ) -> None:
        """Nothing to note: the new record says how each step ended."""

    def child(self, execution_id: str) -> Journal | None:
        """The journal of a recorded child intent, to resume it too."""
        if self._store is None:
            return None
        try:
            return Journal(self._store.load(execution_id), store=self._store)
        except IntentusNetError:
            return None
