"""``records list``, ``records show`` and ``inspect``: reading records."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

import click

from .context import open_store
from .output import emit_json, ms, status_text, table
from .params import Since
from .timeline import print_inspection, timeline_json

if TYPE_CHECKING:
    from ..record import RecordSummary

_JSON_HELP = "Print JSON instead of a table."
#: ``RecordStatus`` values, spelled out so that ``--help`` need not import the
#: record model (a test keeps them equal).
STATUSES = ("completed", "failed", "in_progress", "incomplete")


@click.group()
def records() -> None:
    """List and show execution records."""


@records.command("list")
@click.option("--intent", metavar="NAME", help="Only records of this intent.")
@click.option(
    "--status",
    type=click.Choice(STATUSES),
    help="Only records in this state.",
)
@click.option(
    "--since",
    type=Since(),
    help="Only records created at or after this time (ISO 8601, or e.g. 7d ago).",
)
@click.option(
    "--limit", type=click.IntRange(min=1), metavar="N", help="At most N records."
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def list_records(
    intent: str | None,
    status: str | None,
    since: datetime | None,
    limit: int | None,
    as_json: bool,
) -> None:
    """List records, newest first."""
    found = open_store().list(intent=intent, status=status, since=since, limit=limit)
    if as_json:
        emit_json([summary.to_json() for summary in found])
        return
    if not found:
        click.echo("No records.", err=True)
        return
    table(
        ["ID", "CREATED", "INTENT", "AGENT", "STATUS", "REPLAYABLE", "DURATION"],
        [_row(summary) for summary in found],
    )


def _row(summary: RecordSummary) -> list[str]:
    reason = summary.replayable_reason
    return [
        summary.execution_id,
        summary.created_utc,
        f"{summary.intent_name}@{summary.intent_version}",
        summary.agent or "-",
        status_text(summary.status.value),
        "yes" if summary.replayable else f"no ({reason.value if reason else '?'})",
        ms(summary.duration_ms),
    ]


@records.command("show")
@click.argument("execution_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
def show(execution_id: str, as_json: bool) -> None:
    """Print the assembled record ID as JSON."""
    emit_json(open_store().load(execution_id).to_json(), compact=as_json)


@click.command()
@click.argument("execution_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def inspect(execution_id: str, as_json: bool) -> None:
    """Show record ID: header, timeline of events, errors, final response."""
    record = open_store().load(execution_id)
    if as_json:
        emit_json(timeline_json(record))
    else:
        print_inspection(record)
