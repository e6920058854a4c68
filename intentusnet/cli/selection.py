"""The records a bulk command takes: ``rerun --all`` and ``records export``.

Both select as ``records list`` filters (``--intent``, ``--since``,
``--until``, ``--status``, ``--limit``), then may draw a seeded sample
(``--sample N --seed S``), through ``intentusnet.select_ids``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from functools import partial
from typing import TYPE_CHECKING, Any

import click

from .params import Choice, Since, options

if TYPE_CHECKING:
    from ..store.protocol import ExecutionStore

__all__ = ["STATUSES", "select", "selection_options"]

#: ``RecordStatus`` values, spelled out so that ``--help`` need not import the
#: record model (a test keeps them equal).
STATUSES = (
    "completed",
    "failed",
    "in_progress",
    "incomplete",
    "recording_failure",
    "needs_attention",
    "cancelled",
    "waiting",
    "queued",
)


#: The selection options: ``--since`` to ``--seed``.
selection_options = options(
    click.option(
        "--since",
        type=Since(),
        help="Records created at or after this time (ISO 8601, or e.g. 7d).",
    ),
    click.option(
        "--until",
        type=Since(),
        help="Records created before this time (exclusive).",
    ),
    click.option("--status", type=Choice(STATUSES), help="Records in this state."),
    click.option(
        "--limit",
        type=click.IntRange(min=1),
        metavar="N",
        help="The newest N records.",
    ),
    click.option(
        "--sample",
        type=click.IntRange(min=1),
        metavar="N",
        help="N of the selected records, drawn at random.",
    ),
    click.option(
        "--seed",
        type=int,
        default=0,
        show_default=True,
        help="With --sample: the seed of the draw (equal seeds, equal draws).",
    ),
)


def select(
    store: ExecutionStore,
    *,
    until: datetime | None,
    sample: int | None,
    seed: int,
    **filters: Any,
) -> Callable[[], Iterator[str]]:
    """The selection, as a function yielding its ids (newest first) each time.

    ``filters``: the other fields of ``ListFilters`` (``intent``, ``since``,
    ``status``, ``limit``). Each call walks the same records: without
    ``--until``, the selection ends at the moment this is called.
    """
    from ..store.filters import ListFilters
    from ..testing.bulk import select_ids

    selected = ListFilters(until=until or datetime.now(UTC), **filters)
    return partial(select_ids, store, selected, sample=sample, seed=seed)
