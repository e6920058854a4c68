"""A record as a cassette: which recorded step answers a step call in a re-run.

A step call is matched to the recorded steps by ``(name, argsHash)`` and
occurrence: the n-th call with these arguments gets the n-th recorded one.
What happens then depends on the re-run's mode:

=====================================  ==============  ===========================
the call                               strict          from failure
=====================================  ==============  ===========================
recorded, succeeded                    served          served if before the first
                                                       failure, else run live
recorded, failed                       its error again run live
no recording                           ``CassetteMiss`` run live
                                       (live if
                                       ``allow_live``)
=====================================  ==============  ===========================

A side-effect step (``side_effect=True``, in the call or in the record) that
is recorded and succeeded is always served, whatever the mode; when it is not
recorded with these arguments while a call of it is still unserved, the re-run
stops with ``SideEffectMismatch`` rather than do something the original did
not.
"""

from __future__ import annotations

import difflib
import threading
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from .._util.jsonvalue import JSONValue
from ..errors import CassetteMiss, IntentusNetError, SideEffectMismatch
from ..record.model import ExecutionRecord
from ..replay import diff_paths
from ..routing.seams import LIVE, REPLAY_ERROR, SERVE, StepDecision
from .view import UNFINISHED, RecordedStep, StepRun, record_steps

if TYPE_CHECKING:
    from ..store.protocol import ExecutionStore

__all__ = ["Cassette", "Decision"]

