"""``records export --to DIR``: a golden set, a small self-contained file store.

The selected records go to DIR with every record their steps link to (the
child of a ``ctx.route`` step, the transport record of an HTTP step), and
theirs in turn, so that a strict re-run of each finds everything it serves.
Each is copied as ``copy`` copies: its bytes verified, then written as they
are. Nothing else of the store goes along (no keys, no cache entries); a
record holds what a ``Redactor`` let through when it was made.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..errors import IntentusNetError
from .context import open_named, open_store
from .copy import Tally, copy_one, report
from .selection import select

if TYPE_CHECKING:
    from ..store.naming import NamedStore

__all__ = ["export_records"]


def export_records(
    ctx: click.Context, directory: Path, *, as_json: bool, **selection: Any
) -> None:
    """Copy the selection and the records it links to into the store ``directory``.

    ``selection``: the arguments of :func:`.selection.select` but the store.
    """
    source = open_store()
    chosen = list(select(source, **selection)())
    target = open_named(str(directory), create=True)
    ctx.call_on_close(target.close)
    tally = Tally()
    for execution_id in _with_children(source, chosen):
        copy_one(source, target, execution_id, tally)
    report(ctx, tally, as_json)


def _with_children(source: NamedStore, ids: list[str]) -> list[str]:
    """``ids`` and every record their steps link to, each once, parents first."""
    from ..steps.view import record_steps

    seen = set(ids)
    ordered = list(ids)
    todo = list(ids)
    while todo:
        try:
            record = source.load(todo.pop())
        except IntentusNetError:
            continue  # copying it says what is wrong with it
        for step in record_steps(record):
            child = step.child_execution_id
            if child is not None and child not in seen:
                seen.add(child)
                ordered.append(child)
                todo.append(child)
    return ordered
