"""``intentusnet replay``: the recorded answer, without running any agent.

This is the command that must start fast: it imports the store and the replay
engine, which read records with orjson, and never pydantic or httpx. An
envelope given with ``--verify-envelope`` is hashed from its wire form.
``--step`` walks the record line by line instead (:mod:`.stepper`).
"""

from __future__ import annotations

import click

from .._util.jsonvalue import JSONObject
from ..errors import RecordIntegrityError, ReplayHashMismatch, ReplayNotAllowed
from .context import ExecutionId, open_store
from .keys import key_options, key_ring
from .output import emit_json, note, warn
from .params import USAGE, CliFailure, read_json_object

#: Exit code when ``--verify-envelope`` finds another envelope (DESIGN §8).
HASH_MISMATCH_EXIT = ReplayHashMismatch.exit_code


@click.command()
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@click.option(
    "--verify-envelope",
    "envelope_file",
    metavar="FILE",
    help="Replay only if the envelope in FILE (- for stdin) hashes as recorded.",
)
@click.option(
    "--force", is_flag=True, help="Replay even a record that is not replayable."
)
@click.option(
    "--step",
    is_flag=True,
    help="Walk the record one verified event at a time (next, previous, quit).",
)
@key_options
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
@click.pass_context
def replay(
    ctx: click.Context,
    execution_id: str,
    envelope_file: str | None,
    force: bool,
    step: bool,
    key_files: tuple[str, ...],
    key_dirs: tuple[str, ...],
    require_signature: bool,
    as_json: bool,
) -> None:
    """Print the recorded result of execution ID as JSON; runs no agent code.

    With --key or --keys the record's signatures are checked first: a record
    changed after it was signed, or signed by a key not given, is refused
    with exit 6 (--force does not override it), and so is an unsigned one
    with --require-signature.
    """
    from ..replay import ReplayEngine

    if step and (envelope_file is not None or as_json or force):
        raise CliFailure(
            "--step walks the record; it takes no --verify-envelope, --force or --json",
            USAGE,
        )
    ring = key_ring(key_files, key_dirs, require_signature)
    envelope = None if envelope_file is None else read_json_object(envelope_file)
    engine = ReplayEngine.from_store(open_store(), execution_id, keys=ring)
    if step:
        from .stepper import step_through

        if step_through(engine):
            ctx.exit(RecordIntegrityError.exit_code)
        return
    replayable, reason = engine.is_replayable()
    if force and not replayable:
        warn(f"Forcing replay of non-replayable record ({reason})")
    try:
        result = engine.replay(env=envelope, force=force)
    except ReplayNotAllowed as exc:
        raise CliFailure(
            f"record {execution_id} is not replayable ({exc.reason}); "
            "use --force to replay it anyway",
            exc.exit_code,
            cause=exc,
        ) from exc
    except ReplayHashMismatch as exc:
        _show_mismatch(exc)
        ctx.exit(HASH_MISMATCH_EXIT)
    if envelope is not None:
        note("Envelope hash matches.")
    # The result's own warnings are part of the JSON printed.
    emit_json(_shown(result.to_json()), compact=as_json)


def _shown(replayed: JSONObject) -> JSONObject:
    """The replay's JSON, its metadata saying it is a replay, as a cache hit's does.

    The record holds the answer as first given (``fromReplay: false``); shown
    beside ``"fromReplay": true`` that would contradict it, so the metadata
    printed says ``fromReplay`` and names the record, as a cache hit's answer.
    """
    metadata = replayed.get("metadata")
    if not isinstance(metadata, dict):
        return replayed
    return {
        **replayed,
        "metadata": {
            **metadata,
            "fromReplay": True,
            "originalExecutionId": replayed["originalExecutionId"],
        },
    }


def _show_mismatch(exc: ReplayHashMismatch) -> None:
    click.secho("Envelope hash mismatch.", err=True, fg="red")
    click.echo(f"  recorded: {exc.expected}", err=True)
    click.echo(f"  given:    {exc.actual}", err=True)
    click.echo("  differing paths:", err=True)
    for path in exc.paths or ["(none found in the hashed view)"]:
        click.echo(f"    {path}", err=True)
