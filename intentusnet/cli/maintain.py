"""``verify``, ``invalidate``, ``reindex``, ``prune`` and ``stats``: store upkeep."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import RecordIntegrityError
from .context import ExecutionId, open_store
from .keys import key_options, key_ring
from .log import audit_beside_records, log_json, show_audit
from .output import emit_json, note, progress_counter, working
from .params import Duration, prices_option

if TYPE_CHECKING:
    from ..cache.savings import SavingsReport
    from ..record.model import ExecutionRecord, VerifyReport
    from ..record.signing import SignatureCheck
    from ..store.verdicts import VerifyOutcome

#: Exit code when a record fails verification (DESIGN §8).
INTEGRITY_EXIT = RecordIntegrityError.exit_code
_JSON_HELP = "Print JSON instead of text."
_JOBS_HELP = (
    "Worker processes reading the files of a store of 20,000 records or more."
    "  [default: the CPUs this process may use]"
)


def _jobs(given: int | None) -> int:
    return given if given is not None else len(os.sched_getaffinity(0))


def _verdict(report: VerifyReport | None, valid: bool) -> str:
    if report is not None and report.recording_failure and valid:
        return click.style("RECORDING FAILURE", fg="yellow")
    return (
        click.style("VALID", fg="green") if valid else click.style("INVALID", fg="red")
    )


@click.command()
@click.argument("execution_ids", nargs=-1, metavar="[ID]...", type=ExecutionId())
@click.option(
    "--all",
    "all_records",
    is_flag=True,
    help="Verify every record; print those with failures or notes, and a summary.",
)
@click.option(
    "--each", is_flag=True, help="With --all: print every record, valid ones too."
)
@click.option("--jobs", type=click.IntRange(min=1), metavar="N", help=_JOBS_HELP)
@key_options
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@click.pass_context
def verify(
    ctx: click.Context,
    execution_ids: tuple[str, ...],
    all_records: bool,
    each: bool,
    jobs: int | None,
    key_files: tuple[str, ...],
    key_dirs: tuple[str, ...],
    require_signature: bool,
    as_json: bool,
) -> None:
    """Check the hash chains of the records named (or --all); exit 6 on failure.

    With --all, a store keeping a transparency log has it checked too when
    its key is among --key/--keys: its leaves walked against the records, as
    `log verify` does (without a remembered checkpoint). A record that fails
    exits 6; else a finding of the log exits with its code (docs/cli.md).

    A file with no complete first line (its process was killed before it wrote
    the header) is a recording failure, not tampering: it is reported with a
    note and does not fail the command. With --key or --keys, each record's
    signatures are checked too: signed-valid, signed-invalid, unsigned or
    unknown-key; all but signed-valid and unsigned fail (unsigned too with
    --require-signature).
    """
    if bool(execution_ids) == all_records:
        raise click.UsageError("give one or more IDs, or --all (not both)")
    if (each or jobs is not None) and not all_records:
        raise click.UsageError(
            "--each and --jobs go with --all (named records are all shown)"
        )
    from ..store.verdicts import Verification

    ring = key_ring(key_files, key_dirs, require_signature)
    store = open_store()
    # The catalog's count: the total the progress line shows (an estimate if
    # records arrive meanwhile; the count itself is always exact).
    label = "Verifying records" if all_records else None
    expected = store.stats().records if label and sys.stderr.isatty() else None
    shown: list[JSONValue] = []
    with progress_counter(label, expected) as advance:
        run = Verification(
            store,
            execution_ids or None,
            ring=ring,
            each=each,
            processes=_jobs(jobs),
            on_progress=advance,
        )
        for outcome in run:
            if as_json:
                shown.append(_outcome_json(outcome))
            else:
                _show(outcome)
    audit = audit_beside_records(key_files, key_dirs) if all_records else None
    if as_json:
        total: JSONObject = {
            "records": run.records,
            "invalid": run.invalid,
            "recordingFailures": run.recording_failures,
            "eventsTotal": run.events_total,
            "eventsVerified": run.events_verified,
            "failures": run.failures,
            "valid": run.invalid == 0,
        }
        if ring is not None:
            by_status: JSONObject = dict(run.signatures)
            total["signatures"] = by_status
        doc: JSONObject = {"records": shown, "total": total}
        if audit is not None:
            doc["log"] = log_json(audit)
        emit_json(doc)
    else:
        if audit is not None:
            show_audit(audit)
        click.echo(
            f"Total: {run.records} records ({run.invalid} invalid, "
            f"{run.recording_failures} recording failures), "
            f"{run.events_verified}/{run.events_total} events verified, "
            f"{run.failures} failures - {_verdict(None, run.invalid == 0)}"
        )
        if ring is not None:
            click.echo(
                "Signatures: "
                + ", ".join(f"{n} {status}" for status, n in run.signatures.items())
            )
    if run.invalid:
        ctx.exit(INTEGRITY_EXIT)
    if audit is not None and audit.findings:
        ctx.exit(max(finding.exit_code for finding in audit.findings))


def _outcome_json(outcome: VerifyOutcome) -> JSONObject:
    """A record's report as ``--json`` prints it, with its signature if judged."""
    doc = outcome.report.to_json()
    if outcome.signature is not None:
        doc["valid"] = outcome.valid
        doc["signature"] = outcome.signature.to_json()
    return doc


