"""The PostgreSQL store's step index: ``intentusnet_steps``, derived from the lines.

One row per ended step (``store.step_index``), written by the statement that
appends its ``STEP_END`` line (or imports the record), so the index never
lags the lines; gone with its record (``ON DELETE CASCADE``); rebuilt by
``reindex`` from the lines. The table and its index are created ``IF NOT
EXISTS`` with the others (``schema``): records written before it existed
are indexed by the first ``reindex``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..step_index import StepKey, StepRef
from .connection import Connection

#: A common table expression adding the ended steps given as three arrays
#: (numbers, names, args hashes) of the record named after them, with the
#: record's envelope hash and creation time (none if the record is gone).
ADD: Final = """added_steps AS (
        INSERT INTO intentusnet_steps
            (execution_id, step, envelope_hash, name, args_hash, created_us)
        SELECT r.execution_id, u.s, r.envelope_hash, u.n, u.a, r.created_us
        FROM unnest(%b::integer[], %b::text[], %b::text[]) AS u(s, n, a),
            intentusnet_records r
        WHERE r.execution_id = %s
        ON CONFLICT DO NOTHING)"""
_FIND: Final = """SELECT execution_id, step FROM intentusnet_steps
    WHERE envelope_hash = %s AND name = %s {args}
    ORDER BY created_us DESC, execution_id DESC, step LIMIT %s"""


def add_params(execution_id: str, keys: Sequence[StepKey]) -> list[object]:
    """The parameters of :data:`ADD` for one record's ended steps."""
    return [
        [number for _n, _a, number in keys],
        [name for name, _a, _s in keys],
        [args_hash for _n, args_hash, _s in keys],
        execution_id,
    ]


def add(db: Connection, execution_id: str, keys: Sequence[StepKey]) -> None:
    """Index one record's ended steps (``reindex``: rows there are kept)."""
    if keys:
        db.run(
            f"WITH {ADD} SELECT 1",
            add_params(execution_id, keys),
            doing=f"record {execution_id}: could not index its steps",
        )


def find(
    db: Connection,
    envelope_hash: str,
    name: str,
    args_hash: str | None,
    limit: int | None,
) -> list[StepRef]:
    """A lookup of the step index (see ``StepIndex.find_steps``)."""
    params: list[object] = [envelope_hash, name]
    args = ""
    if args_hash is not None:
        args = "AND args_hash = %s"
        params.append(args_hash)
    rows = db.read(_FIND.format(args=args), [*params, limit])
    return [StepRef(str(row[0]), int(row[1])) for row in rows]
