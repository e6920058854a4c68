"""``records list``, ``records show`` and ``inspect``: reading records."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._util.yamltext import yaml_text
from .context import ExecutionId, check_last_intent, last_intent_option, open_store
from .output import emit_json, ms, status_text, table
from .params import Choice, Since
from .record_text import FORMATS, markdown_text
from .selection import STATUSES, selection_options
from .timeline import print_inspection, timeline_json

if TYPE_CHECKING:
    from ..record.model import RecordSummary
    from ..store.hits import CacheHit

_JSON_HELP = "Print JSON instead of a table."


def _filter_param(
    ctx: click.Context, param: click.Parameter, value: str | None
) -> str | None:
    """``--id-prefix`` or ``--hash``, checked as ``ListFilters`` checks it."""
    if value is None:
        return None
    from ..store import filters  # only when the option is given

    check = (
        filters.check_id_prefix
        if param.name == "id_prefix"
        else filters.check_envelope_hash
    )
    try:
        return check(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


@click.group()
def records() -> None:
    """List and show execution records."""


@records.command("list")
@click.option("--intent", metavar="NAME", help="Only records of this intent.")
@click.option(
    "--status",
    type=Choice(STATUSES),
    help="Only records in this state.",
)
@click.option(
    "--since",
    type=Since(),
    help="Only records created at or after this time (ISO 8601, or e.g. 7d ago).",
)
@click.option(
    "--until",
    type=Since(),
    help="Only records created before this time (exclusive; formats as --since).",
)
@click.option(
    "--replayable/--not-replayable",
    default=None,
    help="Only records the replay engine can answer from, or only those it cannot.",
)
@click.option(
    "--id-prefix",
    callback=_filter_param,
    metavar="PREFIX",
    help="Only records whose execution id starts with PREFIX.",
)
@click.option(
    "--hash",
    "envelope_hash",
    callback=_filter_param,
    metavar="sha256:HEX",
    help="Only records made from an envelope with this whole hash.",
)
@click.option(
    "--limit", type=click.IntRange(min=1), metavar="N", help="At most N records."
)
@click.option(
    "--hits/--no-hits",
    default=True,
    show_default=True,
    help="List answers served from the replay cache too (with no filter but "
    "--intent, --since and --limit).",
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def list_records(hits: bool, as_json: bool, **given: Any) -> None:
    """List records (and cache hits), newest first."""
    from ..record.model import RecordSummary
    from ..store.filters import ListFilters
    from .resumes import resumed_rows

    store = open_store()
    filters = ListFilters(**given)  # the filter options are its fields
    found: list[RecordSummary | CacheHit] = list(store.list(filters))
    # The hit journal is asked by --intent, --since and --limit only; with any
    # other filter the list holds records alone.
    if hits and not filters.record_only:
        limit = filters.limit
        served = store.cache_hits(
            intent=filters.intent, since=filters.since, limit=limit
        )
        if served:
            found = sorted(
                [*found, *served], key=lambda row: row.created_utc, reverse=True
            )[:limit]
    resumed = resumed_rows(store, found)
    if as_json:
        emit_json(
            [
                {**row.to_json(), "resumedBy": resumed[row.execution_id]}
                if isinstance(row, RecordSummary) and row.execution_id in resumed
                else row.to_json()
                for row in found
            ]
        )
        return
    if not found:
        click.echo("No records.", err=True)
        return
    from ..store.hits import CacheHit

    headers = ["ID", "CREATED", "INTENT", "AGENT", "STATUS", "REPLAYABLE", "DURATION"]
    with_source = any(isinstance(row, CacheHit) for row in found)
    if with_source:
        headers.append("SOURCE")
    if resumed:
        headers.append("RESUMED BY")
    table(
        headers,
        [
            _hit_row(row) + (["-"] if resumed else [])
            if isinstance(row, CacheHit)
            else _row(row)
            + (["-"] if with_source else [])
            + ([resumed.get(row.execution_id, "-")] if resumed else [])
            for row in found
        ],
    )


def _hit_row(hit: CacheHit) -> list[str]:
    # SOURCE: the record whose answer was served (``inspect`` shows it).
    return [
        hit.hit_id,
        hit.created_utc,
        f"{hit.intent_name}@{hit.intent_version}",
        "-",
        click.style("cache_hit", fg="cyan"),
        "-",
        "-",
        hit.source_execution_id,
    ]


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


@records.command("export")
@click.option(
    "--to",
    "directory",
    required=True,
    type=click.Path(file_okay=False, path_type=Path),
    metavar="DIR",
    help="The golden set's directory (a file store; created if need be).",
)
@click.option("--intent", metavar="NAME", help="Only records of this intent.")
@selection_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def export(ctx: click.Context, /, directory: Path, **selection: Any) -> None:
    """Write the selected records, and the records their steps link to, to DIR.

    DIR becomes a small file store a repository can keep beside its tests:
    every record is verified and copied byte for byte (see `copy`), so it
    verifies and re-runs as the original (`rerun --all`, intentusnet.testing).
    """
    from .export import export_records

    export_records(ctx, directory, **selection)


@records.command("show")
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
@click.option(
    "--format",
    "form",
    type=Choice(FORMATS),
    help="json: compact one-line JSON (as --json); yaml or markdown: for reading.",
)
def show(execution_id: str, as_json: bool, form: str | None) -> None:
    """Print the assembled record ID as JSON (indented), or as --format says."""
    if as_json and form not in (None, "json"):
        raise click.UsageError(f"--json and --format {form} ask for two formats")
    document = open_store().load(execution_id).to_json()
    if form == "yaml":
        click.echo(yaml_text(document), nl=False)
    elif form == "markdown":
        click.echo(markdown_text(document), nl=False)
    else:
        emit_json(document, compact=as_json or form == "json")


@click.command()
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@last_intent_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def inspect(execution_id: str, as_json: bool) -> None:
    """Show record ID: header, timeline, errors, final response, execution tree."""
    from ..store.durable import durable_links
    from .resumes import print_durable
    from .tree import execution_tree, print_tree

    check_last_intent()
    store = open_store()
    record = store.load(execution_id)
    tree = execution_tree(store, record)
    links = durable_links(store, record)
    if as_json:
        emit_json({**timeline_json(record), "tree": tree, "durable": links})
    else:
        print_inspection(record)
        print_durable(links)
        print_tree(tree)