def _show(outcome: VerifyOutcome) -> None:
    """A record's verdict for people, then its failures and notes."""
    report, check = outcome.report, outcome.signature
    line = (
        f"{report.execution_id}: {report.events_verified}/{report.events_total} "
        f"events verified, {len(report.failures)} failures - "
        f"{_verdict(report, outcome.valid)}"
    )
    if check is not None:
        line += f" - {_signature_text(check)}"
    click.echo(line)
    for failure in report.failures:
        click.echo(f"  {failure}")
    for remark in report.notes:
        click.echo(f"  note: {remark}")


def _signature_text(check: SignatureCheck) -> str:
    colour = "green" if check.status.value == "signed-valid" else None
    if not check.accepted:
        colour = "red"
    status = click.style(check.status.value, fg=colour)
    if check.status.value == "signed-valid":
        return f"{status} ({', '.join(check.key_ids)})"
    return f"{status}: {check.detail}"


@click.command()
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@click.option("--reason", required=True, metavar="TEXT", help="Why (recorded).")
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def invalidate(execution_id: str, reason: str, as_json: bool) -> None:
    """Mark record ID not replayable (appends an INVALIDATED event).

    A record invalidated already is left as it is, and the command says so.
    """
    store = open_store()
    first = _invalidated_for(store.load(execution_id))
    if first is None:
        store.invalidate(execution_id, reason)
    if as_json:
        emit_json(
            {
                "executionId": execution_id,
                "invalidated": True,
                "reason": reason if first is None else first,
                "appended": first is None,
            }
        )
    elif first is None:
        click.echo(f"Invalidated {execution_id}: {reason}")
    else:
        click.echo(
            f"{execution_id} was already invalidated (reason: {first}); "
            "nothing appended"
        )


def _invalidated_for(record: ExecutionRecord) -> str | None:
    """The reason of the record's INVALIDATED event, if it has one."""
    for event in record.events:
        if event.type.value == "INVALIDATED":
            return str(event.data.get("reason"))
    return None


@click.command()
@click.option("--jobs", type=click.IntRange(min=1), metavar="N", help=_JOBS_HELP)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
@click.pass_context
def reindex(ctx: click.Context, jobs: int | None, as_json: bool) -> None:
    """Rebuild the catalog from the record files; exit 6 if a record changed.

    A record whose file no longer holds the last line the catalog saw (edited
    and re-hashed, or cut) is listed and kept as integrity_failure, never
    accepted as it is now.
    """
    store = open_store()
    changed: list[tuple[str, str]] = []

    def on_changed(execution_id: str, problem: str) -> None:
        changed.append((execution_id, problem))

    working(f"Reindexing {store.where} ...")
    total = None
    if sys.stderr.isatty():
        # Record files are counted as files: the catalog may be what is lost.
        # A database's rows are the records.
        on_disk = store.directory is not None
        total = sum(1 for _ in store.iter_ids()) if on_disk else store.stats().records
    with progress_counter("Reading records", total) as advance:
        count = store.reindex(
            processes=_jobs(jobs), on_progress=advance, on_changed=on_changed
        )
    if as_json:
        listed: list[JSONValue] = [
            {"executionId": execution_id, "problem": problem}
            for execution_id, problem in changed
        ]
        emit_json({"records": count, "changed": listed})
    else:
        click.echo(f"Reindexed {count} records.")
        for execution_id, problem in changed:
            click.echo(
                f"{execution_id}: changed since the catalog saw it - {problem} - "
                + click.style("INVALID", fg="red")
            )
        if changed:
            click.echo(
                f"{len(changed)} records changed since they were indexed; kept as "
                "integrity_failure (not accepted as they are now)."
            )
    if changed:
        ctx.exit(INTEGRITY_EXIT)


