"""``resume``, ``recover``, ``resolve`` and ``cancel``: an operator's levers."""

from __future__ import annotations

import click

from .application import app_option, running_app
from .context import open_store
from .output import emit_json
from .params import USAGE, CliFailure

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
    with running_app(app_ref) as router:
        response = router.resume(execution_id, force=force)
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

    with running_app(app_ref) as router:
        report = Recovery(router, grace=grace, max_attempts=max_attempts).run_once()
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


@click.command()
@click.argument("execution_id", metavar="ID")
@click.option(
    "--step",
    type=click.IntRange(min=1),
    default=None,
    help="The step in doubt (inspect names it); none for an execution parked "
    "attempts_exhausted, which --not-happened tries again.",
)
@click.option(
    "--happened/--not-happened",
    default=None,
    help="Whether the side effect took place.",
)
@click.option(
    "--output",
    "output_text",
    metavar="JSON",
    help="With --happened: what the step returned (JSON; null by default).",
)
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
def resolve(
    execution_id: str,
    step: int | None,
    happened: bool | None,
    output_text: str | None,
    as_json: bool,
) -> None:
    """Say whether the parked execution ID's side effect in doubt happened.

    The decision (who: the OS user; when; what) is recorded as a record of
    ID's resume chain; recovery (or resume) then finishes the execution,
    serving --output as the step's answer (--happened) or running the step
    (--not-happened). An execution parked attempts_exhausted is tried again
    with --not-happened and no --step. Nothing runs here. Refused (exit 4,
    nothing written) for an execution that is not parked so (nondeterminism:
    fork or cancel it), another step than the one in doubt, or one another
    operator decided first; --output that is not JSON is exit 2.
    """
    import getpass

    import orjson

    from ..routing.durable import StoreOnly
    from ..routing.durable import resolve as record_resolution

    if happened is None:
        raise CliFailure("give --happened or --not-happened", USAGE)
    output = None
    if output_text is not None:
        if not happened:
            raise CliFailure("--output goes with --happened only", USAGE)
        try:
            output = orjson.loads(output_text)
        except orjson.JSONDecodeError as exc:
            raise CliFailure(f"--output is not JSON: {exc}", USAGE) from None
    store = open_store()
    decided = record_resolution(
        StoreOnly(store),
        execution_id,
        step=step,
        happened=happened,
        output=output,
        by=getpass.getuser(),
        via="cli",
    )
    if as_json:
        emit_json({"executionId": execution_id, "decision": decided}, compact=True)
        return
    click.echo(decided)
    what = (
        "to be tried again"
        if step is None
        else f"step {step} {'happened' if happened else 'did not happen'}"
    )
    click.echo(
        f"resolved: {what}; recovery (or intentusnet resume) finishes it", err=True
    )


@click.command()
@click.argument("execution_id", metavar="ID")
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
def cancel(execution_id: str, as_json: bool) -> None:
    """Cancel the execution ID, on whatever host runs it.

    A running execution stops at its next step boundary (its router finds the
    request in the store within a fraction of a second) and is recorded
    cancelled; an interrupted, parked or resolved one is closed cancelled now.
    Recovery never resumes it; its idempotency key answers with the
    cancellation. Refused (exit 4, nothing written) for an execution that
    finished, or one another cancel request came first for.
    """
    import getpass

    from ..routing.durable import StoreOnly
    from ..routing.durable import cancel as cancel_execution

    store = open_store()
    record, closed = cancel_execution(
        StoreOnly(store), execution_id, by=getpass.getuser(), via="cli"
    )
    if as_json:
        emit_json(
            {"executionId": execution_id, "record": record, "closed": closed},
            compact=True,
        )
        return
    click.echo(record)
    click.echo(
        "cancelled: closed"
        if closed
        else "cancel requested: its router stops it at its next step",
        err=True,
    )
