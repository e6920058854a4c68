"""Re-running a record with today's code, its steps served from the record.

``ReplayEngine(record).rerun(router)`` routes the recorded envelope again
through ``router`` (today's agents), as a new execution whose record links to
the original (``replayOf``). Each step the agents call is answered by the
original record (see :mod:`intentusnet.cassette` for exactly when), so a strict
re-run makes no model, tool or network call; ``from_failure=True`` resumes a
failed run, serving what succeeded before the failure and running the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._util.jsonvalue import JSONObject, JSONValue
from ..envelope import AgentResponse, CacheDirective, IntentEnvelope
from ..errors import RecordNotFound
from ..record.model import ExecutionRecord
from ..routing.hints import RouteHints, hinted
from .cassette import Cassette
from .diff import RecordDiff, diff_records
from .session import StepSession
from .view import StepRun

if TYPE_CHECKING:
    from ..routing.router import IntentRouter
    from ..routing.strategies import Execution
    from ..store import ExecutionStore

__all__ = ["RerunResult", "rerun"]


@dataclass(frozen=True, slots=True)
class RerunResult:
    """What a re-run did. Added in 0.1.0.

    Attributes:
        response: the re-run's answer, as routing returned it.
        execution_id: the re-run's own record.
        original_execution_id: the record re-run.
        mode: ``strict`` or ``from_failure``.
        allow_live: steps without a recording were allowed to run live.
        steps: how each step call was answered, in the order they ended.
        record: the re-run's record, loaded (``None`` if it was not recorded).
        diff: the re-run's record against the original.
    """

    response: AgentResponse
    execution_id: str | None
    original_execution_id: str
    mode: str
    allow_live: bool
    steps: tuple[StepRun, ...]
    record: ExecutionRecord | None
    diff: RecordDiff | None

    @property
    def ok(self) -> bool:
        """The re-run answered successfully."""
        return self.response.status == "success"

    @property
    def served(self) -> tuple[StepRun, ...]:
        """Steps answered from the original record."""
        return tuple(s for s in self.steps if s.source == "record")

    @property
    def ran(self) -> tuple[StepRun, ...]:
        """Steps that were called."""
        return tuple(s for s in self.steps if s.source == "live")

    @property
    def live_misses(self) -> tuple[StepRun, ...]:
        """Steps called because no recording could answer them."""
        return tuple(s for s in self.steps if s.source == "live" and s.miss)

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form (what ``intentusnet rerun --json`` prints)."""
        steps: list[JSONValue] = [s.to_json() for s in self.steps]
        return {
            "executionId": self.execution_id,
            "originalExecutionId": self.original_execution_id,
            "mode": self.mode,
            "allowLive": self.allow_live,
            "status": self.response.status,
            "response": self.response.to_wire(),
            "served": [s.name for s in self.served],
            "ran": [s.name for s in self.ran],
            "steps": steps,
            "fingerprint": None if self.record is None else self.record.fingerprint,
            "diff": None if self.diff is None else self.diff.to_json(),
        }


def rerun(
    record: ExecutionRecord,
    router: IntentRouter,
    *,
    from_failure: bool = False,
    allow_live: bool = False,
    store: ExecutionStore | None = None,
    source_store: ExecutionStore | None = None,
) -> RerunResult:
    """Route ``record``'s envelope again through ``router``, steps from the record.

    Args:
        record: the execution to re-run (it need not be replayable: an
            unfinished record can be resumed).
        router: today's router and agents.
        from_failure: serve the steps that succeeded before the first failed
            (or unfinished) step; run that step and every later one live.
        allow_live: run a step the record cannot answer instead of raising.
        store: where the re-run is recorded: the router's store by default,
            else an in-memory store.
        source_store: where the children of ``route:`` steps are loaded from
            when they must run again; ``store`` by default.

    Raises:
        CassetteMiss: a step had no recording and may not run live; its
            ``rerun_execution_id`` names the re-run's record.
        SideEffectMismatch: a side-effect step was needed with other arguments.
        EnvelopeValidationError: the recorded envelope is not valid.
    """
    from ..store import MemoryExecutionStore

    target = store or router.store or MemoryExecutionStore()
    cassette = Cassette(record, from_failure=from_failure, allow_live=allow_live)
    made: list[StepSession] = []

    def session(ex: Execution) -> StepSession:
        made.append(
            StepSession(
                ex.execution_id,
                ex.recorder,
                cassette=cassette,
                store=target,
                source_store=source_store or target,
            )
        )
        return made[-1]

    env = IntentEnvelope.model_validate(record.envelope)
    # The original answer must not come back from the cache: run it.
    routing = env.routing.model_copy(update={"cache": CacheDirective.BYPASS})
    env = env.model_copy(update={"routing": routing})
    hints = RouteHints(
        received={
            "replayOf": record.execution_id,
            "rerunMode": cassette.mode,
            "allowLive": allow_live,
        },
        store=target,
        session=session,
    )
    with hinted(hints):
        response = router.route_intent(env)
    execution_id = response.metadata.execution_id
    misses = [miss for s in made for miss in s.misses]
    if misses:
        misses[0].rerun_execution_id = execution_id
        raise misses[0]
    new_record: ExecutionRecord | None = None
    if execution_id is not None and made and made[0].recorder is not None:
        try:
            new_record = target.load(execution_id)
        except RecordNotFound:
            new_record = None
    return RerunResult(
        response=response,
        execution_id=execution_id,
        original_execution_id=record.execution_id,
        mode=cassette.mode,
        allow_live=allow_live,
        steps=tuple(run for s in made for run in s.runs),
        record=new_record,
        diff=None if new_record is None else diff_records(record, new_record),
    )
