"""``intentusnet resume`` and ``intentusnet recover``: finish interrupted executions."""

from __future__ import annotations

import click

from .application import app_option, open_app
from .context import named_store
from .output import emit_json

_APP = app_option("The IntentRouter whose agents finish the execution.")


@click.command()
@click.argument("execution_id", metavar="ID")
@_APP
@click.option(
    "--force",
    is_flag=True,
    help="Resume although the router's agents for the intent changed.",
)
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
def resume(execution_id: str, app_ref: str, force: bool, as_json: bool) -> None:
    """Finish the interrupted execution ID with the application's agents.

    Steps that ended are served from the record (never run again); the rest
    runs live; the answer is recorded as a new record linked to ID. Prints the
    response. Refused (exit 4) for a record that finished, one a live process
    writes or resumes, one no agent handles, or one whose router configuration
    changed (unless --force). A side-effect step in doubt parks the execution
    needs_attention: the response is a NEEDS_ATTENTION error (exit 0).
    """
    router, given = open_app(app_ref, named_store())
    try:
        response = router.resume(execution_id, force=force)
    finally:
        router.close()
        if given is not None:
            given.close()
    emit_json(response.to_wire(), compact=as_json)


@click.command()
@_APP
@click.option(
    "--once",
    is_flag=True,
    required=True,
    help="Scan once and exit (the only mode; serve runs recovery continuously).",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    help="Seconds an interrupted record is left alone first.",
)
@click.option(
    "--max-attempts",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Resumes of one execution before it is parked needs_attention.",
)
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
def recover(
    app_ref: str, once: bool, grace: float, max_attempts: int, as_json: bool
) -> None:
    """Resume every interrupted execution of the application's intents, once.

    Looks for records that are incomplete (their process is gone) and older
    than --grace; each is resumed by exactly one of the processes recovering
    the store. Prints what was resumed, parked and skipped, with why.
    """
    from ..routing.recovery import Recovery

    router, given = open_app(app_ref, named_store())
    try:
        report = Recovery(router, grace=grace, max_attempts=max_attempts).run_once()
    finally:
        router.close()
        if given is not None:
            given.close()
    if as_json:
        emit_json(report.to_json(), compact=True)
        return
    for outcome in report.outcomes:
        after = f" -> {outcome.resumed_as}" if outcome.resumed_as else ""
        click.echo(
            f"{outcome.action:8} {outcome.execution_id} ({outcome.reason}){after}"
        )
    click.echo(
        f"{len(report.resumed)} resumed, {len(report.parked)} parked, "
        f"{len(report.skipped)} skipped",
        err=True,
    )
