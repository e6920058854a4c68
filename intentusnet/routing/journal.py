"""An interrupted resume chain as the journal of its resumed execution.

The journal is the whole chain: the execution's first record and every resume
of it, oldest first (``resumeOf`` links them). A step keeps its number
through every resume, so the chain's records are merged by number: a step's
start is the first record's that started it, and it *ended* if any record of
the chain holds its end. A resume killed before it re-served its steps (its
record holds none of them) thus loses none: the next resume serves them from
the record that holds them, and a step whose end is recorded anywhere never
runs again. A step end a resume wrote when it parked (``source: miss``) is
not an end: nothing ran.

A resumed execution runs its agent again from the start; each step it opens is
matched to the journal *by position*: the n-th step the code opens must be the
n-th recorded step (same name, same ``argsHash``); steps nested in a step that
is served were answered with it and are skipped. What the recorded step holds
says what happens (docs/durability.md):

- it ended (in any record of the chain): served (its output, or its recorded
  failure raised again), naming the record it came from; never run twice;
- it started and never ended: run live, unless it is a side effect not
  declared ``idempotent=True``: then it may or may not have happened, and the
  execution is parked (``SideEffectInDoubt``);
- there is no recorded step at this position: run live, as is everything after;
- the code asks for another step than the recorded one: the code does not
  replay the record, and the execution is parked (``NondeterminismError``).

A patch check (``ctx.patched``, :meth:`Journal.patch`) is matched by position
too, but never parks: the recorded marker here is served (the new path), another
recorded step here means the record went on without the patch (the old path,
nothing recorded), and no recorded step left means today's code goes on (the
marker is recorded, the new path).

Once parked, every later step call is refused with the same error, and the
router records the execution ``needs_attention`` (an ``ATTENTION_NEEDED``
event, see :attr:`Journal.attention`) whatever the agent answers. The journal
numbers the steps of the new record as the chain did, so a step keeps its
number (and its ``ctx.idempotency_key``) through every resume. A child intent
(``ctx.route``) resumed more than once has a chain too: the child records the
``route:`` step's starts name, oldest first, are its journal.

It implements the ``Cassette`` seam (``seams.py``) as the re-run's cassette
does, so resume needs nothing from ``steps/``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from .._util.jsonvalue import JSONObject, JSONValue, as_int, as_str
from ..errors import (
    CassetteMiss,
    IntentusNetError,
    NondeterminismError,
    SideEffectInDoubt,
)
from ..record.durable import attempts_from, resume_attempt, resume_origin
from ..record.model import EventType, RecordStatus
from ..store.durable import DurableStore, RecordHold
from .seams import LIVE, REPLAY_ERROR, SERVE, StepDecision, StepEnd

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord
    from ..store.protocol import ExecutionStore

__all__ = ["Journal", "JournalDecision", "JournalStep", "chain_steps", "journal_steps"]


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
    #: the record holding the step's end (else its start)
    record: str = ""
    #: the child executions the step's starts name, oldest first
    children: tuple[str, ...] = ()
    #: an operator said the side effect did not happen, and nothing started
    #: it since: it runs live, not parked
    cleared: bool = False


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
    """The recorded steps of ``record``, in the order they started.

    A step whose end says ``source: miss`` (refused by a journal: nothing ran)
    is left out. An operator's resolution of a step in doubt (an
    ``OPERATOR_DECISION`` record) is a view of that step: ended with the
    output given (it happened), or cleared to run (it did not).
    """
    starts: list[JSONObject] = []
    ends: dict[int, JSONObject] = {}
    resolved: list[JSONObject] = []
    for event in record.events:
        if event.type is EventType.STEP_START:
            starts.append(event.data)
        elif event.type is EventType.STEP_END:
            number = event.data.get("step")
            if type(number) is int:
                ends[number] = event.data
        elif (
            event.type is EventType.OPERATOR_DECISION
            and event.data.get("action") == "resolve"
        ):
            resolved.append(event.data)
    missed = {n for n, end in ends.items() if end.get("source") == "miss"}
    steps: list[JournalStep] = []
    for start in starts:
        number = start.get("step")
        if type(number) is not int or number in missed:
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
                parent=as_int(parent),
                side_effect=start.get("sideEffect") is True,
                idempotent=start.get("idempotent") is True,
                ended=end is not None,
                outcome=str(done.get("outcome", "unfinished")),
                output=done.get("output"),
                output_hash=as_str(done.get("outputHash")),
                error=error if isinstance(error, dict) else None,
                traceback=as_str(done.get("traceback")),
                child_execution_id=as_str(child),
                record=record.execution_id,
                children=tuple(
                    c for c in (as_str(start.get("childExecutionId")),) if c
                ),
            )
        )
    steps += [_resolution(data, record.execution_id) for data in resolved]
    return steps


def _resolution(data: JSONObject, record: str) -> JournalStep:
    """The view of a step in doubt an operator's resolution gives."""
    happened = data.get("happened") is True
    return JournalStep(
        number=as_int(data.get("step")) or 0,
        name=str(data.get("name", "")),
        args_hash=str(data.get("argsHash", "")),
        parent=as_int(data.get("parent")),
        side_effect=True,
        idempotent=False,
        ended=happened,
        outcome="success" if happened else "unfinished",
        output=data.get("output") if happened else None,
        output_hash=as_str(data.get("outputHash")) if happened else None,
        error=None,
        traceback=None,
        child_execution_id=None,
        record=record,
        cleared=not happened,
    )


