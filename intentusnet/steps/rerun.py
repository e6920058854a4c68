"""Re-running a record with today's code, its steps served from the record.

``rerun(ReplayEngine(record), router)`` routes the recorded envelope again
through ``router`` (today's agents), as a new execution whose record links to
the original (``replayOf``). Each step the agents call is answered by the
original record (see :mod:`intentusnet.steps.cassette` for exactly when), so a strict
re-run makes no model, tool or network call. A re-run may start anywhere:
its ``RerunOptions`` (``from_failure``, ``from_step``, ``from_root_cause`` or
``from_snapshot``) serve what came before and run the rest live; ``live`` runs
chosen steps live and ``override`` serves chosen steps with edited outputs
(:mod:`intentusnet.steps.selection` has the rules).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .._util.jsonvalue import JSONObject, JSONValue
from ..envelope import AgentResponse, CacheDirective, IntentEnvelope
from ..errors import RecordNotFound
from ..record.model import ExecutionRecord
from ..replay import ReplayEngine
from ..routing.router import IntentRouter
from ..routing.seams import ExecutionOptions
from ..store.memory import MemoryExecutionStore
from .cassette import Cassette
from .diff import RecordDiff, diff_records
from .options import RerunOptions
from .selection import resolve
from .view import StepRun, chain_record_steps, record_steps

if TYPE_CHECKING:
    from ..store.protocol import ExecutionStore

__all__ = ["RerunResult", "rerun"]


@dataclass(frozen=True, slots=True)
class RerunResult:
    """What a re-run did. Added in 0.1.0.

    Attributes:
        response: the re-run's answer, as routing returned it.
        execution_id: the re-run's own record.
        original_execution_id: the record re-run.
        mode: ``strict``, or where it started: ``from_failure``,
            ``from_step``, ``from_root_cause`` or ``from_snapshot``.
        from_step: the recorded step the live part started at, if any
            (added in 0.1.0).
        allow_live: steps without a recording were allowed to run live.
        steps: how each step call was answered, in the order they ended.
        record: the re-run's record, loaded (``None`` if it was not recorded,
            or not asked for: ``compare=False``).
        diff: the re-run's record against the original (``None`` likewise).
    """

    response: AgentResponse
    execution_id: str | None
    original_execution_id: str
    mode: str
    allow_live: bool
    steps: tuple[StepRun, ...]
    record: ExecutionRecord | None
    diff: RecordDiff | None
    from_step: int | None = None

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
            "fromStep": self.from_step,
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
    engine: ReplayEngine,
    router: IntentRouter,
    options: RerunOptions = RerunOptions(),
    *,
    store: ExecutionStore | None = None,
    chain: Sequence[ExecutionRecord] = (),
    compare: bool = True,
) -> RerunResult:
    """Run a record's envelope again with today's agents, steps from the record.

    Unlike ``engine.replay()``, agent code runs: each step it calls is matched
    to the record by ``(name, argsHash)`` and occurrence and served from it, so
    a strict re-run makes no model, tool or network call. The re-run is
    recorded (in ``store``, else the router's store, else in memory) and
    linked to the original by ``replayOf``. See docs/debugging.md. Added in
    0.1.0.

    Args:
        engine: the record to re-run (it need not be replayable: an
            unfinished record can be resumed); the children of its ``route:``
            steps are loaded from the engine's store, if it has one.
        router: today's router and agents.
        options: where the re-run starts, which steps run live or are served
            with an edited output (a strict re-run by default).
        store: where to record the re-run.
        chain: the engine's record's resume chain, oldest first, the record
            last (a fork, ``intentusnet.fork``): the steps of every record of
            it answer, each from the record holding its end; the re-run's
            ``INTENT_RECEIVED`` names them (``rerunChain``).
        compare: load the re-run's record and diff it against the original
            (``record``, ``diff``); ``False`` leaves both ``None``, for a
            caller that compares answers first and diffs only those that
            differ (``rerun --all``; added in 0.1.0).

    Side-effect steps that succeeded are served in every case: an e-mail is
    never sent twice.

    Returns:
        The new response and record id, which steps were served and which ran,
        and the diff against the original record.

    Raises:
        InvalidRerunOption: an option names a step the record does not hold,
            or does not fit it (checked before anything runs).
        CassetteMiss: a step had no recording and may not run live; its
            ``rerun_execution_id`` names the re-run's record.
        SideEffectMismatch: a side-effect step was needed with other arguments.
        EnvelopeValidationError: the recorded envelope is not valid.
    """
    record = engine.record
    merged = chain_record_steps(chain)[0] if len(chain) > 1 else None
    # The record's steps, listed once for the options and the cassette.
    steps = record_steps(record) if merged is None else merged
    spec = resolve(record, options, engine.store, steps=steps)
    target = store or router.store or MemoryExecutionStore()
    cassette = Cassette(
        record,
        spec=spec,
        source_store=engine.store or target,
        chain=chain,
        steps=None if merged is not None else steps,
    )
    env = IntentEnvelope.model_validate(record.envelope)
    # Recorded as a re-run asks: never answered from the cache.
    routing = env.routing.model_copy(update={"cache": CacheDirective.BYPASS})
    env = env.model_copy(update={"routing": routing})
    received: JSONObject = {
        "replayOf": record.execution_id,
        "rerunMode": spec.mode,
        "allowLive": options.allow_live,
        **spec.to_json(),
    }
    if merged is not None:
        received["rerunChain"] = [r.execution_id for r in chain]
    execution = ExecutionOptions(received=received, store=target, cassette=cassette)
    response = router.route_intent(env, options=execution)
    execution_id = response.metadata.execution_id
    if cassette.misses:
        miss = cassette.misses[0]
        miss.rerun_execution_id = execution_id
        raise miss
    new_record: ExecutionRecord | None = None
    if execution_id is not None and compare:
        try:
            new_record = target.load(execution_id)
        except RecordNotFound:
            new_record = None
    return RerunResult(
        response=response,
        execution_id=execution_id,
        original_execution_id=record.execution_id,
        mode=spec.mode,
        allow_live=options.allow_live,
        steps=tuple(cassette.runs),
        record=new_record,
        diff=None if new_record is None else diff_records(record, new_record),
        from_step=spec.from_step,
    )
