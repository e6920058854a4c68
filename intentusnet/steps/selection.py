"""Where a re-run starts: its options resolved against the record, step by step.

A re-run's options name recorded steps: where the live part starts
(``from_failure``, ``from_step``, ``from_root_cause``, ``from_snapshot``), which
steps run live anyway (``live``) and which are served with an edited output
(``override``). :func:`resolve` checks them against the record once, before
anything runs, and gives a :class:`RerunSpec`; :func:`classify` then says what
a re-run does with a recorded step called again with its recorded arguments.
The cassette (which answers the calls) and :func:`~intentusnet.plan_rerun`
(which only predicts) both ask :func:`classify`: one rule, in one place.

The rules, in order:

1. an overridden step is served with the output given;
2. a side effect that succeeded is served: it is never made again;
3. a step in the live part (from the starting step on, or named by ``live``)
   runs live;
4. a step that succeeded is served; one that failed has its failure raised
   again; one that cannot be served (not JSON, never finished) is a miss,
   which runs live when the re-run has a starting point or ``allow_live``.

A nested step goes with its outermost enclosing step: starting from it, or
running it live, starts from (or runs live) the step it was called in.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import InvalidRerunOption
from ..record.model import ExecutionRecord
from ..routing.agents import SNAPSHOT_PREFIX
from .explain import explain
from .options import RerunOptions, StepRef
from .view import UNFINISHED, RecordedStep, record_steps

if TYPE_CHECKING:
    from ..store.protocol import ExecutionStore

__all__ = [
    "INSIDE",
    "LIVE",
    "MISS",
    "OVERRIDE",
    "REPLAY_ERROR",
    "SERVE",
    "SIDE_EFFECT",
    "RerunSpec",
    "StepRef",
    "classify",
    "resolve",
]

#: What a re-run does with a recorded step (see :func:`classify`).
SERVE: Final = "serve"
SIDE_EFFECT: Final = "side_effect"
OVERRIDE: Final = "override"
LIVE: Final = "live"
REPLAY_ERROR: Final = "replay_error"
MISS: Final = "miss"
#: Not called at all: it ran inside a step that is served.
INSIDE: Final = "inside"

_MAX_SUGGESTIONS: Final = 3


@dataclass(frozen=True, slots=True)
class RerunSpec:
    """A re-run's options, resolved against its record.

    Attributes:
        mode: ``strict``, ``from_failure``, ``from_step``, ``from_root_cause``
            or ``from_snapshot``.
        allow_live: a call the record cannot answer runs live.
        from_step: the recorded step the live part starts at, if any.
        live_from: the ``seq`` of that step's ``STEP_START`` line: steps that
            started at or after it run live. ``None``: no live part.
        live: recorded steps run live wherever they are.
        overrides: outputs served instead of the recorded ones, by step number.
        snapshot: for ``from_snapshot``, the snapshot step whose state is
            restored.
    """

    mode: str = "strict"
    allow_live: bool = False
    from_step: int | None = None
    live_from: int | None = None
    live: frozenset[int] = frozenset()
    overrides: Mapping[int, JSONValue] = field(default_factory=dict)
    snapshot: int | None = None

    @property
    def lenient(self) -> bool:
        """A call the record cannot answer runs live (marked a miss)."""
        return self.allow_live or self.mode != "strict"

    def for_child(self, record: ExecutionRecord) -> RerunSpec:
        """The spec a re-run's child intent is re-run with.

        A strict re-run re-runs the child strictly and a resumed one resumes
        it; a re-run from a step re-runs the child (routed from the live part)
        live from its start, its side effects still served. ``live`` and
        ``override`` name steps of the parent only.
        """
        if self.mode == "strict":
            return RerunSpec(allow_live=self.allow_live)
        if self.mode == "from_failure":
            resume = RerunOptions(from_failure=True, allow_live=self.allow_live)
            return resolve(record, resume)
        return RerunSpec(mode="from_step", allow_live=self.allow_live, live_from=0)

    def to_json(self) -> JSONObject:
        """The ``INTENT_RECEIVED`` data of the re-run's record (beyond its mode)."""
        data: JSONObject = {}
        if self.from_step is not None:
            data["rerunFrom"] = self.from_step
        if self.live:
            data["rerunLive"] = list[JSONValue](sorted(self.live))
        if self.overrides:
            data["rerunOverride"] = list[JSONValue](sorted(self.overrides))
        return data