@click.command()
@click.option(
    "--older-than",
    "older_than",
    type=Duration(),
    required=True,
    metavar="DURATION",
    help="Delete records created longer ago than this (e.g. 30d, 12h).",
)
@click.option("--dry-run", is_flag=True, help="List what would go; delete nothing.")
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def prune(older_than: timedelta, dry_run: bool, as_json: bool) -> None:
    """Delete whole records older than a duration, and every recording failure.

    Files with no complete first line (nothing was recorded in them) go
    whatever their age; records still being written are kept.
    """
    store = open_store()
    working(f"Pruning {store.where} ...")
    with progress_counter(None if dry_run else "Deleting records") as advance:
        ids = store.prune(older_than, dry_run=dry_run, on_progress=advance)
    if as_json:
        listed: list[JSONValue] = list(ids)
        emit_json({"executionIds": listed, "count": len(ids), "dryRun": dry_run})
        return
    for execution_id in ids:
        click.echo(execution_id)
    verb = "Would delete" if dry_run else "Deleted"
    note(f"{verb} {len(ids)} records.")


@click.command()
@click.option(
    "--cache-dir",
    type=click.Path(path_type=Path, file_okay=False),
    metavar="PATH",
    help="Replay cache directory to report.  [default: STORE/replay-cache]",
)
@prices_option("the cost LLM calls spent and hits avoided")
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def stats(cache_dir: Path | None, prices_file: str | None, as_json: bool) -> None:
    """Count records by status and intent, cache hits; show sizes on disk.

    Also what caching saved: LLM calls (hits and misses), tokens spent on
    misses and avoided by hits, by provider and model, and their cost with
    --prices.
    """
    from ..cache.disk import CACHE_DIR, read_stats
    from ..cache.prices import price_table
    from ..cache.savings import savings_report

    # A bad price table is a usage error (exit 2), found before any work.
    prices = price_table(prices_file)
    store = open_store()
    found = store.stats()
    hits = store.cache_hit_count()
    if cache_dir is None and store.directory is not None:
        # A PostgreSQL store has no directory, so no default cache directory.
        cache_dir = store.directory / CACHE_DIR
    caches = read_stats(cache_dir) if cache_dir is not None else []
    saved = savings_report(store, prices)
    if as_json:
        doc = found.to_json()
        doc["cacheHits"] = hits
        doc["caches"] = [cache.to_json() for cache in caches]
        doc["llm"] = saved.to_json()
        emit_json(doc)
        return
    click.echo(f"Store:   {store.where}")
    click.echo(f"Records: {found.records} ({_size(found.bytes_on_disk)} on disk)")
    click.echo(f"Cache hits recorded: {hits}")
    for cache in caches:
        click.echo(
            f"Cache {cache.namespace!r}: {cache.hits} hits, {cache.misses} misses, "
            f"{cache.entries} entries ({_size(cache.bytes)} in {cache.directory})"
        )
    for title, counts in (
        ("By status", found.by_status),
        ("By intent", found.by_intent),
    ):
        if counts:
            click.echo(f"{title}:")
            width = max(map(len, counts))
            for key, count in sorted(counts.items()):
                click.echo(f"  {key:<{width}}  {count}")
    _show_savings(saved)


def _show_savings(saved: SavingsReport) -> None:
    """What caching saved, for people: totals, then a line per model."""
    if not saved.models:
        click.echo("LLM calls: none recorded")
        return
    click.echo(f"LLM calls: {saved.calls} ({saved.hits} hits, {saved.misses} misses)")
    click.echo(
        f"Tokens spent on misses: {saved.input_tokens_spent} input, "
        f"{saved.output_tokens_spent} output"
    )
    click.echo(
        f"Tokens avoided by hits: {saved.input_tokens_avoided} input, "
        f"{saved.output_tokens_avoided} output"
    )
    currency = saved.currency
    if currency is not None:
        click.echo(f"Cost spent:   {_money(saved.cost_spent)} {currency}")
        click.echo(f"Cost avoided: {_money(saved.cost_avoided)} {currency}")
        if saved.unpriced:
            click.echo(f"No price for: {', '.join(saved.unpriced)}")
    head = ["provider", "model", "calls", "hits", "misses", "input", "output"]
    head += ["input avoided", "output avoided"]
    rows = [
        [
            m.provider,
            m.model or "(unknown)",
            str(m.calls),
            str(m.hits),
            str(m.misses),
            str(m.input_tokens_spent),
            str(m.output_tokens_spent),
            str(m.input_tokens_avoided),
            str(m.output_tokens_avoided),
        ]
        for m in saved.models
    ]
    if currency is not None:
        head += [f"cost spent ({currency})", f"cost avoided ({currency})"]
        for row, m in zip(rows, saved.models, strict=True):
            row += [_money(m.cost_spent), _money(m.cost_avoided)]
    click.echo("By model (tokens spent on misses, avoided by hits):")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for row in [head, *rows]:
        cells = [
            cell.ljust(width) if i < 2 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ]
        click.echo("  " + "  ".join(cells).rstrip())


def _money(amount: float | None) -> str:
    return "-" if amount is None else f"{amount:.6f}"


def _size(n: int) -> str:
    if n < 1024:
        return f"{n} B"
    size, unit = n / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}"
