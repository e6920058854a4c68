"""One record re-run strictly against today's code, and what became of it.

:func:`check_record` loads a record, re-runs it strictly (every step served
from the record, the network blocked, side effects served) and classifies the
result as a :class:`RecordVerdict`:

* ``same``: the final answer (status, payload, error) is the recorded one;
* ``changed``: another answer; where the runs first part ways and which paths
  of the answer differ;
* ``diverged``: the code asked for a step the record does not hold (new
  behaviour or nondeterminism), with the step's name and position;
* ``error``: the new code raised (where the record did not fail that way), or
  the record cannot be re-run: damaged, not replayable, of an intent no agent
  of the application handles;
* ``skipped``: a child record (a ``ctx.route`` child, an HTTP call): it is
  re-run with the record that made it.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Final

from .._util.jsonvalue import JSONObject, JSONValue, wire_form
from ..errors import (
    CassetteMiss,
    IntentusNetError,
    NondeterminismError,
    RecordIntegrityError,
    RecordNotFound,
)
from ..integrations.network import block_network
from ..replay import ReplayEngine
from ..routing.router import IntentRouter
from ..steps.diff import RecordDiff, diff_records
from ..steps.rerun import RerunResult, rerun
from ..steps.view import record_steps
from ..store.memory import MemoryExecutionStore
from ..store.protocol import ExecutionStore

__all__ = ["OUTCOMES", "RecordVerdict", "check_record"]

#: Every outcome, in the order summaries list them.
OUTCOMES: Final = ("same", "changed", "diverged", "error", "skipped")


@dataclass(frozen=True, slots=True)
class RecordVerdict:
    """What re-running one record with today's code gave. Added in 0.1.0.

    Attributes:
        execution_id: the record re-run.
        intent: its intent, ``name@version`` (empty if it could not be read).
        outcome: ``same``, ``changed``, ``diverged``, ``error`` or ``skipped``.
        reason: one line for people (empty for ``same``).
        deviation: ``changed``: the first difference, as ``diff`` names it.
        paths: ``changed``: the JSON paths where the answer differs.
        step: ``diverged``: the step the code asked for.
        position: ``diverged``: that step's number in the re-run.
        recorded: ``changed``: the recorded final payload (added in 0.1.0;
            not in :meth:`to_json`, whose row names the paths).
        answer: ``changed``: today's final payload (added in 0.1.0).
    """

    execution_id: str
    intent: str
    outcome: str
    reason: str = ""
    deviation: str | None = None
    paths: tuple[str, ...] = ()
    step: str | None = None
    position: int | None = None
    recorded: JSONValue = None
    answer: JSONValue = None

    @property
    def same(self) -> bool:
        """The re-run answered as recorded."""
        return self.outcome == "same"

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form (a row of ``rerun --all --json``)."""
        return wire_form(self, skip=("recorded", "answer"))


def check_record(
    store: ExecutionStore,
    execution_id: str,
    router: IntentRouter,
    *,
    allowed_hosts: Collection[str] = (),
) -> RecordVerdict:
    """Re-run record ``execution_id`` of ``store`` strictly with ``router``.

    The re-run is recorded in memory and dropped: the store is only read.
    Every connection but to ``allowed_hosts`` is refused meanwhile. Added in
    0.1.0.

    Returns:
        The verdict; every failure of the record or of the new code is one
        (``error``), never an exception.
    """
    try:
        engine = ReplayEngine.from_store(store, execution_id)
    except RecordIntegrityError as exc:
        return RecordVerdict(execution_id, "", "error", f"tampered: {exc}")
    except IntentusNetError as exc:
        return RecordVerdict(execution_id, "", "error", f"cannot be read: {exc}")
    header = engine.record.header
    intent = f"{header.intent_name}@{header.intent_version}"
    if header.parent_execution_id is not None:
        why = f"a child of {header.parent_execution_id}, re-run with it"
        return RecordVerdict(execution_id, intent, "skipped", why)
    replayable, reason = engine.is_replayable()
    if not replayable:
        why = f"not replayable: {reason}"
        return RecordVerdict(execution_id, intent, "error", why)
    if (header.intent_name, header.intent_version) not in router.registry.intents():
        why = f"no agent of this application handles {intent} (from another app?)"
        return RecordVerdict(execution_id, intent, "error", why)
    scratch = MemoryExecutionStore()
    try:
        with block_network(allowed_hosts) as block:
            # Compared by answer first: only an answer that differs is diffed.
            result = rerun(engine, router, store=scratch, compare=False)
    except CassetteMiss as miss:
        return _diverged(execution_id, intent, miss, scratch)
    except Exception as exc:  # the new code raised outside any agent
        why = f"raised {type(exc).__name__}: {exc}"
        return RecordVerdict(execution_id, intent, "error", why)
    if block.refused:
        why = f"connected to {block.refused[0]} (the network is blocked)"
        return RecordVerdict(execution_id, intent, "error", why)
    return _compare(execution_id, intent, engine, result, scratch)


def _compare(
    execution_id: str,
    intent: str,
    engine: ReplayEngine,
    result: RerunResult,
    scratch: ExecutionStore,
) -> RecordVerdict:
    """``same``, ``changed`` or ``error``: the re-run's answer against the record's."""
    recorded = engine.record.final_response or {}
    answer = result.response.to_wire()
    keys = ("status", "payload", "error")
    if all(recorded.get(key) == answer.get(key) for key in keys):
        return RecordVerdict(execution_id, intent, "same")
    error = result.response.error
    if error is not None:
        why = f"{error.code}: {error.message}"
        return RecordVerdict(execution_id, intent, "error", why)
    diff = _diff(engine, result, scratch)
    point = None if diff is None else diff.deviation_point
    deviation = None if point is None else f"{point.name} ({point.kind})"
    paths: tuple[str, ...] = ()
    if diff is not None:
        for entry in diff.of_kind("output_changed"):
            if entry.scope == "record":
                paths = entry.paths
    where = f"first deviation: {deviation}" if deviation else "another answer"
    why = where + (f"; answer differs at {', '.join(paths)}" if paths else "")
    return RecordVerdict(
        execution_id,
        intent,
        "changed",
        why,
        deviation=deviation,
        paths=paths,
        recorded=recorded.get("payload"),
        answer=answer.get("payload"),
    )


def _diff(
    engine: ReplayEngine, result: RerunResult, scratch: ExecutionStore
) -> RecordDiff | None:
    """The re-run's record (in ``scratch``) against the original, if recorded."""
    if result.execution_id is None:
        return None
    try:
        return diff_records(engine.record, scratch.load(result.execution_id))
    except RecordNotFound:
        return None


def _diverged(
    execution_id: str, intent: str, miss: CassetteMiss, scratch: ExecutionStore
) -> RecordVerdict:
    """The code asked for step ``miss.name``: where, from the re-run's record."""
    position: int | None = None
    if isinstance(miss, NondeterminismError):
        position = miss.position
    elif miss.rerun_execution_id is not None:
        try:
            steps = record_steps(scratch.load(miss.rerun_execution_id))
        except IntentusNetError:
            steps = ()  # not recorded: the position stays unknown
        asked = [s.number for s in steps if s.name == miss.name]
        position = asked[-1] if asked else None
    at = "" if position is None else f" at step {position}"
    why = f"asked for {miss.name!r}{at}, which the record does not hold"
    return RecordVerdict(
        execution_id, intent, "diverged", why, step=miss.name, position=position
    )
