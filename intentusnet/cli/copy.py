"""``copy SRC DST``: copy records between two stores, byte for byte, verified.

Each record's bytes are read from SRC (``raw``), their hash chain checked
(``verify_bytes``), and stored in DST as they are (``import_raw``), so a copy
verifies and replays as the original does. A record DST already holds with the
same bytes is skipped; with other bytes it is a conflict, never overwritten.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import click

from .._util.jsonvalue import JSONValue
from ..errors import RecordExists, RecordIntegrityError, RecordNotFound
from .context import LAST, newest_execution_id, open_named
from .output import emit_json, progress_counter

if TYPE_CHECKING:
    from ..store.naming import NamedStore

#: Exit code when a source record failed verification (DESIGN §8).
INTEGRITY_EXIT: Final = RecordIntegrityError.exit_code
#: Exit code when DST holds another record under a copied id (``RecordExists``).
CONFLICT_EXIT: Final = RecordExists.exit_code


class Tally:
    """What happened to each record: counts, and why records were not copied."""

    def __init__(self) -> None:
        self.counts = {"copied": 0, "skipped": 0, "conflict": 0, "failed": 0}
        #: (execution id, outcome, why) of every record with something to say
        self.notes: list[tuple[str, str, str]] = []

    def add(self, outcome: str, execution_id: str, why: str | None = None) -> None:
        """Count one record's outcome, noting why when there is something to say."""
        self.counts[outcome] += 1
        if why is not None:
            self.notes.append((execution_id, outcome, why))


@click.command()
@click.argument("src", metavar="SRC")
@click.argument("dst", metavar="DST")
@click.option(
    "--id",
    "only",
    multiple=True,
    metavar="ID",
    help="Copy this record only (repeatable; 'last': the newest in SRC).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def copy(
    ctx: click.Context, src: str, dst: str, only: tuple[str, ...], as_json: bool
) -> None:
    """Copy records from store SRC to store DST (paths or postgresql:// URLs).

    Every record is verified before it is written, and written byte for byte.
    Records DST holds already are skipped when identical, reported as
    conflicts otherwise. Exit 6 if a record failed verification, else 1 if
    there was a conflict.
    """
    from ..record.model import RecordStatus
    from ..store.filters import ListFilters

    source = open_named(src, create=False)
    ctx.call_on_close(source.close)
    target = open_named(dst, create=True)
    ctx.call_on_close(target.close)
    tally = Tally()
    if only:
        ids = [newest_execution_id(source) if i == LAST else i for i in only]
        for execution_id in ids:
            if not source.exists(execution_id):
                raise RecordNotFound(f"no record {execution_id} in SRC")
        writing: set[str] = set()
    else:
        ids = list(source.iter_ids())
        # Unfinished records a live process still writes would arrive cut short.
        unfinished = source.list(ListFilters(status=RecordStatus.IN_PROGRESS))
        writing = {s.execution_id for s in unfinished}
    with progress_counter("Copying records", len(ids)) as advance:
        for done, execution_id in enumerate(ids, 1):
            if execution_id in writing:
                tally.add("skipped", execution_id, "still being written")
            else:
                copy_one(source, target, execution_id, tally)
            if advance is not None:
                advance(done)
    report(ctx, tally, as_json)


def copy_one(
    source: NamedStore, target: NamedStore, execution_id: str, tally: Tally
) -> None:
    """Copy one record, verified, byte for byte; note the outcome in ``tally``."""
    from ..record.verify import verify_bytes

    try:
        data = source.raw(execution_id)
    except RecordNotFound:
        return  # deleted since it was listed
    data = data[: data.rfind(b"\n") + 1]  # a torn last line is not copied
    if not data:
        tally.add("skipped", execution_id, "recording failure: nothing recorded")
        return
    try:
        report = verify_bytes(data, execution_id)
    except RecordIntegrityError as exc:  # a format this release cannot read
        tally.add("failed", execution_id, str(exc))
        return
    if not report.valid:
        tally.add("failed", execution_id, "; ".join(report.failures))
        return
    for _attempt in range(2):
        if target.exists(execution_id):
            if target.raw(execution_id) == data:
                tally.add("skipped", execution_id)
            else:
                tally.add(
                    "conflict", execution_id, "DST holds other bytes under this id"
                )
            return
        try:
            target.import_raw(execution_id, data)
        except RecordExists:
            continue  # written meanwhile: compare with it
        except RecordIntegrityError as exc:
            tally.add("failed", execution_id, str(exc))
            return
        tally.add("copied", execution_id)
        return


def report(ctx: click.Context, tally: Tally, as_json: bool) -> None:
    """Print what happened to the records (notes, then the counts), and exit so."""
    counts = tally.counts
    if as_json:
        notes: list[JSONValue] = [
            {"executionId": execution_id, "outcome": outcome, "reason": why}
            for execution_id, outcome, why in tally.notes
        ]
        emit_json(
            {
                "copied": counts["copied"],
                "skipped": counts["skipped"],
                "conflicts": counts["conflict"],
                "failed": counts["failed"],
                "notes": notes,
            }
        )
    else:
        for execution_id, outcome, why in tally.notes:
            click.echo(f"{execution_id}: {outcome}: {why}")
        click.echo(
            f"Copied {counts['copied']}, skipped {counts['skipped']}, "
            f"{counts['conflict']} conflicts, {counts['failed']} failed."
        )
    if counts["failed"]:
        ctx.exit(INTEGRITY_EXIT)
    if counts["conflict"]:
        ctx.exit(CONFLICT_EXIT)
