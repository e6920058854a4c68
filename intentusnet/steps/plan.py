"""What a re-run would do with each recorded step, without running anything.

``plan_rerun(engine, ...)`` takes the options of ``intentusnet.rerun`` and
says, for every step of the record, whether the re-run would serve it, run it
live, skip it as a side effect (served: never made again), serve it with an
edited output, raise its recorded failure again, or stop on it. It is what
``intentusnet rerun ID --dry-run`` prints. It predicts from the record alone:
today's code may call other steps, or the same ones with other arguments,
and those are matched when they happen.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from .._util.jsonvalue import JSONObject, wire_form
from ..replay import ReplayEngine
from .options import RerunOptions
from .selection import INSIDE, LIVE, MISS, classify, resolve
from .view import record_steps

__all__ = ["PlannedStep", "RerunPlan", "plan_rerun"]

#: Actions after which the step's code does not run, nor anything inside it.
_NOT_CALLED: Final = frozenset({"serve", "side_effect", "override", "replay_error"})


@dataclass(frozen=True, slots=True)
class PlannedStep:
    """What a re-run would do with one recorded step. Added in 0.1.0.

    Attributes:
        number: the step's number in the record.
        name: the step's name.
        action: ``serve``, ``live``, ``side_effect`` (served: a side effect is
            never made again), ``override`` (served with the output given),
            ``replay_error`` (its recorded failure raised again), ``miss``
            (it cannot be served: the re-run would stop with
            ``CassetteMiss``) or ``inside`` (not called: it ran inside a step
            that is served).
        why: the reason, for people.
        side_effect: the step is marked as a side effect.
    """

    number: int
    name: str
    action: str
    why: str
    side_effect: bool

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        return wire_form(self)


@dataclass(frozen=True, slots=True)
class RerunPlan:
    """What a re-run of a record would do, step by step. Added in 0.1.0.

    Attributes:
        execution_id: the record.
        mode: ``strict``, ``from_failure``, ``from_step``, ``from_root_cause``
            or ``from_snapshot``.
        from_step: the step the live part would start at, if any.
        allow_live: calls the record cannot answer would run live.
        steps: one entry per recorded step, in the order they started.
    """

    execution_id: str
    mode: str
    from_step: int | None
    allow_live: bool
    steps: tuple[PlannedStep, ...]

    def of_action(self, action: str) -> tuple[PlannedStep, ...]:
        """The steps with one action, e.g. ``live``."""
        return tuple(s for s in self.steps if s.action == action)

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form (``intentusnet rerun --dry-run --json``)."""
        return wire_form(self)


def plan_rerun(
    engine: ReplayEngine, options: RerunOptions = RerunOptions()
) -> RerunPlan:
    """Say what ``rerun`` with these options would do with each recorded step.

    Nothing runs: no agent, no step, nothing recorded. The options are those
    of :func:`~intentusnet.rerun`, checked the same way. Added in 0.1.0.

    Raises:
        InvalidRerunOption: an option names a step the record does not hold,
            or does not fit it.
    """
    record = engine.record
    spec = resolve(record, options, engine.store)
    planned: list[PlannedStep] = []
    actions: dict[int, str] = {}
    for step in record_steps(record):
        parent = step.parent
        if parent is not None and actions.get(parent) in (*_NOT_CALLED, INSIDE):
            action, why = INSIDE, f"inside step {parent}, which is not called"
        else:
            action, why = classify(step, spec)
            if action == MISS and spec.lenient and not step.side_effect:
                action, why = LIVE, f"{why}: runs live"
            elif action == MISS:
                why += ": the re-run would stop here (CassetteMiss)"
        actions[step.number] = action
        planned.append(
            PlannedStep(step.number, step.name, action, why, step.side_effect)
        )
    return RerunPlan(
        execution_id=record.execution_id,
        mode=spec.mode,
        from_step=spec.from_step,
        allow_live=options.allow_live,
        steps=tuple(planned),
    )
