"""``verify``, ``invalidate``, ``reindex``, ``prune`` and ``stats``: store upkeep."""

from __future__ import annotations

import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import RecordIntegrityError, RecordNotFound
from .context import ExecutionId, open_store
from .keys import key_options, key_ring
from .output import emit_json, note, progress_counter, working
from .params import Duration

if TYPE_CHECKING:
    from ..cache.savings import SavingsReport
    from ..record.model import ExecutionRecord, VerifyReport
    from ..record.signing import SignatureCheck
    from ..store.naming import NamedStore

#: The signature statuses, in the order the summary counts them.
STATUSES: Final = ("signed-valid", "signed-invalid", "unsigned", "unknown-key")

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
    from ..store.file import FileExecutionStore

    ring = key_ring(key_files, key_dirs, require_signature)
    store = open_store()
    shown: list[JSONValue] = []
    signed: dict[str, int] = {}
    records = invalid = recording_failures = total_events = verified = failures = 0

    def judge(r: VerifyReport) -> tuple[bool, SignatureCheck | None]:
        """Whether the record passes, and what its signatures show."""
        if ring is None:
            return r.valid, None
        check = ring.check_report(r)
        signed[check.status.value] = signed.get(check.status.value, 0) + 1
        return r.valid and check.accepted, check

    def show(r: VerifyReport, ok: bool, check: SignatureCheck | None) -> None:
        nonlocal failures
        failures += len(r.failures)
        if as_json:
            doc = r.to_json()
            if check is not None:
                doc["valid"] = ok
                doc["signature"] = check.to_json()
            shown.append(doc)
            return
        line = (
            f"{r.execution_id}: {r.events_verified}/{r.events_total} events "
            f"verified, {len(r.failures)} failures - {_verdict(r, ok)}"
        )
        if check is not None:
            line += f" - {_signature_text(check)}"
        click.echo(line)
        for failure in r.failures:
            click.echo(f"  {failure}")
        for remark in r.notes:
            click.echo(f"  note: {remark}")

    def count(r: VerifyReport, ok: bool) -> None:
        nonlocal records, invalid, recording_failures, total_events, verified
        records += 1
        invalid += not ok
        recording_failures += r.recording_failure
        total_events += r.events_total
        verified += r.events_verified

    if all_records and isinstance(store, FileExecutionStore):
        # The catalog's count: the total the progress line shows (an estimate
        # if records arrive meanwhile; the count itself is always exact).
        expected = store.stats().records if sys.stderr.isatty() else None
        with progress_counter("Verifying records", expected) as advance:
            # Every report, when signatures are judged: a valid chain may hide
            # a signature that fails.
            run = store.verify_all(
                each=each or ring is not None,
                processes=_jobs(jobs),
                on_progress=advance,
            )
            for report in run:
                ok, check = judge(report)
                if each or not ok or report.failures or report.notes:
                    show(report, ok, check)
                if ring is not None:
                    count(report, ok)
        if ring is None:
            records, invalid = run.records, run.invalid
            recording_failures = run.recording_failures
            total_events, verified = run.events_total, run.events_verified
    else:
        # Named records, or every record of a store without a whole-store
        # scan (PostgreSQL): one at a time, the same report each.
        label = "Verifying records" if all_records else None
        expected = store.stats().records if label and sys.stderr.isatty() else None
        with progress_counter(label, expected) as advance:
            for execution_id in execution_ids or store.iter_ids():
                found = _verify_one(store, execution_id, named=not all_records)
                if found is None:
                    continue  # deleted since it was listed
                ok, check = judge(found)
                if not all_records or each or not ok or found.notes:
                    show(found, ok, check)
                count(found, ok)
                if advance is not None:
                    advance(records)
    if as_json:
        total: JSONObject = {
            "records": records,
            "invalid": invalid,
            "recordingFailures": recording_failures,
            "eventsTotal": total_events,
            "eventsVerified": verified,
            "failures": failures,
            "valid": invalid == 0,
        }
        if ring is not None:
            by_status: JSONObject = {s: signed.get(s, 0) for s in STATUSES}
            total["signatures"] = by_status
        emit_json({"records": shown, "total": total})
    else:
        click.echo(
            f"Total: {records} records ({invalid} invalid, {recording_failures} "
            f"recording failures), {verified}/{total_events} events verified, "
            f"{failures} failures - {_verdict(None, invalid == 0)}"
        )
        if ring is not None:
            click.echo(
                "Signatures: " + ", ".join(f"{signed.get(s, 0)} {s}" for s in STATUSES)
            )
    if invalid:
        ctx.exit(INTEGRITY_EXIT)


def _signature_text(check: SignatureCheck) -> str:
    colour = "green" if check.status.value == "signed-valid" else None
    if not check.accepted:
        colour = "red"
    status = click.style(check.status.value, fg=colour)
    if check.status.value == "signed-valid":
        return f"{status} ({', '.join(check.key_ids)})"
    return f"{status}: {check.detail}"


def _verify_one(
    store: NamedStore, execution_id: str, *, named: bool = True
) -> VerifyReport | None:
    from ..record.model import VerifyReport

    try:
        return store.verify(execution_id)
    except RecordNotFound:
        if named:
            raise
        return None
    except RecordIntegrityError as exc:
        # A file that cannot be checked at all (e.g. a newer format) fails, and
        # the other records are still checked.
        return VerifyReport(execution_id, 0, 0, (str(exc),), valid=False)


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
    from ..store.file import FileExecutionStore

    store = open_store()
    changed: list[tuple[str, str]] = []

    def on_changed(execution_id: str, problem: str) -> None:
        changed.append((execution_id, problem))

    working(f"Reindexing {store.where} ...")
    if isinstance(store, FileExecutionStore):
        # The files are the total: the catalog may be what is lost.
        files = sum(1 for _ in store.iter_ids()) if sys.stderr.isatty() else None
        with progress_counter("Reading records", files) as advance:
            count = store.reindex(
                processes=_jobs(jobs), on_progress=advance, on_changed=on_changed
            )
    else:  # in the database; its rows are the total
        rows = store.stats().records if sys.stderr.isatty() else None
        with progress_counter("Reindexing records", rows) as advance:
            count = store.reindex(on_changed=on_changed, on_progress=advance)
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
    from ..store.file import FileExecutionStore

    store = open_store()
    working(f"Pruning {store.where} ...")
    if isinstance(store, FileExecutionStore) and not dry_run:
        with progress_counter("Deleting records") as advance:
            ids = store.prune(older_than, on_progress=advance)
    else:
        ids = store.prune(older_than, dry_run=dry_run)  # PostgreSQL: one statement
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
@click.option(
    "--prices",
    "prices_file",
    envvar="INTENTUSNET_PRICES",
    show_envvar=True,
    metavar="FILE",
    help=(
        "Price table (JSON, or TOML as *.toml): cost per million tokens by "
        "model, to show the cost LLM calls spent and hits avoided."
    ),
)
@click.option("--json", "as_json", is_flag=True, help=_JSON_HELP)
def stats(cache_dir: Path | None, prices_file: str | None, as_json: bool) -> None:
    """Count records by status and intent, cache hits; show sizes on disk.

    Also what caching saved: LLM calls (hits and misses), tokens spent on
    misses and avoided by hits, by provider and model, and their cost with
    --prices.
    """
    from ..cache.prices import PriceTable
    from ..cache.replay_cache import CACHE_DIR, read_stats
    from ..cache.savings import savings_report

    # A bad price table is a usage error (exit 2), found before any work.
    prices = PriceTable.load(prices_file) if prices_file else None
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
