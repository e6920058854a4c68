"""Two JSON values side by side, aligned line by line, their differences marked.

The diff page draws each difference of two records as rows: one row per key
or item present on either side, at its depth, A's text on the left and B's on
the right. A value that differs is one marked row (its text on each side, or
nothing where a side lacks it); an object or list that differs is opened, its
members compared the same way; a subtree equal on both sides is one folded
row that can be unfolded. So the changed paths are found by looking, inside
JSON that keeps its shape, and nothing equal takes room.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    from ..._util.jsonvalue import JSONValue
    from ...steps.diff import DiffEntry
    from ...steps.view import RecordedStep

__all__ = ["Row", "aligned", "entry_rows"]


@dataclass(frozen=True, slots=True)
class Row:
    """One line of an aligned diff.

    ``a`` and ``b`` are each side's text (``None``: the side lacks it);
    ``changed`` marks a value that differs; ``folded``, for an equal subtree,
    is its whole text to unfold.
    """

    depth: int
    key: str
    a: str | None
    b: str | None
    changed: bool = False
    folded: str | None = None


def _text(value: JSONValue, pretty: bool = False) -> str:
    option = orjson.OPT_INDENT_2 if pretty else 0
    return orjson.dumps(value, option=option).decode()


def _summary(value: dict[str, JSONValue] | list[JSONValue]) -> str:
    if isinstance(value, dict):
        return f"{{…}} {len(value)} key{'' if len(value) == 1 else 's'}, the same"
    return f"[…] {len(value)} item{'' if len(value) == 1 else 's'}, the same"


def aligned(
    a: JSONValue, b: JSONValue, *, has_a: bool = True, has_b: bool = True
) -> list[Row]:
    """The rows of ``a`` beside ``b``, from their roots.

    ``has_a=False`` (or ``has_b``) says that side has no value at all (a step
    only the other record made), which is not the same as ``null``.
    """
    rows: list[Row] = []
    _walk(rows, 0, "", (has_a, a), (has_b, b))
    return rows


def _walk(
    rows: list[Row],
    depth: int,
    key: str,
    a: tuple[bool, JSONValue],
    b: tuple[bool, JSONValue],
) -> None:
    (has_a, left), (has_b, right) = a, b
    # compared as JSON text: Python's True == 1 and 1 == 1.0, JSON's are not
    if has_a and has_b and _text(left) == _text(right):
        if isinstance(left, dict | list) and left:
            summary = _summary(left)
            rows.append(Row(depth, key, summary, summary, folded=_text(left, True)))
        else:
            rows.append(Row(depth, key, _text(left), _text(right)))
        return
    if has_a and has_b and isinstance(left, dict) and isinstance(right, dict):
        rows.append(Row(depth, key, "{", "{"))
        for name in [*left, *(k for k in right if k not in left)]:
            _walk(
                rows,
                depth + 1,
                _text(name) + ": ",
                (name in left, left.get(name)),
                (name in right, right.get(name)),
            )
        rows.append(Row(depth, "", "}", "}"))
        return
    if has_a and has_b and isinstance(left, list) and isinstance(right, list):
        rows.append(Row(depth, key, "[", "["))
        for n in range(max(len(left), len(right))):
            _walk(
                rows,
                depth + 1,
                f"[{n}] ",
                (n < len(left), left[n] if n < len(left) else None),
                (n < len(right), right[n] if n < len(right) else None),
            )
        rows.append(Row(depth, "", "]", "]"))
        return
    rows.append(
        Row(
            depth,
            key,
            _text(left, True) if has_a else None,
            _text(right, True) if has_b else None,
            changed=True,
        )
    )


def _step_view(step: RecordedStep, duration: bool) -> JSONValue:
    """What a step's diff compares: its arguments and answer (and duration)."""
    view: dict[str, JSONValue] = {
        "args": step.args,
        "outcome": step.outcome,
        "output": step.output,
        "error": step.error,
    }
    if duration:
        view["durationMs"] = step.duration_ms
    return view


def entry_rows(entry: DiffEntry) -> list[Row]:
    """The rows of one difference of ``diff_records``: its two steps, or values."""
    if entry.scope != "step":
        return aligned(entry.before, entry.after)
    duration = entry.kind == "duration_changed"
    return aligned(
        None if entry.a is None else _step_view(entry.a, duration),
        None if entry.b is None else _step_view(entry.b, duration),
        has_a=entry.a is not None,
        has_b=entry.b is not None,
    )
