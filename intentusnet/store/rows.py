"""A catalog row: one record as a store's catalog knows it, and checks against it.

Its own module, so that the record writer (and with it every store that writes)
builds rows without loading the catalog's queries and upkeep. The file store's
SQLite catalog and PostgreSQL's columns hold the same row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple

import orjson

from .._util.jsonvalue import JSONObject
from .._util.time import parse_utc
from ..errors import RecordIntegrityError, UnsupportedSchemaVersion
from ..record.model import ExecutionHeader, VerifyReport
from ..record.reader import OwnerAlive, parse_record
from ..record.verify import salvage_header
from . import logger
from .step_index import StepKey, ended_steps
from .usage import usage_text

__all__ = [
    "CatalogRow",
    "catalog_mismatch",
    "cross_check",
    "derived_row",
    "report_changed",
    "row_for",
]


class CatalogRow(NamedTuple):
    """One record as the catalog knows it (columns in table order).

    ``status`` is ``in_progress`` for a record that was open when last seen;
    readers decide whether its owner is still there. ``lines`` counts the
    record's complete lines, header included, and ``chain_head`` is the hash of
    the last of them. ``usage`` is the LLM token usage its answer carries (the
    JSON text of ``store.usage.RecordedUsage``), or None. ``inode`` is the file
    store's record file's inode when the row was made from it (None before the
    file exists, and in PostgreSQL): a listed row whose file has another one was
    replaced, and is checked against its file.
    """

    id: str
    created_us: int
    created_utc: str
    intent: str
    intent_version: str
    envelope_hash: str
    status: str
    replayable: int
    reason: str | None
    agent: str | None
    duration_ms: float | None
    parent_id: str | None
    owner: str | None
    lines: int
    size: int
    chain_head: str
    usage: str | None = None
    inode: int | None = None

    def owner_object(self) -> JSONObject | None:
        """The process the row names as the record's writer, or None."""
        found = orjson.loads(self.owner) if self.owner else None
        return found if isinstance(found, dict) else None


def cross_check(
    report: VerifyReport, data: bytes, row: CatalogRow | None
) -> VerifyReport:
    """Add to ``report`` what the catalog knows and the file alone cannot show.

    The catalog remembers how many lines it last saw and the hash of the last
    one, so whole lines cut from the end of a record are found.
    """
    if row is None:
        return report
    failure = catalog_mismatch(data, row.lines, row.chain_head)
    if failure is None:
        return report
    # Lines the catalog saw are gone: no longer a recording failure, if the
    # file now looks like one.
    return VerifyReport(
        execution_id=report.execution_id,
        events_total=report.events_total,
        events_verified=report.events_verified,
        failures=(*report.failures, failure),
        valid=False,
        notes=tuple(n for n in report.notes if not n.startswith("recording failure")),
        key_id=report.key_id,
        signatures=report.signatures,
    )


def report_changed(
    execution_id: str,
    problem: str,
    on_changed: Callable[[str, str], None] | None,
) -> None:
    """Say that ``reindex`` found a record changed since the catalog saw it."""
    logger.warning(
        "record %s changed since the catalog saw it: %s; kept as integrity_failure",
        execution_id,
        problem,
    )
    if on_changed is not None:
        on_changed(execution_id, problem)


def catalog_mismatch(data: bytes, lines: int, chain_head: str) -> str | None:
    """How a record's bytes differ from the catalog's memory of them, or None.

    ``lines`` and ``chain_head`` are what the catalog last saw: how many
    complete lines, and the hash of the last of them. Records are append-only,
    so that line must still be there with that hash.
    """
    if not chain_head or lines < 1:
        return None
    complete = data.split(b"\n")[:-1]
    if lines > len(complete):
        return (
            f"line {len(complete) + 1}: missing; the catalog saw {lines} lines "
            f"but the file has {len(complete)} (lines were cut from its end)"
        )
    if b"sha256:" + complete[lines - 1][-66:-2] != chain_head.encode():
        return f"line {lines}: its hash is not the one the catalog recorded"
    return None


def row_for(
    header: ExecutionHeader, lines: int, size: int, usage: str | None = None
) -> CatalogRow:
    """Return the catalog row describing a record as read from its file.

    ``usage`` is the catalog's text of the LLM usage its answer carries.
    """
    reason = header.replayable_reason
    return CatalogRow(
        header.execution_id,
        parse_utc(header.created_utc) or 0,
        header.created_utc,
        header.intent_name,
        header.intent_version,
        header.envelope_hash,
        header.status.value,
        int(header.replayable),
        None if reason is None else reason.value,
        header.agent,
        header.duration_ms,
        header.parent_execution_id,
        None if header.owner is None else orjson.dumps(header.owner).decode(),
        lines,
        size,
        header.chain_head,
        usage,
    )


def derived_row(
    data: bytes, execution_id: str, owner_alive: OwnerAlive
) -> tuple[CatalogRow, list[StepKey]] | None:
    """The catalog row of a record's bytes, and its ended steps; None if left out.

    A damaged record is indexed as ``integrity_failure`` where line 1 can be
    read, with no steps; a newer format or an unreadable header is logged and
    left out.
    """
    lines = data.count(b"\n")
    try:
        record = parse_record(data, execution_id, owner_alive)
        # Every event is parsed: a row is only written as sound for a record
        # whose every line is (else integrity_failure).
        steps = ended_steps(record)
        usage = usage_text(record.final_response)
        return row_for(record.header, lines, len(data), usage), steps
    except UnsupportedSchemaVersion as exc:
        logger.warning("not indexed: %s", exc)
        return None
    except RecordIntegrityError as exc:
        header = salvage_header(data, execution_id)
        if header is None:
            logger.warning("not indexed, unreadable: %s", exc)
            return None
        return row_for(header, lines, len(data)), []