_MAX_CANDIDATES: Final = 3


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one step call.

    Attributes:
        action: ``serve`` (return the recorded output), ``replay_error`` (raise
            the recorded failure again) or ``live`` (call it).
        recorded: the recorded step matched, if any.
        miss: ran live although no recording could answer it.
    """

    action: str
    recorded: RecordedStep | None = None
    miss: bool = False


class Cassette:
    """The recorded steps of one record, handed out to a re-run's step calls.

    Thread-safe: steps of agents running at once are matched under a lock.

    Args:
        record: the record re-run.
        from_failure: serve only what succeeded before the first failure.
        allow_live: run a step with no recording instead of raising.
        source_store: where the record's children are loaded from, to re-run
            them too; without it they run live.

    Attributes:
        runs: how each step call of the re-run ended, in that order.
        misses: the calls no recording could answer, raised as
            ``CassetteMiss`` (shared with the cassettes of its children).
    """

    def __init__(
        self,
        record: ExecutionRecord,
        *,
        from_failure: bool,
        allow_live: bool,
        source_store: ExecutionStore | None = None,
        misses: list[CassetteMiss] | None = None,
    ) -> None:
        self.execution_id = record.execution_id
        self.record = record
        self.from_failure = from_failure
        self.allow_live = allow_live
        self.source_store = source_store
        self.runs: list[StepRun] = []
        self.misses: list[CassetteMiss] = [] if misses is None else misses
        self.steps = record_steps(record)
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, str], list[RecordedStep]] = defaultdict(list)
        self._by_name: dict[str, list[RecordedStep]] = defaultdict(list)
        self._children: dict[int, list[RecordedStep]] = defaultdict(list)
        self._calls: dict[tuple[str, str], int] = defaultdict(int)
        self._used: set[int] = set()
        for step in self.steps:
            self._queues[step.name, step.args_hash].append(step)
            self._by_name[step.name].append(step)
            if step.parent is not None:
                self._children[step.parent].append(step)
        #: ``start_seq`` of the first step that failed or never ended
        self.failure_seq: int | None = next(
            (s.start_seq for s in self.steps if not s.ok), None
        )

    @property
    def mode(self) -> str:
        """``strict`` or ``from_failure``."""
        return "from_failure" if self.from_failure else "strict"

    def decide(
        self, name: str, args: JSONValue, args_hash: str, *, side_effect: bool
    ) -> Decision:
        """Match one step call and say what to do.

        Raises:
            SideEffectMismatch: a side-effect step is needed with arguments the
                record does not hold, while a recorded call is still unserved.
            CassetteMiss: no recording answers it and it may not run live.
        """
        try:
            return self._match(name, args, args_hash, side_effect)
        except CassetteMiss as miss:
            with self._lock:
                self.misses.append(miss)
            raise

    def ended(
        self,
        number: int,
        name: str,
        args_hash: str,
        source: str,
        decision: StepDecision | None,
        outcome: str,
    ) -> None:
        """Note how step ``number`` of the re-run ended (see ``runs``)."""
        recorded = None if decision is None else decision.recorded
        run = StepRun(
            number=number,
            name=name,
            args_hash=args_hash,
            source=source,
            recorded=None if recorded is None else recorded.number,
            miss=source == "miss" or (decision is not None and decision.miss),
            outcome=outcome,
        )
        with self._lock:
            self.runs.append(run)

    def child(self, execution_id: str) -> Cassette | None:
        """The cassette of the recorded child ``execution_id``, same modes.

        ``None`` without a source store, or when the child is gone or damaged.
        """
        if self.source_store is None:
            return None
        try:
            record = self.source_store.load(execution_id)
        except IntentusNetError:
            return None
        return Cassette(
            record,
            from_failure=self.from_failure,
            allow_live=self.allow_live,
            source_store=self.source_store,
            misses=self.misses,
        )

    def _match(
        self, name: str, args: JSONValue, args_hash: str, side_effect: bool
    ) -> Decision:
        with self._lock:
            key = (name, args_hash)
            self._calls[key] += 1
            occurrence = self._calls[key]
            named = self._by_name.get(name, ())
            side = side_effect or any(s.side_effect for s in named)
            recorded = next(
                (s for s in self._queues.get(key, ()) if s.number not in self._used),
                None,
            )
            if recorded is not None:
                self._consume(recorded)
                return self._recorded(recorded, side, args, occurrence)
            if side:
                waiting = [s for s in named if s.number not in self._used and s.ok]
                if waiting:
                    raise SideEffectMismatch(
                        name,
                        args_hash,
                        occurrence=occurrence,
                        candidates=self._describe(waiting, args),
                        execution_id=self.execution_id,
                        why="it has side effects and the record holds a call "
                        "of it with other arguments, not yet served; it is "
                        "not run again",
                    )
            if self.from_failure or self.allow_live:
                return Decision(LIVE, None, miss=True)
            raise CassetteMiss(
                name,
                args_hash,
                occurrence=occurrence,
                candidates=self.nearest(name, args),
                execution_id=self.execution_id,
            )

    def _recorded(
        self, recorded: RecordedStep, side: bool, args: JSONValue, occurrence: int
    ) -> Decision:
        failure = self.failure_seq
        if recorded.ok and recorded.replayable:
            before = failure is None or recorded.start_seq < failure
            if side or not self.from_failure or before:
                return Decision(SERVE, recorded)
            return Decision(LIVE, recorded)
        if self.from_failure:
            return Decision(LIVE, recorded)  # the failure point, or after it
        if recorded.outcome not in (UNFINISHED, "success"):
            return Decision(REPLAY_ERROR, recorded)
        if self.allow_live and not side:
            return Decision(LIVE, recorded, miss=True)
        raise CassetteMiss(
            recorded.name,
            recorded.args_hash,
            occurrence=occurrence,
            candidates=self.nearest(recorded.name, args),
            execution_id=self.execution_id,
            why=f"the recorded call cannot be served ({recorded.reason})",
        )

    def _consume(self, step: RecordedStep) -> None:
        # A served step's nested steps were answered with it.
        pending = [step]
        while pending:
            current = pending.pop()
            self._used.add(current.number)
            pending.extend(self._children.get(current.number, ()))

    def nearest(self, name: str, args: JSONValue) -> list[str]:
        """Describe the recorded steps most like a call of ``name`` with ``args``."""
        same = self._by_name.get(name)
        if same:
            return self._describe(same, args)
        close = difflib.get_close_matches(name, list(self._by_name), n=_MAX_CANDIDATES)
        return [f"{other} (another name)" for other in close]

    def _describe(self, steps: Iterable[RecordedStep], args: JSONValue) -> list[str]:
        described: list[str] = []
        for step in steps:
            if len(described) == _MAX_CANDIDATES:
                break
            paths = diff_paths(step.args, args, limit=5)
            differ = ", ".join(paths) if paths else "nothing visible"
            described.append(
                f"{step.name} (step {step.number}, args differ at {differ})"
            )
        return described
