"""``rerun``, ``fork``, ``diff`` and ``debug``: find why a run failed, prove the fix.

``debug ID`` explains a failure and shows the timeline up to it; ``rerun ID
--app MODULE:ATTR`` runs the recorded envelope through today's code with the
steps served from the record, from wherever the options say (``--dry-run``
only says what it would do); ``fork ID --from STEP`` is ``rerun --from`` over
an execution's whole resume chain; ``diff A B`` shows where two runs part ways.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import click

from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import CassetteMiss, NetworkBlocked
from .application import APP_ENV, app_option, load_router, running_app
from .context import (
    ExecutionId,
    check_last_intent,
    last_intent_option,
    named_store,
    open_store,
)
from .output import emit_json, status_text
from .params import USAGE, CliFailure
from .reask import edit_options, print_reask, reasked_override
from .rerun_all import AllOptions, rerun_all_options, run_all
from .timeline import print_row, timeline_row

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord
    from ..steps.diff import RecordDiff
    from ..steps.explain import Explanation
    from ..steps.plan import RerunPlan
    from ..steps.rerun import RerunResult
    from ..store.protocol import ExecutionStore

_JSON_HELP = "Print JSON instead of text."
#: Exit code of a re-run that ran and whose execution failed (docs/cli.md).
RERUN_FAILED: Final = 8


def _overrides(
    ctx: click.Context, param: click.Parameter, values: tuple[str, ...]
) -> tuple[tuple[str, JSONValue], ...]:
    """``STEP=JSON``s: a step (number or name) and the output to serve for it."""
    import orjson

    pairs: list[tuple[str, JSONValue]] = []
    for value in values:
        step, sep, text = value.partition("=")
        if not sep or not step.strip():
            raise click.BadParameter(
                f"{value!r} is not STEP=JSON (e.g. 1='{{\"id\": 7}}')", ctx, param
            )
        try:
            pairs.append((step.strip(), orjson.loads(text)))
        except orjson.JSONDecodeError as exc:
            raise click.BadParameter(
                f"the output for step {step!r} is not JSON: {exc}", ctx, param
            ) from None
    return tuple(pairs)


@click.command()
@click.argument("execution_id", metavar="[ID]", type=ExecutionId(), required=False)
@app_option(
    "The IntentRouter with today's agents, e.g. myapp.routing:router "
    "(required unless --dry-run).",
    required=False,
)
@click.option(
    "--from-failure",
    is_flag=True,
    help="Serve the steps that succeeded before the failure; run the rest live.",
)
@click.option(
    "--from",
    "from_step",
    metavar="STEP",
    help="Serve the steps before STEP (a number or a name); run it and the rest live.",
)
@click.option(
    "--from-root-cause",
    is_flag=True,
    help="As --from, at the step `debug` names as the root cause.",
)
@click.option(
    "--from-snapshot",
    metavar="NAME",
    help="Restore the state of snapshot NAME; serve the steps before it, run the "
    "rest live.",
)
@click.option(
    "--live",
    "live",
    metavar="STEP",
    multiple=True,
    help="Run STEP live and serve the rest (repeatable).",
)
@click.option(
    "--override",
    "overrides",
    metavar="STEP=JSON",
    multiple=True,
    callback=_overrides,
    help="Serve STEP with this output instead (repeatable); what follows runs as "
    "it must.",
)
@click.option(
    "--reask",
    "reask_step",
    metavar="STEP",
    type=click.IntRange(min=1),
    help="Send recorded model call STEP (a number) live, with --set/--model "
    "edits, and serve the rest: how the agent reacts to another answer.",
)
@edit_options
@click.option(
    "--allow-live",
    is_flag=True,
    help="Run a step the record cannot answer instead of stopping (exit 7).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print what each step would do (served, live, side effect); run nothing.",
)
@click.option(
    "--block-network",
    is_flag=True,
    help="Refuse every network connection during the re-run (exit 7 if one is "
    "tried), also those not made through the recording transports.",
)
@click.option(
    "--allow-host",
    "allowed_hosts",
    metavar="HOST",
    multiple=True,
    help="With --block-network: a host that stays reachable, e.g. a PostgreSQL "
    "store's (repeatable).",
)
@last_intent_option
@rerun_all_options
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def rerun(
    execution_id: str | None,
    app_ref: str | None,
    from_failure: bool,
    from_step: str | None,
    from_root_cause: bool,
    from_snapshot: str | None,
    live: tuple[str, ...],
    overrides: tuple[tuple[str, JSONValue], ...],
    reask_step: int | None,
    edits: tuple[tuple[str, JSONValue], ...],
    model: str | None,
    key_env: str | None,
    allow_live: bool,
    dry_run: bool,
    block_network: bool,
    allowed_hosts: tuple[str, ...],
    as_json: bool,
    **selection: Any,  # rerun --all's options: typed by run_all
) -> None:
    """Re-run record ID (or --all selected) with today's code, steps from the record."""
    from ..replay import ReplayEngine

    every = AllOptions(**selection)
    if every.run_all or execution_id is None:
        run_all(execution_id, app_ref, allowed_hosts, as_json, every)
        return
    check_last_intent()
    if allowed_hosts and not block_network:
        raise CliFailure("--allow-host needs --block-network", USAGE)
    if reask_step is None and (edits or model or key_env):
        raise CliFailure("--set, --model and --key-env go with --reask STEP", USAGE)
    if reask_step is not None and block_network:
        raise CliFailure("--reask sends a call: it cannot block the network", USAGE)
    from ..steps.options import RerunOptions

    if reask_step is not None:  # its answer comes later; checked as an override
        if str(reask_step) in dict(overrides):
            raise CliFailure(
                f"step {reask_step}: --reask or --override, not both", USAGE
            )
        overrides = (*overrides, (str(reask_step), None))
    options = RerunOptions(
        from_failure=from_failure,
        from_step=from_step,
        from_root_cause=from_root_cause,
        from_snapshot=from_snapshot,
        live=live,
        override=dict[int | str, JSONValue](overrides),
        allow_live=allow_live,
    )
    store = open_store()
    engine = ReplayEngine.from_store(store, execution_id)
    if reask_step is not None:  # refused before anything runs or is sent
        from ..steps.reask import edited, recorded_call

        edited(recorded_call(engine.record, reask_step), dict(edits), model)
    if dry_run:
        from ..steps.plan import plan_rerun

        plan = plan_rerun(engine, options)
        if as_json:
            emit_json(plan.to_json())
        else:
            _print_plan(plan)
        return
    if app_ref is None:
        raise CliFailure("rerun needs --app MODULE:ATTR (unless --dry-run)", USAGE)
    from ..steps.rerun import rerun as rerun_record
    from ..steps.selection import resolve

    # Checked before the application is imported: a mistake costs nothing.
    resolve(engine.record, options, store)
    # The named store in the environment: an application that opens
    # intentusnet.open_store() records the re-run beside the original.
    router = load_router(app_ref, named_store())
    reasked = None
    try:
        if reask_step is not None:
            reasked, served = reasked_override(
                store, engine.record, reask_step, edits, model, key_env
            )
            override = {**options.override, str(reask_step): served}
            options = dataclasses.replace(options, override=override)
        with _network(block_network, allowed_hosts) as refused:
            result = rerun_record(
                engine,
                router,
                options,
                # A router without a store records the re-run beside the original.
                store=store if router.store is None else None,
            )
        if refused:  # even if the agent caught the error: the re-run used the net
            raise CliFailure(
                f"{NetworkBlocked(refused[0])} (the re-run's record: "
                f"{result.execution_id})",
                NetworkBlocked.exit_code,
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
        emit_json(
            result.to_json()
            if reasked is None
            else {**result.to_json(), "reask": reasked.to_json()}
        )
    else:
        if reasked is not None:
            print_reask(reasked)
            click.echo()
        _print_rerun(result, _step_names(engine.record))
    if not result.ok:
        raise click.exceptions.Exit(RERUN_FAILED)


@click.command()
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@click.option(
    "--from",
    "from_step",
    required=True,
    metavar="STEP",
    help="Serve the steps before STEP (a number, kept through every resume, or "
    "a name) from the execution's records; run it and the rest live.",
)
@app_option("The IntentRouter with today's agents; its store holds the execution.")
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def fork(execution_id: str, from_step: str, app_ref: str, as_json: bool) -> None:
    """Run execution ID again from step STEP with today's code, as a new execution.

    The steps before STEP are served from every record of ID's resume chain
    (a side effect is never made again); STEP and the rest run live. Works on
    completed, failed, parked and interrupted executions. The new record names
    the one it forks (replay of). A step the execution does not hold: exit 2,
    nothing written. The fork ran and failed: exit 8.
    """
    from ..steps.fork import fork as fork_execution

    try:
        with running_app(app_ref) as router:
            result = fork_execution(router, execution_id, from_step)
    except CassetteMiss as exc:
        raise CliFailure(
            f"{exc} (the fork's record: {exc.rerun_execution_id})",
            exc.exit_code,
            cause=exc,
        ) from exc
    if as_json:
        emit_json(result.to_json())
    else:
        _print_rerun(result, {s.number: s.name for s in result.steps})
    if not result.ok:
        raise click.exceptions.Exit(RERUN_FAILED)


@contextmanager
def _network(block: bool, allowed_hosts: tuple[str, ...]) -> Iterator[list[str]]:
    """Block the network if asked; yield the addresses refused meanwhile."""
    if not block:
        yield []
        return
    from ..integrations.network import block_network

    with block_network(allowed_hosts) as blocked:
        yield blocked.refused


def _started(mode: str, from_step: int | None, names: dict[int, str]) -> str:
    """How a re-run starts, for people: ``from the root cause, crm.lookup (step 1)``."""
    if mode == "strict":
        return "strictly"
    if mode == "from_snapshot":
        return "from a snapshot"
    where = "" if from_step is None else f"{names.get(from_step)} (step {from_step})"
    label = {"from_failure": "the failure", "from_root_cause": "the root cause"}
    if mode in label:
        return f"from {label[mode]}" + (f", {where}" if where else "")
    return f"from {where}"


def _print_rerun(result: RerunResult, names: dict[int, str]) -> None:
    mode = _started(result.mode, result.from_step, names)
    click.echo(
        f"Re-ran {result.original_execution_id} {mode} as {result.execution_id}: "
        + status_text("completed" if result.ok else "failed")
    )
    for label, runs in (("served", result.served), ("ran", result.ran)):
        text = ", ".join(
            f"{run.name} (step {run.number})"
            + (" [not in the record]" if run.miss else "")
            + (" [output given]" if run.overridden else "")
            for run in runs
        )
        click.echo(f"  {label + ':':<8}{text or '-'}")
    if result.diff is not None:
        click.secho("\nDiff against the original", bold=True)
        _print_diff(result.diff)
    click.secho("\nResponse", bold=True)
    emit_json(result.response.to_wire())


_ACTIONS: Final = {
    "serve": "served",
    "side_effect": "side effect",
    "override": "output given",
    "live": "live",
    "replay_error": "error again",
    "miss": "MISS",
    "inside": "not called",
}


def _step_names(record: ExecutionRecord) -> dict[int, str]:
    from ..steps.view import record_steps

    return {step.number: step.name for step in record_steps(record)}


def _print_plan(plan: RerunPlan) -> None:
    names = {step.number: step.name for step in plan.steps}
    mode = _started(plan.mode, plan.from_step, names)
    click.echo(f"Dry run: re-running {plan.execution_id} {mode} would do this")
    click.echo("(nothing was run; today's code may call other steps)")
    width = max((len(step.name) for step in plan.steps), default=4)
    for step in plan.steps:
        action = _ACTIONS.get(step.action, step.action)
        line = f"  {step.number:>3}  {step.name:<{width}}  {action:<12} {step.why}"
        click.secho(line, fg="red" if step.action == "miss" else None)
    if not plan.steps:
        click.echo("  (the record has no steps)")


@click.command()
@click.argument("first", metavar="A", type=ExecutionId())
@click.argument("second", metavar="B", type=ExecutionId())
@last_intent_option
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def diff(first: str, second: str, as_json: bool) -> None:
    """Show where record B differs from record A, first deviation marked."""
    from ..steps.diff import diff_records

    check_last_intent()
    store = open_store()
    a, b = store.load(first), store.load(second)
    found = diff_records(a, b)
    if as_json:
        emit_json(found.to_json())
        return
    for tag, record in (("A", a), ("B", b)):
        header = record.header
        status = header.status.value
        pad = " " * max(9 - len(status), 0)  # padded outside the colour codes
        click.echo(
            f"{tag}  {record.execution_id}  {status_text(status)}{pad}  "
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
        branch = f"[{entry.branch}] " if entry.branch and entry.scope == "step" else ""
        line = f"  {mark} {entry.kind:<17}{branch}{entry.detail}"
        click.secho(line, fg="yellow" if entry.deviation_point else None)
    if found.branches:
        click.echo("Branches")
        for each in found.branches:
            point = each.deviation_point
            where = (
                "same"
                if point is None
                else f"first deviation: {point.name} ({point.kind})"
            )
            click.echo(f"  {each.agent}: {where}")


@click.command()
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@last_intent_option
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def debug(execution_id: str, as_json: bool) -> None:
    """Explain why record ID failed: root cause, timeline, how to resume."""
    from ..integrations.mcp.view import SESSION_INTENT
    from ..steps.explain import explain

    check_last_intent()
    store = open_store()
    record = store.load(execution_id)
    found = explain(record, store)
    until = found.failure_seq
    rows: list[JSONValue] = [
        timeline_row(event)
        for event in record.events
        if until is None or event.seq <= until
    ]
    resume = None
    # An MCP proxy's session ran no app's agents: there is nothing to re-run.
    proxied = record.header.intent_name == SESSION_INTENT
    if found.failed and not proxied:
        start = "--from-root-cause" if found.root_cause else "--from-failure"
        resume = _resume_command(execution_id, start)
    drift = _configuration_drift(store, record)
    if as_json:
        emit_json(
            {
                "explanation": found.to_json(),
                "timeline": rows,
                "resume": resume,
                "configuration": drift,
            }
        )
        return
    _print_explanation(record, found)
    _print_drift(drift)
    click.secho("\nTimeline up to the failure", bold=True)
    for row in rows:
        if isinstance(row, dict):
            print_row(row)
    if resume is not None:
        click.secho("\nOnce fixed, resume with", bold=True)
        click.echo(f"  {resume}")
    elif found.failed and proxied:
        click.secho("\nRecorded by the MCP proxy", bold=True)
        click.echo(
            "  no app ran it, so there is nothing to re-run; "
            "intentusnet mcp proxy --mode replay serves its calls again (docs/mcp.md)"
        )


#: How many earlier records of the intent ``debug`` looks through for a
#: completed run to compare the configuration with.
_COMPARE_WITHIN: Final = 200


def _configuration_drift(store: ExecutionStore, record: ExecutionRecord) -> JSONObject:
    """Whether ``record`` ran under the configuration of a run to compare with.

    That run is the original, for a re-run; else the newest earlier completed
    record of the same intent. Returns ``{"fingerprint", "comparedWith", "why",
    "same", "changes"}`` (``same`` is ``None`` when there is nothing to compare).
    """
    from ..steps.diff import configuration_changes

    mine = record.header.configuration
    fingerprint = None if mine is None else mine.get("fingerprint")
    other, why = _comparison(store, record)
    theirs = None if other is None else other.header.configuration
    same: bool | None = None
    changes: list[JSONValue] = []
    if mine is not None and theirs is not None:
        same = mine.get("fingerprint") == theirs.get("fingerprint")
        changes = list[JSONValue](configuration_changes(theirs, mine))
    return {
        "fingerprint": fingerprint,
        "comparedWith": None if other is None else other.execution_id,
        "why": why,
        "same": same,
        "changes": changes,
    }


def _comparison(
    store: ExecutionStore, record: ExecutionRecord
) -> tuple[ExecutionRecord | None, str]:
    """The record to compare the configuration with, and what it is."""
    from ..errors import IntentusNetError
    from ..store.filters import ListFilters

    original = record.replay_of
    if original is not None:
        try:
            return store.load(original), "the run this one re-ran"
        except IntentusNetError:
            return None, f"the run this one re-ran ({original}) cannot be loaded"
    header = record.header
    intent = header.intent_name
    for summary in store.list(
        ListFilters(intent=intent, status="completed", limit=_COMPARE_WITHIN)
    ):
        if (
            summary.execution_id != record.execution_id
            and summary.created_utc <= header.created_utc
        ):
            try:
                return store.load(summary.execution_id), (
                    f"the last completed {intent} run before it"
                )
            except IntentusNetError:
                continue
    return None, f"no completed {intent} run before it"


def _print_drift(drift: JSONObject) -> None:
    other, why, same = drift["comparedWith"], drift["why"], drift["same"]
    if drift["fingerprint"] is None:
        line = "not recorded (the record was made without it)"
    elif other is None:
        line = f"nothing to compare with: {why}"
    elif same is None:
        line = f"{other} ({why}) recorded none to compare with"
    elif same:
        line = f"the same as {other} ({why})"
    else:
        changes = drift["changes"]
        listed = "; ".join(map(str, changes)) if isinstance(changes, list) else ""
        line = f"CHANGED since {other} ({why}): {listed}"
    click.secho("\nConfiguration", bold=True)
    click.secho(f"  {line}", fg="yellow" if same is False else None)


def _resume_command(execution_id: str, start: str) -> str:
    import shlex  # here: `--help` imports this module to list its commands

    from ..store.naming import is_url, public_url

    name = named_store()
    # A URL's password is never printed: libpq finds it in PGPASSWORD or ~/.pgpass.
    if name is not None and is_url(name):
        name = public_url(name)
    store = "" if name is None else f" --store {shlex.quote(name)}"
    # The app is named when the context knows it; else a placeholder to fill.
    app = os.environ.get(APP_ENV) or None
    named = "MODULE:ATTR" if app is None else shlex.quote(app)
    return f"intentusnet{store} rerun {shlex.quote(execution_id)} --app {named} {start}"


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