def classify(step: RecordedStep, spec: RerunSpec) -> tuple[str, str]:
    """What a re-run does with ``step`` when it is called as recorded, and why.

    Returns:
        ``(action, why)``: the action is ``override``, ``side_effect`` (served:
        never made again), ``serve``, ``live``, ``replay_error`` (its recorded
        failure raised again) or ``miss`` (it cannot be served; it runs live if
        ``spec.lenient``, else the re-run stops with ``CassetteMiss``).
    """
    number = step.number
    if number in spec.overrides:
        return OVERRIDE, "served with the output given"
    live_here = number in spec.live or (
        spec.live_from is not None and step.start_seq >= spec.live_from
    )
    where = _live_reason(step, spec) if live_here else ""
    if step.ok:
        if step.side_effect:
            if step.replayable:
                return SIDE_EFFECT, "a side effect: never made again, served"
            return MISS, f"a side effect that cannot be served ({step.reason})"
        if live_here:
            return LIVE, where
        if step.replayable:
            before = "" if spec.from_step is None else f" before step {spec.from_step}"
            return SERVE, f"succeeded{before}: served from the record"
        return MISS, f"cannot be served ({step.reason})"
    if live_here:
        return LIVE, where
    if step.outcome != UNFINISHED:
        return REPLAY_ERROR, f"failed ({step.error_text}): its failure is raised again"
    return MISS, f"cannot be served ({step.reason})"


def _live_reason(step: RecordedStep, spec: RerunSpec) -> str:
    if step.number in spec.live:
        return "named to run live"
    if spec.from_step == step.number:
        return {
            "from_failure": "the failure: runs live",
            "from_root_cause": "the root cause: runs live",
        }.get(spec.mode, "the step the re-run starts at: runs live")
    if spec.from_step is None:
        return "runs live"
    return f"after step {spec.from_step}: runs live"


def resolve(
    record: ExecutionRecord,
    options: RerunOptions,
    store: ExecutionStore | None = None,
    *,
    steps: tuple[RecordedStep, ...] | None = None,
) -> RerunSpec:
    """Check a re-run's options against ``record`` and resolve them.

    Args:
        record: the record to re-run.
        options: the re-run's options.
        store: where ``explain`` loads a failed child intent's record from.
        steps: the steps to resolve them against, when not ``record``'s own
            (a fork's: its resume chain's, ``view.chain_record_steps``).

    Raises:
        InvalidRerunOption: a step is not in the record, no root cause or
            failure is found, or a side effect is asked to run live.
    """
    from_step, from_snapshot = options.from_step, options.from_snapshot
    if steps is None:
        steps = record_steps(record)
    by_number = {s.number: s for s in steps}
    starts = options.starts
    mode = starts[0] if starts else "strict"
    start: RecordedStep | None = None
    snapshot: RecordedStep | None = None
    if options.from_failure:
        start = next((s for s in steps if not s.ok), None)
    elif from_step is not None:
        start = _find(steps, from_step, "from_step")[0]
    elif options.from_root_cause:
        start = _root_cause(record, store)
    elif from_snapshot is not None:
        snapshot = _snapshot(steps, from_snapshot)
    live_from: int | None = None
    if start is not None:
        start = _ancestry(start, by_number)[-1]  # the top-level step it is in
        live_from = start.start_seq
    elif snapshot is not None:
        live_from = snapshot.start_seq + 1  # the snapshot itself is served
    chosen: set[int] = set()
    for ref in options.live:
        for found in _find(steps, ref, "live"):
            if found.side_effect and found.ok:
                raise InvalidRerunOption(
                    f"step {found.number} ({found.name}) is a side effect: a "
                    "re-run never makes it again (override its output instead)",
                    "live",
                )
            chosen.update(s.number for s in _ancestry(found, by_number))
    edited: dict[int, JSONValue] = {}
    for ref, value in options.override.items():
        for found in _find(steps, ref, "override"):
            edited[found.number] = value
    return RerunSpec(
        mode=mode,
        allow_live=options.allow_live,
        from_step=None if start is None else start.number,
        live_from=live_from,
        live=frozenset(chosen),
        overrides=edited,
        snapshot=None if snapshot is None else snapshot.number,
    )


