"""The PostgreSQL store's catalog: ``intentusnet_records``, derived from the lines.

One row per record, the file store's catalog columns plus the record's lock
key. Writers keep it current (``writer``); this module reads it (list,
stats) and rebuilds it from the stored lines (:func:`reindex`), in batches of
records taken in id order, so memory stays flat however large the store.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import groupby
from operator import itemgetter
from typing import Final

from ...record.model import (
    ExecutionHeader,
    ExecutionRecord,
    RecordStatus,
    RecordSummary,
    ReplayableReason,
    StoreStats,
)
from ..filters import ListFilters
from ..rows import CatalogRow, catalog_mismatch, derived_row, report_changed
from ..step_index import StepKey
from . import steps
from .connection import Connection
from .schema import HELD, lock_key

COLUMNS: Final = (
    "execution_id, created_us, created_utc, intent, intent_version, envelope_hash, "
    "status, replayable, reason, agent, duration_ms, parent_id, owner, lines, size, "
    "chain_head"
)
#: The status a row shows: an unfinished record whose lock no session holds is
#: incomplete. Used with "WITH held(k) AS (HELD)".
STATUS: Final = (
    "CASE WHEN status = 'in_progress' AND lock_key NOT IN (SELECT k FROM held) "
    "THEN 'incomplete' ELSE status END"
)
#: Records rebuilt per round trip by :func:`reindex`.
REINDEX_BATCH: Final = 500
_IN_PROGRESS: Final = RecordStatus.IN_PROGRESS.value
#: Sorts after every character an execution id may hold (``A-Z a-z 0-9 _ . -``),
#: so ids starting with ``p`` are exactly those ``>= p`` and ``< p + ID_PAST`` in
#: byte order (``COLLATE "C"``): a range of an index, whose size the planner
#: estimates from the column's statistics.
ID_PAST: Final = "~"
_UNFINISHED: Final = (RecordStatus.IN_PROGRESS, RecordStatus.INCOMPLETE)
_UNFINISHED_VALUES: Final = tuple(status.value for status in _UNFINISHED)
#: Not resumed by a record that exists (a resumer may die before its opens).
_UNRESUMED: Final = """NOT EXISTS (SELECT 1 FROM intentusnet_resumes l
    JOIN intentusnet_records n ON n.execution_id = l.resumed_by
    WHERE l.execution_id = intentusnet_records.execution_id)"""
_LIST: Final = f"""WITH held(k) AS ({HELD})
    SELECT * FROM (
        SELECT execution_id, created_utc, intent, intent_version,
            envelope_hash, {STATUS} AS status, replayable, reason, agent,
            duration_ms, created_us
        FROM intentusnet_records WHERE {{where}}) AS r
    WHERE {{status}}
    ORDER BY created_us DESC, execution_id DESC LIMIT %s"""
_REWRITE: Final = f"""UPDATE intentusnet_records SET ({COLUMNS}, lock_key) =
    ROW({", ".join(["%s"] * 17)}) WHERE execution_id = %s"""


def row_values(row: CatalogRow) -> list[object]:
    """A catalog row as the records table's columns (unfinished = in_progress)."""
    # The records table has no usage column: savings over PostgreSQL read the
    # records themselves (docs/cache.md, "What caching saved").
    values: list[object] = list(row[:16])
    if row.status == RecordStatus.INCOMPLETE.value:
        values[6] = _IN_PROGRESS  # the lock, not the row, tells which it is
    values[7] = bool(row.replayable)
    return values


def outcome_of(record: ExecutionRecord) -> list[object]:
    """A record's status, replayable, reason, agent and duration for its row."""
    h: ExecutionHeader = record.header
    status = _IN_PROGRESS if h.status in _UNFINISHED else h.status.value
    reason = h.replayable_reason
    return [
        status,
        h.replayable,
        None if reason is None else reason.value,
        h.agent,
        h.duration_ms,
    ]


def not_running(_owner: object) -> bool:
    """For reading a record no one is writing (we hold its lock, or rebuild it)."""
    return False


