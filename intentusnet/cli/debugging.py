"""``rerun``, ``diff`` and ``debug``: find why a run failed, prove the fix.

``debug ID`` explains a failure and shows the timeline up to it; ``rerun ID
--app MODULE:ATTR`` runs the recorded envelope through today's code with the
steps served from the record; ``diff A B`` shows where two runs part ways.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .._util.jsonvalue import JSONValue
from ..errors import CassetteMiss
from .application import load_router
from .context import ExecutionId, named_store, open_store
from .output import emit_json, status_text
from .params import CliFailure
from .timeline import print_row, timeline_row

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord
    from ..steps.diff import RecordDiff
    from ..steps.explain import Explanation
    from ..steps.rerun import RerunResult

_JSON_HELP = "Print JSON instead of text."


@click.command()
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@click.option(
    "--app",
    "app_ref",
    required=True,
    metavar="MODULE:ATTR",
    help="The IntentRouter with today's agents, e.g. myapp.routing:router.",
)
@click.option(
    "--from-failure",
    is_flag=True,
    help="Serve the steps that succeeded before the failure; run the rest live.",
)
@click.option(
    "--allow-live",
    is_flag=True,
    help="Run a step the record cannot answer instead of stopping (exit 7).",
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def rerun(
    execution_id: str, app_ref: str, from_failure: bool, allow_live: bool, as_json: bool
) -> None:
    """Re-run record ID with today's code, its steps served from the record."""
    from ..replay import ReplayEngine
    from ..steps.rerun import rerun as rerun_record

    store = open_store()
    engine = ReplayEngine.from_store(store, execution_id)
    # The named store in the environment: an application that opens
    # intentusnet.open_store() records the re-run beside the original.
    router = load_router(app_ref, named_store())
    try:
        result = rerun_record(
            engine,
            router,
            from_failure=from_failure,
            allow_live=allow_live,
            # A router without a store records the re-run beside the original.
            store=store if router.store is None else None,
        )
    except CassetteMiss as exc:
        hint = "" if allow_live else "; --allow-live runs such steps live"
        raise CliFailure(
            f"{exc} (the re-run's record: {exc.rerun_execution_id}){hint}",
            exc.exit_code,
            cause=exc,
        ) from exc
    finally:
        router.close()
    if as_json:
        emit_json(result.to_json())
    else:
        _print_rerun(result)


def _print_rerun(result: RerunResult) -> None:
    mode = "from the failure" if result.mode == "from_failure" else "strictly"
    click.echo(
        f"Re-ran {result.original_execution_id} {mode} as {result.execution_id}: "
        + status_text("completed" if result.ok else "failed")
    )
    for label, runs in (("served", result.served), ("ran", result.ran)):
        names = ", ".join(
            f"{run.name} (step {run.number})"
            + (" [not in the record]" if run.miss else "")
            for run in runs
        )
        click.echo(f"  {label + ':':<8}{names or '-'}")
    if result.diff is not None:
        click.secho("\nDiff against the original", bold=True)
        _print_diff(result.diff)
    click.secho("\nResponse", bold=True)
    emit_json(result.response.to_wire())


@click.command()
@click.argument("first", metavar="A", type=ExecutionId())
@click.argument("second", metavar="B", type=ExecutionId())
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def diff(first: str, second: str, as_json: bool) -> None:
    """Show where record B differs from record A, first deviation marked."""
    from ..steps.diff import diff_records

    store = open_store()
    a, b = store.load(first), store.load(second)
    found = diff_records(a, b)
    if as_json:
        emit_json(found.to_json())
        return
    for tag, record in (("A", a), ("B", b)):
        header = record.header
        click.echo(
            f"{tag}  {record.execution_id}  {status_text(header.status.value):<9}  "
            f"fingerprint {record.fingerprint[:23]}..."
        )
    click.echo()
    _print_diff(found)


def _print_diff(found: RecordDiff) -> None:
    if found.same:
        click.echo(
            "Same behaviour: same fingerprint."
            if found.a_fingerprint == found.b_fingerprint
            else "Same steps and outcome, but the fingerprints differ (steps ran in "
            "another order)."
        )
    else:
        point = found.deviation_point
        where = f"; first deviation: {point.name} ({point.kind})" if point else ""
        click.echo(f"{len(found.entries)} differences{where}")
    for entry in found.entries:
        mark = ">" if entry.deviation_point else " "
        line = f"  {mark} {entry.kind:<17}{entry.detail}"
        click.secho(line, fg="yellow" if entry.deviation_point else None)


@click.command()
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def debug(execution_id: str, as_json: bool) -> None:
    """Explain why record ID failed: root cause, timeline, how to resume."""
    from ..steps.explain import explain

    store = open_store()
    record = store.load(execution_id)
    found = explain(record, store)
    rows = _rows_until(record, found.failure_seq)
    resume = _resume_command(execution_id) if found.failed else None
    if as_json:
        emit_json({"explanation": found.to_json(), "timeline": rows, "resume": resume})
        return
    _print_explanation(record, found)
    click.secho("\nTimeline up to the failure", bold=True)
    for row in rows:
        if isinstance(row, dict):
            print_row(row)
    if resume is not None:
        click.secho("\nOnce fixed, resume with", bold=True)
        click.echo(f"  {resume}")


def _rows_until(record: ExecutionRecord, seq: int | None) -> list[JSONValue]:
    return [
        timeline_row(event)
        for event in record.events
        if seq is None or event.seq <= seq
    ]


def _resume_command(execution_id: str) -> str:
    import shlex  # here: `--help` imports this module to list its commands

    from ..store.naming import is_url, public_url

    name = named_store()
    # A URL's password is never printed: libpq finds it in PGPASSWORD or ~/.pgpass.
    if name is not None and is_url(name):
        name = public_url(name)
    store = "" if name is None else f" --store {shlex.quote(name)}"
    return (
        f"intentusnet{store} rerun {shlex.quote(execution_id)} "
        "--app MODULE:ATTR --from-failure"
    )


def _print_explanation(record: ExecutionRecord, found: Explanation) -> None:
    header = record.header
    click.secho(f"Execution {record.execution_id}", bold=True)
    click.echo(f"  {'intent:':<12}{header.intent_name}@{header.intent_version}")
    click.echo(f"  {'status:':<12}{status_text(header.status.value)}")
    if not found.failed:
        click.echo(f"\n{found.summary}")
        return
    step, cause, error = found.step, found.root_cause, found.error or {}
    agent = f"{found.agent} (attempt {found.attempt})" if found.agent else "-"
    fields: list[tuple[str, str]] = [
        ("agent", agent),
        ("step", f"{step.name} (step {step.number})" if step else "-"),
        ("error", f"{error.get('type')}: {error.get('message')}"),
    ]
    if cause is not None:
        fields.append(("root cause", f"{cause.name} (step {cause.number})"))
    for name, value in fields:
        click.echo(f"  {name + ':':<12}{value}")
    click.secho("\nProbable cause", bold=True)
    click.secho(f"  {found.summary}", fg="red")
    for line in found.evidence:
        click.echo(f"  - {line}")
