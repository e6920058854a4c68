"""Where two runs of an intent part ways: a structured diff of two records.

Steps are paired by content first: the n-th step named X with arguments hash H
in one record pairs with the n-th such step in the other, wherever it stands.
Only the steps left over are paired by position: within the same stretch
between content-paired steps, a leftover step pairs with a leftover of the same
name (its arguments changed). So a step inserted at the start does not shift
every later step out of line: it is one ``step_added``.

What is compared, and the kinds of entries:

* the routing decision (``decision_changed``), which agents ran and which
  answered (``agent_changed``), the final status (``status_changed``), the final
  payload and error (``output_changed``, ``error_changed``, scope ``record``);
* each step: ``step_added``, ``step_removed``, and for a pair ``args_changed``,
  ``error_changed``, ``output_changed`` (the first of these that applies; every
  aspect that differs is in ``changes``);
* durations (``duration_changed``), only when the change is large: at least
  ``duration_ratio`` times and ``duration_min_ms`` apart. A step served from a
  record in a re-run has no comparable duration, nor has a run that served steps.

The first entry that is not about duration, in execution order, is the
``deviation_point``.

When both records carry the router's configuration (their headers' fingerprint
of the agents, versions, priorities and strategy) and it differs, a
``config_changed`` entry comes first and says what changed. It is context, not
behaviour: like a duration, it is never the deviation point.

A ``BROADCAST`` or ``PARALLEL`` execution runs several agents, each its own
branch: their steps are paired within each agent only, each agent's attempt is
compared (``attempt_changed``), and every branch gets its own deviation point
(``RecordDiff.branches``). The record's deviation point is then the branch
deviation that happened first in the second record.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final, TypeAlias

from .._util.jsonvalue import JSONObject, JSONValue, as_str, wire_form
from ..record.model import EventType, ExecutionEvent, ExecutionRecord
from ..replay import diff_paths
from .view import RecordedStep, record_steps

__all__ = [
    "BranchDiff",
    "DiffEntry",
    "RecordDiff",
    "configuration_changes",
    "diff_records",
]

_MAX_PATHS: Final = 10
#: Whether two durations differ enough to report.
_Slower: TypeAlias = Callable[[float | None, float | None], bool]
#: Entry kinds that are context, never the deviation point.
_CONTEXT: Final = frozenset({"duration_changed", "config_changed"})
#: Strategies whose agents run as branches, each diffed on its own.
_BRANCHED: Final = frozenset({"BROADCAST", "PARALLEL"})
#: Entry kinds, in the order an entry's primary kind is chosen for a step pair.
_PAIR_KINDS: Final = (
    ("args", "args_changed"),
    ("error", "error_changed"),
    ("output", "output_changed"),
    ("duration", "duration_changed"),
)


@dataclass(frozen=True, slots=True)
class DiffEntry:
    """One difference between two records. Added in 0.1.0.

    Attributes:
        kind: ``step_added``, ``step_removed``, ``args_changed``,
            ``output_changed``, ``error_changed``, ``duration_changed``,
            ``decision_changed``, ``agent_changed``, ``status_changed``,
            ``attempt_changed`` (a branch's agent answered differently) or
            ``config_changed`` (the router's configuration differs).
        scope: ``step``, ``branch`` or ``record``.
        name: the step's name, or the record's aspect (``decision``, ``agent``,
            ``status``, ``output``, ``error``, ``duration``).
        a: the step in the first record (``None`` if added or record scope).
        b: the step in the second record (``None`` if removed or record scope).
        changes: every aspect that differs: ``args``, ``output``, ``error``,
            ``duration`` (a step pair), or the ``name`` (record scope).
        paths: JSON paths where the args (or else the output) differ.
        before: the first record's value (record scope), else ``None``.
        after: the second record's value (record scope), else ``None``.
        deviation_point: this is where the two runs first part ways.
        detail: one line for people.
        branch: in a ``BROADCAST`` or ``PARALLEL`` execution, the agent whose
            branch this entry is about (added in 0.1.0).
    """

    kind: str
    scope: str
    name: str
    a: RecordedStep | None = None
    b: RecordedStep | None = None
    changes: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()
    before: JSONValue = None
    after: JSONValue = None
    deviation_point: bool = False
    detail: str = ""
    branch: str | None = None

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        return wire_form(self)


@dataclass(frozen=True, slots=True)
class BranchDiff:
    """One agent's branch of a ``BROADCAST`` or ``PARALLEL`` execution, diffed.

    Added in 0.1.0.

    Attributes:
        agent: the agent.
        entries: the differences in its steps and its attempt.
        deviation_point: where this branch parts ways (not a duration), if it
            does.
    """

    agent: str
    entries: tuple[DiffEntry, ...]
    deviation_point: DiffEntry | None

    @property
    def same(self) -> bool:
        """The branch did the same thing in both runs."""
        return self.deviation_point is None


@dataclass(frozen=True, slots=True)
class RecordDiff:
    """The differences between two records, in execution order. Added in 0.1.0.

    Attributes:
        a: the first record's execution id.
        b: the second record's execution id.
        a_fingerprint: the first record's fingerprint.
        b_fingerprint: the second record's fingerprint.
        entries: the differences, in execution order (branch by branch for
            ``BROADCAST`` and ``PARALLEL``).
        branches: for ``BROADCAST`` and ``PARALLEL``, each agent's branch with
            its own deviation point; empty otherwise (added in 0.1.0).
        a_configuration: the fingerprint of the router's configuration in the
            first record's header, ``None`` if it has none (added in 0.1.0).
        b_configuration: the same for the second record.
    """

    a: str
    b: str
    a_fingerprint: str
    b_fingerprint: str
    entries: tuple[DiffEntry, ...]
    branches: tuple[BranchDiff, ...] = ()
    a_configuration: str | None = None
    b_configuration: str | None = None

    @property
    def same(self) -> bool:
        """The runs did the same thing: only durations or the configuration differ."""
        return all(e.kind in _CONTEXT for e in self.entries)

    @property
    def same_configuration(self) -> bool | None:
        """Both ran under the same configuration; ``None`` if one has none."""
        if self.a_configuration is None or self.b_configuration is None:
            return None
        return self.a_configuration == self.b_configuration

    @property
    def deviation_point(self) -> DiffEntry | None:
        """The first entry where the runs part ways (not a duration), if any."""
        return next((e for e in self.entries if e.deviation_point), None)

    def of_kind(self, kind: str) -> tuple[DiffEntry, ...]:
        """The entries of one kind, e.g. ``step_added``."""
        return tuple(e for e in self.entries if e.kind == kind)

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form (what ``intentusnet diff --json`` prints)."""
        entries: list[JSONValue] = [e.to_json() for e in self.entries]
        point = self.deviation_point
        branches: list[JSONValue] = [
            {
                "agent": branch.agent,
                "same": branch.same,
                "deviationPoint": None
                if branch.deviation_point is None
                else self._index(branch.deviation_point),
                "entries": [self._index(e) for e in branch.entries],
            }
            for branch in self.branches
        ]
        return {
            "a": self.a,
            "b": self.b,
            "aFingerprint": self.a_fingerprint,
            "bFingerprint": self.b_fingerprint,
            "sameFingerprint": self.a_fingerprint == self.b_fingerprint,
            "same": self.same,
            "deviationPoint": None if point is None else self.entries.index(point),
            "entries": entries,
            "branches": branches,
            "aConfiguration": self.a_configuration,
            "bConfiguration": self.b_configuration,
            "sameConfiguration": self.same_configuration,
        }

    def _index(self, entry: DiffEntry) -> int:
        # by identity: two entries may be equal
        return next(i for i, e in enumerate(self.entries) if e is entry)


def diff_records(
    a: ExecutionRecord,
    b: ExecutionRecord,
    *,
    duration_ratio: float = 2.0,
    duration_min_ms: float = 10.0,
) -> RecordDiff:
    """Compare two records: what the second did differently. Added in 0.1.0.

    Args:
        a: the first record (e.g. the original run).
        b: the second record (e.g. its re-run).
        duration_ratio: a duration counts as changed only if one is at least
            this many times the other ...
        duration_min_ms: ... and they are at least this far apart.
    """

    def slower(x: float | None, y: float | None) -> bool:
        if x is None or y is None:
            return False
        low, high = sorted((x, y))
        return high - low >= duration_min_ms and high >= low * duration_ratio

    head: list[DiffEntry] = []
    config = _config_entry(a, b)
    if config is not None:
        head.append(config)
    decision_a, decision_b = _decision(a), _decision(b)
    if decision_a != decision_b:
        head.append(
            DiffEntry(
                "decision_changed",
                "record",
                "decision",
                before=decision_a,
                after=decision_b,
                detail=f"routing decision {_short(decision_a)} -> {_short(decision_b)}",
            )
        )
    steps_a, steps_b = record_steps(a), record_steps(b)
    # A run with steps served from a record took no comparable time.
    served = any(s.source == "record" for s in (*steps_a, *steps_b))
    tail = _outcome_entries(a, b, slower, compare_duration=not served)
    branches: tuple[BranchDiff, ...] = ()
    if _branched(decision_a) or _branched(decision_b):
        entries, branches = _branched_diff(a, b, head, tail, steps_a, steps_b, slower)
    else:
        found = [*head, *_step_entries(steps_a, steps_b, slower), *tail]
        first = _first(found)
        entries = [replace(e, deviation_point=True) if e is first else e for e in found]
    return RecordDiff(
        a=a.execution_id,
        b=b.execution_id,
        a_fingerprint=a.fingerprint,
        b_fingerprint=b.fingerprint,
        entries=tuple(entries),
        branches=branches,
        a_configuration=_config_fingerprint(a),
        b_configuration=_config_fingerprint(b),
    )


# -- configuration -------------------------------------------------------------------


def _config_fingerprint(record: ExecutionRecord) -> str | None:
    configuration = record.header.configuration
    return None if configuration is None else as_str(configuration.get("fingerprint"))


def configuration_changes(before: JSONValue, after: JSONValue) -> list[str]:
    """What differs between two header configurations, one phrase each.

    E.g. ``scorer 1.0 -> 1.1``, ``lookup added``, ``strategy DIRECT -> FALLBACK``.
    Added in 0.1.0.
    """
    if not isinstance(before, dict) or not isinstance(after, dict):
        return []
    changes: list[str] = []
    if before.get("strategy") != after.get("strategy"):
        changes.append(f"strategy {before.get('strategy')} -> {after.get('strategy')}")
    agents_a, agents_b = _agents(before), _agents(after)
    for name, old in agents_a.items():
        new = agents_b.get(name)
        if new is None:
            changes.append(f"{name} removed")
            continue
        if old.get("version") != new.get("version"):
            changes.append(f"{name} {old.get('version')} -> {new.get('version')}")
        if old.get("priority") != new.get("priority"):
            changes.append(
                f"{name} priority {old.get('priority')} -> {new.get('priority')}"
            )
    changes += [f"{name} added" for name in agents_b if name not in agents_a]
    if not changes and before.get("fingerprint") != after.get("fingerprint"):
        changes.append("the agents' order")
    return changes


def _agents(configuration: JSONObject) -> dict[str, JSONObject]:
    found = configuration.get("agents")
    agents = found if isinstance(found, list) else []
    return {
        str(agent.get("name")): agent for agent in agents if isinstance(agent, dict)
    }


def _config_entry(a: ExecutionRecord, b: ExecutionRecord) -> DiffEntry | None:
    before, after = a.header.configuration, b.header.configuration
    fingerprints = _config_fingerprint(a), _config_fingerprint(b)
    if None in fingerprints or fingerprints[0] == fingerprints[1]:
        return None
    changes = configuration_changes(before, after)
    return DiffEntry(
        "config_changed",
        "record",
        "configuration",
        changes=tuple(changes),
        before=before,
        after=after,
        detail="configuration changed: " + "; ".join(changes),
    )


# -- branches ------------------------------------------------------------------------


def _branched(decision: JSONValue) -> bool:
    return isinstance(decision, dict) and decision.get("strategy") in _BRANCHED


def _branched_diff(
    a: ExecutionRecord,
    b: ExecutionRecord,
    head: list[DiffEntry],
    tail: list[DiffEntry],
    steps_a: tuple[RecordedStep, ...],
    steps_b: tuple[RecordedStep, ...],
    slower: _Slower,
) -> tuple[list[DiffEntry], tuple[BranchDiff, ...]]:
    """Diff each agent's branch on its own; each branch gets its deviation point."""
    ends_a, ends_b = _attempt_ends(a), _attempt_ends(b)
    named = [*ends_b, *ends_a, *(s.agent for s in (*steps_b, *steps_a))]
    agents = [agent for agent in dict.fromkeys(named) if agent is not None]
    branches: list[tuple[str, list[DiffEntry]]] = []
    for agent in agents:
        found = [
            replace(entry, branch=agent)
            for entry in _step_entries(
                tuple(s for s in steps_a if s.agent == agent),
                tuple(s for s in steps_b if s.agent == agent),
                slower,
            )
        ]
        attempt = _attempt_entry(agent, ends_a.get(agent), ends_b.get(agent))
        if attempt is not None:
            found.append(attempt)
        branches.append((agent, found))

    def when(entry: DiffEntry) -> float:
        """Where the entry happened in B (A for what B lacks), to order branches."""
        step = entry.b or entry.a
        if step is not None:
            return step.start_seq
        end = ends_b.get(entry.branch or "") or ends_a.get(entry.branch or "")
        return end.seq if end is not None else float("inf")

    points = {agent: _first(found) for agent, found in branches}
    first = _first(head)
    if first is None:
        reached = [(when(p), i) for i, p in enumerate(points.values()) if p is not None]
        if reached:
            first = list(points.values())[min(reached)[1]]
    if first is None:
        first = _first(tail)
    marked: dict[int, DiffEntry] = {}

    def mark(entries: list[DiffEntry]) -> tuple[DiffEntry, ...]:
        done = []
        for entry in entries:
            new = replace(entry, deviation_point=True) if entry is first else entry
            marked[id(entry)] = new
            done.append(new)
        return tuple(done)

    entries = [*mark(head)]
    kept: list[BranchDiff] = []
    for agent, found in branches:
        mine = mark(found)
        point = points[agent]
        kept.append(
            BranchDiff(agent, mine, None if point is None else marked[id(point)])
        )
        entries.extend(mine)
    entries.extend(mark(tail))
    return entries, tuple(kept)


def _first(entries: list[DiffEntry]) -> DiffEntry | None:
    """The first entry that is not context (a duration, the configuration)."""
    return next((e for e in entries if e.kind not in _CONTEXT), None)


def _attempt_ends(record: ExecutionRecord) -> dict[str, ExecutionEvent]:
    """Each agent's first ``AGENT_ATTEMPT_END``, by agent."""
    found: dict[str, ExecutionEvent] = {}
    for event in record.events:
        if event.type is EventType.AGENT_ATTEMPT_END:
            agent = event.data.get("agent")
            if isinstance(agent, str) and agent not in found:
                found[agent] = event
    return found


def _attempt_view(end: ExecutionEvent | None) -> JSONValue:
    if end is None:
        return None
    error = end.data.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    return {
        "outcome": end.data.get("outcome"),
        "output": end.data.get("output"),
        "error": message,
    }


def _attempt_entry(
    agent: str, end_a: ExecutionEvent | None, end_b: ExecutionEvent | None
) -> DiffEntry | None:
    """How one branch's agent answered, if it answered differently."""
    before, after = _attempt_view(end_a), _attempt_view(end_b)
    paths = diff_paths(before, after, _MAX_PATHS)
    if not paths:
        return None
    if end_a is None or end_b is None:
        detail = f"{agent}: attempt only in {'B' if end_a is None else 'A'}"
    else:
        outcome_a, outcome_b = end_a.data.get("outcome"), end_b.data.get("outcome")
        detail = (
            f"{agent}: attempt {outcome_a} -> {outcome_b}"
            if outcome_a != outcome_b
            else f"{agent}: attempt {outcome_b}, differs at " + ", ".join(paths)
        )
    return DiffEntry(
        "attempt_changed",
        "branch",
        agent,
        paths=tuple(paths),
        before=before,
        after=after,
        detail=detail,
        branch=agent,
    )


# -- steps ---------------------------------------------------------------------------


def _step_entries(
    steps_a: tuple[RecordedStep, ...],
    steps_b: tuple[RecordedStep, ...],
    slower: _Slower,
) -> list[DiffEntry]:
    pairs = _content_pairs(steps_a, steps_b)
    anchors = _increasing(sorted(pairs))
    anchor_a = [i for i, _ in anchors]
    anchor_b = [j for _, j in anchors]
    paired_a = {i for i, _ in pairs}
    paired_b = {j for _, j in pairs}
    # Leftovers pair by name within the same stretch between anchors.
    waiting: dict[tuple[int, str], list[int]] = defaultdict(list)
    for i, s in enumerate(steps_a):
        if i not in paired_a:
            waiting[bisect.bisect_left(anchor_a, i), s.name].append(i)
    added: list[int] = []
    for j, s in enumerate(steps_b):
        if j in paired_b:
            continue
        queue = waiting.get((bisect.bisect_left(anchor_b, j), s.name))
        if queue:
            pairs.append((queue.pop(0), j))
        else:
            added.append(j)
    removed = sorted(i for queue in waiting.values() for i in queue)

    placed: list[tuple[float, int, DiffEntry]] = []
    for i, j in pairs:
        entry = _compare(steps_a[i], steps_b[j], slower)
        if entry is not None:
            placed.append((float(j), 1, entry))
    for j in added:
        step = steps_b[j]
        detail = f"{step.name} (step {step.number}) added"
        entry = DiffEntry("step_added", "step", step.name, b=step, detail=detail)
        placed.append((float(j), 1, entry))
    for i in removed:
        step = steps_a[i]
        stretch = bisect.bisect_left(anchor_a, i)
        at = anchor_b[stretch - 1] + 0.5 if stretch else -0.5
        detail = f"{step.name} (step {step.number}) removed"
        entry = DiffEntry("step_removed", "step", step.name, a=step, detail=detail)
        placed.append((at, 0, entry))
    placed.sort(key=lambda item: (item[0], item[1]))
    return [entry for _, _, entry in placed]


def _content_pairs(
    steps_a: tuple[RecordedStep, ...], steps_b: tuple[RecordedStep, ...]
) -> list[tuple[int, int]]:
    """Pair the n-th step with a (name, argsHash) in A with the n-th in B."""
    in_b: dict[tuple[str, str], list[int]] = defaultdict(list)
    for j, s in enumerate(steps_b):
        in_b[s.name, s.args_hash].append(j)
    taken: dict[tuple[str, str], int] = defaultdict(int)
    pairs: list[tuple[int, int]] = []
    for i, s in enumerate(steps_a):
        key = (s.name, s.args_hash)
        queue = in_b.get(key)
        if queue is not None and taken[key] < len(queue):
            pairs.append((i, queue[taken[key]]))
            taken[key] += 1
    return pairs


def _increasing(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of pairs (sorted by A) whose B indices also increase."""
    tails: list[int] = []  # B index ending the best run of each length
    tail_at: list[int] = []  # which pair ends it
    back: list[int] = []
    for k, (_, j) in enumerate(pairs):
        length = bisect.bisect_left(tails, j)
        if length == len(tails):
            tails.append(j)
            tail_at.append(k)
        else:
            tails[length] = j
            tail_at[length] = k
        back.append(tail_at[length - 1] if length else -1)
    chain: list[tuple[int, int]] = []
    k = tail_at[-1] if tail_at else -1
    while k >= 0:
        chain.append(pairs[k])
        k = back[k]
    chain.reverse()
    return chain


def _compare(a: RecordedStep, b: RecordedStep, slower: _Slower) -> DiffEntry | None:
    changes: list[str] = []
    if a.args_hash != b.args_hash:
        changes.append("args")
    if (a.outcome, a.error_text) != (b.outcome, b.error_text):
        changes.append("error")
    if a.output_hash != b.output_hash and a.ok and b.ok:
        changes.append("output")
    served = a.source == "record" or b.source == "record"
    if not served and slower(a.duration_ms, b.duration_ms):
        changes.append("duration")
    if not changes:
        return None
    kind = next(k for aspect, k in _PAIR_KINDS if aspect in changes)
    paths: list[str] = []
    if "args" in changes:
        paths = diff_paths(a.args, b.args, _MAX_PATHS)
    elif "output" in changes:
        paths = diff_paths(a.output, b.output, _MAX_PATHS)
    return DiffEntry(
        kind,
        "step",
        b.name,
        a=a,
        b=b,
        changes=tuple(changes),
        paths=tuple(paths),
        detail=_pair_detail(a, b, changes, paths),
    )


def _pair_detail(
    a: RecordedStep, b: RecordedStep, changes: list[str], paths: list[str]
) -> str:
    parts: list[str] = []
    if "args" in changes:
        parts.append("args differ at " + (", ".join(paths) or "$"))
    if "error" in changes:
        parts.append(f"{a.error_text or a.outcome} -> {b.error_text or b.outcome}")
    if "output" in changes:
        if paths == ["$"] and "args" not in changes:
            parts.append(f"output {_brief(a.output)} -> {_brief(b.output)}")
        else:
            where = ", ".join(paths) if paths and "args" not in changes else ""
            parts.append("output differs" + (f" at {where}" if where else ""))
    if "duration" in changes:
        parts.append(f"{a.duration_ms} ms -> {b.duration_ms} ms")
    return f"{b.name} (step {a.number} -> {b.number}): " + "; ".join(parts)


# -- the record as a whole -------------------------------------------------------


def _decision(record: ExecutionRecord) -> JSONValue:
    for event in record.events:
        if event.type is EventType.ROUTER_DECISION:
            data = event.data
            return {
                "strategy": data.get("strategy"),
                "candidates": data.get("candidates"),
            }
    return None


def _attempts(record: ExecutionRecord) -> list[JSONValue]:
    """The agents that ran, in order (their outcomes show in the status)."""
    return [
        event.data.get("agent")
        for event in record.events
        if event.type is EventType.AGENT_ATTEMPT_START
    ]


def _final(record: ExecutionRecord, key: str) -> JSONValue:
    final = record.final_response
    return None if final is None else final.get(key)


def _brief(value: JSONValue) -> str:
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "an object" if value else "an empty object"
    return type(value).__name__


def _short(value: JSONValue) -> str:
    if isinstance(value, dict) and "candidates" in value:
        names = value.get("candidates")
        listed = ", ".join(map(str, names)) if isinstance(names, list) else ""
        return f"{value.get('strategy')} [{listed}]"
    if isinstance(value, list):
        return "[" + ", ".join(map(str, value)) + "]"
    return str(value)


def _outcome_entries(
    a: ExecutionRecord, b: ExecutionRecord, slower: _Slower, *, compare_duration: bool
) -> list[DiffEntry]:
    found: list[DiffEntry] = []
    ha, hb = a.header, b.header
    attempts_a, attempts_b = _attempts(a), _attempts(b)
    if ha.agent != hb.agent or attempts_a != attempts_b:
        found.append(
            DiffEntry(
                "agent_changed",
                "record",
                "agent",
                before={"agent": ha.agent, "attempts": attempts_a},
                after={"agent": hb.agent, "attempts": attempts_b},
                detail=f"agents run {_short(attempts_a)} -> {_short(attempts_b)}, "
                f"answered by {ha.agent or '-'} -> {hb.agent or '-'}",
            )
        )
    for key, kind in (("payload", "output_changed"), ("error", "error_changed")):
        before, after = _final(a, key), _final(b, key)
        paths = diff_paths(before, after, _MAX_PATHS)
        if paths:
            found.append(
                DiffEntry(
                    kind,
                    "record",
                    "output" if key == "payload" else "error",
                    paths=tuple(paths),
                    before=before,
                    after=after,
                    detail=f"final {key} "
                    + (
                        f"{_brief(before)} -> {_brief(after)}"
                        if paths == ["$"]
                        else "differs at " + ", ".join(paths)
                    ),
                )
            )
    if ha.status != hb.status:
        found.append(
            DiffEntry(
                "status_changed",
                "record",
                "status",
                before=ha.status.value,
                after=hb.status.value,
                detail=f"status {ha.status.value} -> {hb.status.value}",
            )
        )
    if compare_duration and slower(ha.duration_ms, hb.duration_ms):
        found.append(
            DiffEntry(
                "duration_changed",
                "record",
                "duration",
                before=ha.duration_ms,
                after=hb.duration_ms,
                detail=f"duration {ha.duration_ms} ms -> {hb.duration_ms} ms",
            )
        )
    return found