def chain_steps(chain: Sequence[ExecutionRecord]) -> list[JournalStep]:
    """The steps of a resume chain (oldest record first), merged by number.

    In the order they first started. A step's start is its first record's
    (a later record asking for another step there was parked, and wrote an
    end that is a miss); its end is the first that can serve it (``success``
    or ``error``) of any record, else the first end found, else none.
    """
    merged: dict[int, JournalStep] = {}
    for record in chain:
        for step in journal_steps(record):
            known = merged.get(step.number)
            if known is None:
                merged[step.number] = step
                continue
            children = known.children + tuple(
                c for c in step.children if c not in known.children
            )
            ended = _end_kept(known, step)
            merged[step.number] = replace(
                known,
                ended=ended.ended,
                outcome=ended.outcome,
                output=ended.output,
                output_hash=ended.output_hash,
                error=ended.error,
                traceback=ended.traceback,
                child_execution_id=ended.child_execution_id
                if ended.ended
                else step.child_execution_id or known.child_execution_id,
                record=ended.record,
                children=children,
                # a resolution clears it; a start after it puts it in doubt again
                cleared=step.cleared,
            )
    return list(merged.values())


def _servable(step: JournalStep) -> bool:
    return step.ended and step.outcome in ("success", "error")


def _end_kept(known: JournalStep, later: JournalStep) -> JournalStep:
    """Of two records' views of one step, the one whose end the journal keeps."""
    if not later.ended:
        return known
    if not known.ended or (_servable(later) and not _servable(known)):
        return later
    return known


