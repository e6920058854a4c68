"""``RerunOptions``: where a re-run starts and which steps it runs live or edits.

``rerun``, ``plan_rerun``, ``intentusnet rerun`` and its ``--dry-run`` take the
same value. What can be checked without the record (one starting point, JSON
overrides) is checked when it is made; :func:`~intentusnet.steps.selection.resolve`
checks the rest against the record, before anything runs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

from .._util.jsonvalue import JSONValue, check_json
from ..errors import EnvelopeValidationError, InvalidRerunOption

__all__ = ["RerunOptions", "StepRef"]

#: A step named by its number in the record (``3``, ``"3"``) or by its name.
StepRef = int | str


@dataclass(frozen=True, slots=True, kw_only=True)
class RerunOptions:
    """How to re-run a record; ``RerunOptions()`` is a strict re-run. Added in 0.1.0.

    A step is named by its number in the record or by its name. At most one
    starting point (``from_*``) may be given.

    Attributes:
        from_failure: resume: serve the steps that succeeded before the first
            failed (or unfinished) step; run that step and every later one live.
        from_step: serve the steps before this one; run it and every later one
            live (a name: the first step so named).
        from_root_cause: as ``from_step``, from the step ``explain`` names as
            the root cause of the failure.
        from_snapshot: serve the steps up to this snapshot (``ctx.snapshot``;
            a name: the last one so named), restore its state, run the rest
            live.
        live: steps to run live, serving the rest (a name: every step so
            named). A side effect cannot be run live.
        override: outputs to serve instead of the recorded ones, by step (a
            fork: calls the record cannot answer after it run live).
        allow_live: run a step the record cannot answer (marked as a miss)
            instead of raising ``CassetteMiss``.

    Raises:
        InvalidRerunOption: two starting points, or an override that is not
            JSON.
    """

    from_failure: bool = False
    from_step: StepRef | None = None
    from_root_cause: bool = False
    from_snapshot: StepRef | None = None
    live: Collection[StepRef] = ()
    override: Mapping[StepRef, JSONValue] = field(default_factory=dict)
    allow_live: bool = False

    def __post_init__(self) -> None:
        starts = self.starts
        if len(starts) > 1:
            raise InvalidRerunOption(
                f"give one starting point, not {' and '.join(starts)}", starts[1]
            )
        for ref, value in self.override.items():
            try:
                check_json(value, "override")
            except EnvelopeValidationError as exc:
                raise InvalidRerunOption(
                    f"the output given for step {ref!r} is not JSON: {exc}",
                    "override",
                ) from None

    @property
    def starts(self) -> list[str]:
        """The starting points given, by option name."""
        return [
            name
            for name, given in (
                ("from_failure", self.from_failure),
                ("from_step", self.from_step is not None),
                ("from_root_cause", self.from_root_cause),
                ("from_snapshot", self.from_snapshot is not None),
            )
            if given
        ]