def summaries(
    db: Connection, filters: ListFilters, *, unresumed: bool = False
) -> list[RecordSummary]:
    """Summaries of the rows matching every filter given, newest first.

    Only the filters given are in the query, each on an indexed column (an id
    prefix as a range of the id's index in byte order, ``COLLATE "C"``), so
    the planner can pick the index that fits; unfinished rows (asked for as
    ``in_progress`` or ``incomplete``) have a partial index. With
    ``unresumed``, rows a resume link names whose resumer's record exists are
    left out (recovery's scan).
    """
    f = filters
    where: list[str] = []
    params: list[object] = []
    if f.status is not None and str(f.status) in _UNFINISHED_VALUES:
        where.append(f"status = '{_IN_PROGRESS}'")  # the lock tells which
    if unresumed:
        where.append(_UNRESUMED)
    for present, condition, values in (
        (f.intent is not None, "intent = %s", [f.intent]),
        (f.since_us is not None, "created_us >= %s", [f.since_us]),
        (f.until_us is not None, "created_us < %s", [f.until_us]),
        (f.replayable is not None, "replayable = %s", [f.replayable]),
        (f.envelope_hash is not None, "envelope_hash = %s", [f.envelope_hash]),
        (
            f.id_prefix is not None,
            'execution_id COLLATE "C" >= %s AND execution_id COLLATE "C" < %s',
            [f.id_prefix, f"{f.id_prefix}{ID_PAST}"],
        ),
    ):
        if present:
            where.append(condition)
            params.extend(values)
    status = "true"
    if f.status is not None:
        status = "status = %s"
        params.append(str(f.status))
    sql = _LIST.format(where=" AND ".join(where) or "true", status=status)
    rows = db.read(sql, [*params, f.limit])
    return [
        RecordSummary(
            str(r[0]),
            str(r[1]),
            str(r[2]),
            str(r[3]),
            str(r[4]),
            RecordStatus(r[5]),
            bool(r[6]),
            None if r[7] is None else ReplayableReason(r[7]),
            None if r[8] is None else str(r[8]),
            None if r[9] is None else float(r[9]),
        )
        for r in rows
    ]


def stats(db: Connection) -> StoreStats:
    """Counts per status and intent, and the bytes the store's tables take."""
    rows = db.read(
        f"""WITH held(k) AS ({HELD})
        SELECT {STATUS}, intent, count(*) FROM intentusnet_records GROUP BY 1, 2"""
    )
    by_status: dict[str, int] = {}
    by_intent: dict[str, int] = {}
    for status, intent, count in rows:
        n = int(count)
        by_status[str(status)] = by_status.get(str(status), 0) + n
        by_intent[str(intent)] = by_intent.get(str(intent), 0) + n
    ((size,),) = db.read(
        "SELECT sum(pg_total_relation_size(t)) FROM unnest(ARRAY["
        "'intentusnet_records', 'intentusnet_lines', 'intentusnet_cache_hits', "
        "'intentusnet_keys', 'intentusnet_resumes'"
        "]::regclass[]) AS t"
    )
    return StoreStats(sum(by_status.values()), by_status, by_intent, int(size or 0))


def reindex(
    db: Connection,
    batch: int = REINDEX_BATCH,
    on_changed: Callable[[str, str], None] | None = None,
    on_progress: Callable[[int], None] | None = None,
) -> int:
    """Rebuild every catalog row from its record's lines; return how many.

    ``on_progress(n)`` is called after each batch with the records read so far.

    Records are taken ``batch`` at a time in id order (keyset, not offset):
    one query for the ids, one for their lines, one pipelined update. A
    record whose lines no longer hold the last line its row saw keeps that
    row's line count and chain head, is marked ``integrity_failure``, logged
    and passed to ``on_changed`` (its id, how it differs).
    """
    count, read, after = 0, 0, ""  # every allowed id sorts after ""
    while True:
        ids = db.run(
            "SELECT execution_id, lines, chain_head FROM intentusnet_records "
            "WHERE execution_id > %s ORDER BY execution_id LIMIT %s",
            [after, batch],
        )
        if not ids:
            return count
        after = str(ids[-1][0])
        seen = {str(row[0]): (int(row[1]), str(row[2])) for row in ids}
        rows = db.run(
            "SELECT execution_id, line FROM intentusnet_lines "
            "WHERE execution_id = ANY(%s) ORDER BY execution_id, seq",
            [list(seen)],
        )
        updates = []
        indexed: list[tuple[str, list[StepKey]]] = []
        for key, lines in groupby(rows, key=itemgetter(0)):
            execution_id = str(key)
            data = b"".join(bytes(r[1]) for r in lines)
            found = derived_row(data, execution_id, not_running)
            values = None if found is None else row_values(found[0])
            ended = [] if found is None else found[1]
            problem = catalog_mismatch(data, *seen[execution_id])
            if problem is not None:
                report_changed(execution_id, problem, on_changed)
                ended = []  # a changed record points the step index nowhere
                if values is not None:
                    values[7:9] = [False, ReplayableReason.INTEGRITY_FAILURE.value]
                    values[13], values[15] = seen[execution_id]
            if values is not None:
                updates.append([*values, lock_key(execution_id), execution_id])
            indexed.append((execution_id, ended))
        db.run_many(_REWRITE, updates, doing="reindex: could not update")
        db.run_many(
            f"WITH {steps.ADD} SELECT 1",
            [steps.add_params(i, ended) for i, ended in indexed if ended],
            doing="reindex: could not index the steps",
        )
        count += len(updates)
        read += len(ids)
        if on_progress is not None:
            on_progress(read)