def _find(
    steps: tuple[RecordedStep, ...], ref: StepRef, option: str
) -> list[RecordedStep]:
    """The steps ``ref`` names: one by number, or every one so named.

    ``from_step`` takes the first step so named.
    """
    text = str(ref).strip()
    if isinstance(ref, int) or text.isdigit():
        number = int(text)
        found = [s for s in steps if s.number == number]
        if not found:
            raise InvalidRerunOption(
                f"the record has no step {number} (it has steps 1 to {len(steps)})"
                if steps
                else f"the record has no step {number}: it recorded no steps",
                option,
            )
        return found
    found = [s for s in steps if s.name == text]
    if not found:
        names = sorted({s.name for s in steps})
        close = difflib.get_close_matches(text, names, n=_MAX_SUGGESTIONS)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        listed = ", ".join(names) if names else "none"
        raise InvalidRerunOption(
            f"the record has no step named {text!r}{hint} (its steps: {listed})",
            option,
        )
    return found[:1] if option == "from_step" else found


def _snapshot(steps: tuple[RecordedStep, ...], ref: StepRef) -> RecordedStep:
    snapshots = [s for s in steps if s.name.startswith(SNAPSHOT_PREFIX)]
    text = str(ref).strip()
    if isinstance(ref, int) or text.isdigit():
        found = [s for s in snapshots if s.number == int(text)]
    else:
        found = [s for s in snapshots if s.name == SNAPSHOT_PREFIX + text][-1:]
    if not found:
        names = sorted({s.name.removeprefix(SNAPSHOT_PREFIX) for s in snapshots})
        listed = ", ".join(names) if names else "none"
        raise InvalidRerunOption(
            f"the record has no snapshot {text!r} (its snapshots: {listed})",
            "from_snapshot",
        )
    snapshot = found[0]
    if not (snapshot.ok and snapshot.replayable):
        raise InvalidRerunOption(
            f"snapshot {text!r} (step {snapshot.number}) cannot be restored "
            f"({snapshot.reason or snapshot.outcome})",
            "from_snapshot",
        )
    return snapshot


def _root_cause(record: ExecutionRecord, store: ExecutionStore | None) -> RecordedStep:
    found = explain(record, store)
    if not found.failed:
        raise InvalidRerunOption(
            f"record {record.execution_id} did not fail: it has no root cause to "
            "start from",
            "from_root_cause",
        )
    if found.root_cause is None:
        failing = found.step
        where = (
            ""
            if failing is None
            else f" (it failed at {failing.name}, step {failing.number})"
        )
        raise InvalidRerunOption(
            f"explain names no root cause in record {record.execution_id}"
            + where
            + "; start from the failure or from a step you choose instead",
            "from_root_cause",
        )
    return found.root_cause


def _ancestry(
    step: RecordedStep, by_number: Mapping[int, RecordedStep]
) -> list[RecordedStep]:
    """``step``, the step it was called in, and so on to a top-level step."""
    chain = [step]
    seen = {step.number}
    parent = step.parent
    while parent is not None and parent in by_number and parent not in seen:
        current = by_number[parent]
        chain.append(current)
        seen.add(parent)
        parent = current.parent
    return chain