class Journal:
    """The records of an interrupted execution, answering its resumed steps.

    Args:
        chain: the records of its resume chain, oldest first; the last is the
            interrupted record resumed (the newest).
        store: where the records of its child intents are loaded from.

    Attributes:
        attention: why the execution is parked (``reason``: ``nondeterminism``
            or ``side_effect_in_doubt``, ``step``, ``name``, ``message``), or
            ``None`` while it is not.
        served: how many recorded steps were served.
        ran: the numbers of the steps run live.
    """

    def __init__(
        self,
        chain: Sequence[ExecutionRecord],
        *,
        store: ExecutionStore | None = None,
    ) -> None:
        self.execution_id = chain[-1].execution_id
        #: the first execution of the chain, and the resumes it holds
        self.origin = resume_origin(chain[0])
        self.attempt = resume_attempt(chain[-1])
        self.attempts_from = attempts_from(chain[-1])
        if chain[-1].header.status is RecordStatus.WAITING:
            # it waited, it was not interrupted: its attempts count anew
            self.attempts_from = self.attempt + 1
        self.attention: JSONObject | None = None
        self.served = 0
        self.ran: list[int] = []
        self._store = store
        self._steps = chain_steps(chain)
        self._children: dict[int, list[int]] = {}
        #: a child execution's chain (oldest first), by the newest id in it
        self._child_chains: dict[str, tuple[str, ...]] = {}
        for step in self._steps:
            if step.parent is not None:
                self._children.setdefault(step.parent, []).append(step.number)
            if step.child_execution_id is not None and step.children:
                self._child_chains[step.child_execution_id] = step.children
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
            recorded = self._at_cursor()
            if recorded is None:
                return self._after_record()
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
            if _servable(recorded):
                self._consume(recorded.number)
                self.served += 1
                action = SERVE if recorded.outcome == "success" else REPLAY_ERROR
                return JournalDecision(
                    action, recorded, recorded.number, served_from=recorded.record
                )
            if (
                (side_effect or recorded.side_effect)
                and not recorded.idempotent
                and not recorded.cleared
            ):
                self._park(
                    "side_effect_in_doubt",
                    recorded,
                    SideEffectInDoubt(
                        recorded.number, name, args_hash, self.execution_id
                    ),
                )
            self.ran.append(recorded.number)
            return JournalDecision(LIVE, recorded, recorded.number)

    def patch(self, marker: str, args_hash: str, *, new: bool) -> StepDecision | None:
        """Match a patch check by position (see ``seams.Cassette.patch``).

        The recorded step here is the marker: it is served (a marker that
        started and never ended runs live again, when ``new``). Another step
        is here: ``None``, the old path, and the position stays the other
        step's. No recorded step is left: live when ``new``, else ``None``.
        """
        with self._lock:
            recorded = self._at_cursor()
            if recorded is None:
                return self._after_record() if new else None
            if recorded.name != marker or recorded.args_hash != args_hash:
                return None  # the record went on without the patch
            self._cursor += 1
            self._consume(recorded.number)
            if recorded.ended and recorded.outcome == "success":
                self.served += 1
                return JournalDecision(
                    SERVE, recorded, recorded.number, served_from=recorded.record
                )
            if not new:
                return None
            self.ran.append(recorded.number)
            return JournalDecision(LIVE, recorded, recorded.number)

    def _at_cursor(self) -> JournalStep | None:
        """The recorded step at this position (``None``: the record ended)."""
        if self._stop is not None:
            raise self._stop  # parked: nothing more runs
        steps = self._steps
        while (
            self._cursor < len(steps) and steps[self._cursor].number in self._consumed
        ):
            self._cursor += 1
        return steps[self._cursor] if self._cursor < len(steps) else None

    def _after_record(self) -> JournalDecision:
        """Run live, numbered after every step of the chain."""
        position, self._next = self._next, self._next + 1
        self.ran.append(position)
        return JournalDecision(LIVE, None, position)

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

    def ended(self, end: StepEnd) -> None:
        """Nothing to note: the new record says how each step ended."""

    def resumption(self) -> JSONObject:
        """The ``INTENT_RECEIVED`` links of the execution resuming this chain."""
        links: JSONObject = {
            "resumeOf": self.execution_id,
            "resumeOrigin": self.origin,
            "resumeAttempt": self.attempt + 1,
        }
        if self.attempts_from:  # an operator's decision: counted from there
            links["attemptsFrom"] = self.attempts_from
        return links

    def continue_as(self, execution_id: str) -> RecordHold | None:
        """Hold the newest record and link it to ``execution_id``, its resume.

        For a child intent's chain, which its parent's resume continues (a
        resume of the chain itself is ``durable.resume``, which does the
        same): the link keeps the record out of every later recovery scan,
        and the hold, until it is released, out of any other resumer's hands.
        ``None`` when the store keeps no links or a live process holds it.

        Raises:
            StoreError: the link could not be written.
        """
        store = self._store
        if not isinstance(store, DurableStore):
            return None
        try:
            hold = store.hold_record(self.execution_id)
        except IntentusNetError:
            return None
        if hold is not None:
            try:
                hold.link(execution_id)
            except BaseException:
                hold.release()
                raise
        return hold

    def child(self, execution_id: str) -> Journal | None:
        """The journal of a recorded child intent, to resume it too.

        Its chain is every child record the step's starts name, oldest first
        (a child whose process died before its record opened has none).
        """
        store = self._store
        if store is None:
            return None
        chain: list[ExecutionRecord] = []
        for child_id in self._child_chains.get(execution_id, (execution_id,)):
            try:
                chain.append(store.load(child_id))
            except IntentusNetError:
                continue
        return Journal(chain, store=store) if chain else None
