"""``rerun --all``: re-run every selected record against today's code.

The selection flags (``--intent``, ``--since``, ``--until``, ``--status``,
``--limit``, ``--sample N --seed S``) pick records as ``records list`` does;
``intentusnet.rerun_all`` re-runs them strictly in ``--jobs`` worker processes.
Records ``changed``, ``diverged`` or in ``error`` are listed as they come, then
a summary; the exit code is 0 when every record is ``same`` (``changed`` too with
``--allow changed``), else 8 (docs/cli.md).
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from .._util.jsonvalue import JSONObject, JSONValue
from .application import load_router
from .context import last_intent, named_store, open_store
from .output import emit_json, progress_counter, table
from .params import USAGE, Choice, CliFailure, options
from .selection import select, selection_options

if TYPE_CHECKING:
    from ..testing.verdict import RecordVerdict
    from .junit import JUnitReport

__all__ = ["AllOptions", "rerun_all_options", "run_all"]

#: Exit code when a record is not ``same`` (nor an allowed ``changed``).
NOT_SAME: Final = 8
#: ``rerun`` options that re-run one record in a chosen way: not with ``--all``.
_SINGLE: Final = {
    "from_failure": "--from-failure",
    "from_step": "--from",
    "from_root_cause": "--from-root-cause",
    "from_snapshot": "--from-snapshot",
    "live": "--live",
    "overrides": "--override",
    "allow_live": "--allow-live",
    "dry_run": "--dry-run",
    "reask_step": "--reask",
    "edits": "--set",
    "model": "--model",
    "key_env": "--key-env",
}


#: ``--all`` and the options that go with it, the selection's first, for ``rerun``.
rerun_all_options = options(
    selection_options,
    click.option(
        "--all",
        "run_all",
        is_flag=True,
        help="Re-run every selected record strictly (--intent, --since, "
        "--until, --status, --limit, --sample select); list those not the same.",
    ),
    click.option(
        "--jobs",
        type=click.IntRange(min=1),
        default=1,
        show_default=True,
        help="With --all: worker processes.",
    ),
    click.option(
        "--junit",
        type=click.Path(dir_okay=False, path_type=Path),
        metavar="FILE",
        help="With --all: write a JUnit XML report, one test case per record.",
    ),
    click.option(
        "--allow",
        "allowed",
        type=Choice(["changed"]),
        multiple=True,
        help="With --all: exit 0 although records changed.",
    ),
    click.option(
        "--progress",
        is_flag=True,
        help="With --all: show progress on stderr even when it is not a terminal.",
    ),
)


@dataclass(frozen=True)
class AllOptions:
    """What :data:`rerun_all_options` adds to ``rerun``, as one value."""

    run_all: bool
    since: datetime | None
    until: datetime | None
    status: str | None
    limit: int | None
    sample: int | None
    seed: int
    jobs: int
    junit: Path | None
    allowed: tuple[str, ...]
    progress: bool


def run_all(
    execution_id: str | None,
    app_ref: str | None,
    allowed_hosts: tuple[str, ...],
    as_json: bool,
    options: AllOptions,
) -> None:
    """``rerun --all``: re-run the selection, report, exit 0 or 8."""
    from ..testing.bulk import rerun_all

    _check_usage(execution_id, app_ref)
    assert app_ref is not None  # _check_usage refused its absence
    store = open_store()
    ids = select(
        store,
        intent=last_intent(),
        since=options.since,
        until=options.until,
        status=options.status,
        limit=options.limit,
        sample=options.sample,
        seed=options.seed,
    )
    name = named_store()
    app = partial(load_router, app_ref, name)
    # The workers open the store by its name: the directory of the default one.
    where = name if name is not None else str(store.directory)
    # Progress has a total: the selection is walked once more to count it.
    shown = options.progress or sys.stderr.isatty()
    total = sum(1 for _ in ids()) if shown else None
    with contextlib.ExitStack() as stack:
        report = None
        if options.junit is not None:
            from .junit import JUnitReport

            body = stack.enter_context(tempfile.TemporaryFile())
            report = JUnitReport(options.junit, "intentusnet rerun --all", body)
        verdicts = rerun_all(
            where, app, ids(), jobs=options.jobs, allowed_hosts=allowed_hosts
        )
        counts, listed = _tally(verdicts, total, report, as_json, options.progress)
        if report is not None:
            report.close()
    failing = counts["diverged"] + counts["error"]
    if "changed" not in options.allowed:
        failing += counts["changed"]
    selected = sum(counts.values())
    if as_json:
        summary: JSONObject = {"selected": selected, **counts, "records": listed}
        emit_json(summary)
    elif selected:
        click.echo()
        table(["OUTCOME", "RECORDS"], [[k, str(v)] for k, v in counts.items()])
    else:
        click.echo("No records match the selection: nothing to re-run.", err=True)
    if failing:
        raise click.exceptions.Exit(NOT_SAME)


def _tally(
    verdicts: Iterator[RecordVerdict],
    total: int | None,
    report: JUnitReport | None,
    as_json: bool,
    progress: bool,
) -> tuple[dict[str, int], list[JSONValue]]:
    """Count the verdicts as they come, listing those not ``same`` (nor skipped)."""
    from ..testing.verdict import OUTCOMES

    counts = dict.fromkeys(OUTCOMES, 0)
    listed: list[JSONValue] = []
    with progress_counter(
        None if total == 0 else "Re-running", total, force=progress
    ) as advance:
        for done, verdict in enumerate(verdicts, 1):
            counts[verdict.outcome] += 1
            if report is not None:
                report.add(verdict)
            if verdict.outcome in ("changed", "diverged", "error"):
                if as_json:
                    listed.append(verdict.to_json())
                else:
                    _print_row(verdict)
            if advance is not None:
                advance(done)
    return counts, listed


def _check_usage(execution_id: str | None, app_ref: str | None) -> None:
    params = click.get_current_context().params
    given = [flag for key, flag in _SINGLE.items() if params.get(key)]
    if not params.get("run_all"):
        raise CliFailure("rerun needs an ID, or --all", USAGE)
    if execution_id is not None:
        raise CliFailure("give an ID or --all, not both", USAGE)
    if given:
        raise CliFailure(f"{given[0]} re-runs one record: not with --all", USAGE)
    if params.get("block_network"):
        raise CliFailure("--all blocks the network already: drop it", USAGE)
    if app_ref is None:
        raise CliFailure("rerun --all needs --app MODULE:ATTR", USAGE)


def _print_row(verdict: RecordVerdict) -> None:
    colour = {"changed": "yellow", "skipped": None}.get(verdict.outcome, "red")
    click.echo(
        click.style(f"{verdict.outcome:<9}", fg=colour)
        + f" {verdict.execution_id}  {verdict.intent or '-'}  {verdict.reason}"
    )
