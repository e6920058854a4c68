"""``intentusnet log``: the transparency log's proofs, made and checked (docs/log.md).

A signed file store appends a leaf to its log (``<root>/log/``) each time a
record closes. ``log backfill`` appends the records closed before the log
existed; ``log verify`` audits the log and the records against each other,
remembering the newest checkpoint it accepted; ``log prove ID`` writes the
C2SP tlog-proof of a record's leaf; ``log verify-proof FILE --key PUB`` checks
one offline, with the log's public key alone.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from .context import ExecutionId, Settings, open_store
from .log_host import LogHost
from .output import emit_json
from .params import USAGE, CliFailure, options

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .._util.jsonvalue import JSONObject, JSONValue
    from ..record.keys import PublicKey
    from ..tlog.audit import LogAudit
    from ..tlog.cosignature import Cosigner
    from ..tlog.log import TileLog

NOT_FOUND: Final = 3
#: Leaves per checkpoint when backfilling.
_BATCH: Final = 4096
#: Proof files larger than this are not proof files (one is about 3 KB).
_MAX_PROOF: Final = 1024 * 1024


@click.group()
def log() -> None:
    """Prove records are in the transparency log, and check proofs offline."""


#: The exit code of a checkpoint too few witnesses cosigned (the audit's
#: ``unwitnessed``).
UNWITNESSED: Final = 17

_LOG_KEY = click.option(
    "--key",
    "key_file",
    required=True,
    metavar="PUB",
    help="The log's public key file (the store's signing key's .pub).",
)


#: ``--witness [URL=]VKEY`` (repeatable) and ``--witness-quorum K``.
witness_options = options(
    click.option(
        "--witness",
        "witnesses",
        multiple=True,
        metavar="[URL=]VKEY",
        help="A witness: its add-checkpoint URL prefix (log publish) and its "
        "verifier key, as `intentusnet witness` prints it (repeatable).",
    ),
    click.option(
        "--witness-quorum",
        "quorum",
        type=click.IntRange(min=1),
        default=None,
        metavar="K",
        help="How many of the --witness witnesses must have cosigned "
        "[default: all of them].",
    ),
)


def _witness_entries(entries: tuple[str, ...]) -> list[tuple[str, Cosigner]]:
    """Each ``--witness [URL=]VKEY``: its URL ('' without one) and witness."""
    from ..errors import LogIntegrityError
    from ..tlog.cosignature import parse_cosigner

    found = []
    for entry in entries:
        url, equals, vkey = entry.rpartition("=")
        if equals and "+" not in vkey:  # base64 ends in '=': no URL given
            url, vkey = "", entry
        try:
            found.append((url, parse_cosigner(vkey)))
        except LogIntegrityError as exc:
            raise CliFailure(f"--witness {entry[:80]!r}: {exc}", USAGE) from None
    return found


def _quorum(quorum: int | None, witnesses: int) -> int:
    """The quorum asked for (all by default), checked against the witnesses given."""
    if quorum is None:
        return witnesses
    if quorum > witnesses:
        raise CliFailure(
            f"--witness-quorum {quorum} needs at least {quorum} --witness, "
            f"not {witnesses}",
            USAGE,
        )
    return quorum


@log.command()
@_LOG_KEY
@witness_options
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for each witness.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def publish(
    key_file: str,
    witnesses: tuple[str, ...],
    quorum: int | None,
    timeout: float,
    as_json: bool,
) -> None:
    """Have the witnesses cosign the log's checkpoint; publish it if enough did.

    Sends the log's newest checkpoint, with a consistency proof from the size
    each witness holds, to every --witness URL=VKEY (C2SP tlog-witness
    add-checkpoint). With --witness-quorum of them cosigned, the checkpoint
    and their cosignature lines are published as `log/<key id>/checkpoint.cosigned`
    (what `log verify --witness` checks); else nothing is published, exit 17.
    """
    from ..record.keys import PublicKey
    from ..tlog.publish import LogWitnesses, publish_checkpoint

    key = PublicKey.load(key_file)
    entries = _witness_entries(witnesses)
    if not entries or any(not url for url, _ in entries):
        raise CliFailure("log publish needs each --witness as URL=VKEY", USAGE)
    need = _quorum(quorum, len(entries))
    host = LogHost(open_store())
    host.store.close()  # what this process queued is in the log
    tlog = host.log(key.key_id)
    if tlog.checkpoint_note() is None:
        raise CliFailure(f"the store {host.where} has no transparency log", NOT_FOUND)
    outcome = publish_checkpoint(tlog, key, LogWitnesses(tuple(entries), need, timeout))
    if not outcome.published:
        raise CliFailure(
            f"{outcome.cosigned} of {len(entries)} witnesses cosigned "
            f"{outcome.origin} at size {outcome.size}, {need} needed; nothing "
            "published: " + "; ".join(outcome.problems),
            UNWITNESSED,
        )
    if as_json:
        emit_json(
            {
                "origin": outcome.origin,
                "size": outcome.size,
                "cosigned": outcome.cosigned,
                "witnesses": len(entries),
                "problems": list(outcome.problems),
            }
        )
        return
    for problem in outcome.problems:
        click.echo(f"not cosigned: {problem}", err=True)
    click.echo(
        f"Published {outcome.origin} at size {outcome.size}, cosigned by "
        f"{outcome.cosigned} of {len(entries)} witnesses."
    )


@log.command()
@click.argument("execution_id", metavar="ID", type=ExecutionId())
@click.option(
    "--out",
    default="-",
    metavar="FILE",
    help="Write the proof to FILE (default: stdout).",
)
def prove(execution_id: str, out: str) -> None:
    """Write the C2SP tlog-proof of record ID's leaf (its newest, if several).

    The proof holds the leaf, its index, its inclusion proof and the log's
    current signed checkpoint: `log verify-proof` checks it with no store.
    """
    host = LogHost(open_store())
    logs = host.logs()  # one log per signing key the store has had
    found = next(
        (
            (tlog, index)
            for tlog in logs
            if (index := _newest_leaf(host, tlog, execution_id)) is not None
        ),
        None,
    )
    if found is None:
        raise CliFailure(
            f"record {execution_id} has no leaf in the logs of "
            f"{host.where} ({len(logs)} logs)",
            NOT_FOUND,
        )
    tlog, index = found
    data = tlog.proof_of(index).to_bytes()
    if out == "-":
        click.echo(data, nl=False)
        return
    try:
        Path(out).write_bytes(data)
    except OSError as exc:
        raise CliFailure(f"cannot write {out}: {exc.strerror or exc}", USAGE) from None


def _newest_leaf(host: LogHost, tlog: TileLog, execution_id: str) -> int | None:
    """The index of the record's newest leaf in ``tlog``, or None."""
    from ..errors import LogError
    from ..tlog.leaf import LogLeaf

    try:  # the index answers at once; without it, the bundles newest first
        leaves = host.index(tlog)
        leaves.catch_up()
        index = leaves.newest(execution_id)
        leaves.close()
        return index
    except LogError:
        return tlog.find(
            lambda leaf: LogLeaf.from_bytes(leaf).execution_id == execution_id
        )


@log.command("verify-proof")
@click.argument("proof_file", metavar="FILE")
@click.option(
    "--key",
    "key_file",
    required=True,
    metavar="PUB",
    help="The log's public key file (PEM, as keys generate writes it).",
)
@click.option(
    "--origin",
    default=None,
    metavar="ORIGIN",
    help="The log the proof must be of (default: the checkpoint's own origin).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def verify_proof(
    proof_file: str, key_file: str, origin: str | None, as_json: bool
) -> None:
    """Check a tlog-proof FILE offline: signed by PUB, and its leaf under the root."""
    from ..record.keys import PublicKey
    from ..tlog.leaf import LogLeaf
    from ..tlog.proof import LogProof

    key = PublicKey.load(key_file)
    proof = LogProof.from_bytes(_read(proof_file))
    checkpoint = proof.verify(key, origin)
    leaf = LogLeaf.from_bytes(proof.leaf)
    if as_json:
        emit_json(
            {
                "executionId": leaf.execution_id,
                "chainHead": leaf.chain_head,
                "keyId": leaf.key_id,
                "index": proof.leaf_index,
                "origin": checkpoint.origin,
                "size": checkpoint.size,
                "root": base64.b64encode(checkpoint.root).decode(),
            }
        )
        return
    click.echo(
        f"{leaf.execution_id}: leaf {proof.leaf_index} of {checkpoint.origin} at size "
        f"{checkpoint.size} - INCLUDED (chain head {leaf.chain_head}, "
        f"{leaf.key_id or 'unsigned'})"
    )


@log.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def backfill(as_json: bool) -> None:
    """Append every closed record that is not a leaf yet.

    These are the records closed before the log existed, or whose process
    died with their leaves queued.
    Needs the store's signing key (--signing-key or INTENTUSNET_SIGNING_KEY):
    it signs the new checkpoint. Running it again appends nothing new: a
    record at the same chain head is never a leaf twice.
    """
    import time

    from ..record.keys import load_signing_key
    from ..tlog.sequencer import append_leaves

    host = LogHost(open_store())
    settings = click.get_current_context().find_object(Settings)
    key = load_signing_key(settings.signing_key if settings else None)
    if key is None:
        raise CliFailure(
            "log backfill signs the log's checkpoint: give the store's key "
            "(--signing-key FILE or INTENTUSNET_SIGNING_KEY)",
            USAGE,
        )
    tlog = host.log(key.key_id, key)
    index = host.index(tlog)
    before = index.catch_up()
    started = time.time()
    found, until = host.unlogged(key.key_id)
    size = before
    for at in range(0, len(found), _BATCH):
        size = append_leaves(tlog, index, found[at : at + _BATCH])
    index.mark_scanned(min(started, until))
    index.close()
    if as_json:
        emit_json({"appended": size - before, "size": size, "origin": tlog.origin})
    else:
        click.echo(f"Appended {size - before} leaves; the log holds {size}.")


@log.command("verify")
@_LOG_KEY
@click.option(
    "--state",
    "state_file",
    default=None,
    metavar="FILE",
    help="Where the newest checkpoint accepted is remembered "
    "(default: under $XDG_STATE_HOME/intentusnet/log/, one file per log).",
)
@click.option(
    "--trusted",
    "trusted_files",
    multiple=True,
    metavar="CHECKPOINT_FILE",
    help="A checkpoint of this log accepted elsewhere (repeatable): the log "
    "must extend it.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="A record closed less than this long ago may still wait for its leaf.",
)
@witness_options
@click.option(
    "--follow",
    is_flag=True,
    help="Keep watching: audit each new checkpoint as it appears, until "
    "Ctrl-C or SIGTERM (exit 0) or a finding (its exit code).",
)
@click.option(
    "--interval",
    type=click.FloatRange(min=0.05, max=3600),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="With --follow: how often to look for a new checkpoint.",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_context
def verify_log(
    ctx: click.Context,
    key_file: str,
    state_file: str | None,
    trusted_files: tuple[str, ...],
    grace: float,
    witnesses: tuple[str, ...],
    quorum: int | None,
    follow: bool,
    interval: float,
    as_json: bool,
) -> None:
    """Audit the log: its checkpoint, tiles and history, and every record.

    Exits 0 when all holds, else with the highest exit code of the findings
    (hidden 10, damaged 11, edited 12, deleted 13, log-damaged 14, rollback
    15, split-view 16, unwitnessed 17; docs/cli.md). The checkpoint is
    remembered once it holds up, and every later run refuses a log that does
    not extend it. With --witness, the checkpoint `log publish` published
    must be cosigned by --witness-quorum of them, and the log must extend it.
    With --follow, each new checkpoint is audited as it appears (one report
    each), until a finding (its exit code) or Ctrl-C / SIGTERM (exit 0).
    """
    from ..record.keys import PublicKey
    from ..tlog.audit import log_origin

    key = PublicKey.load(key_file)
    host = LogHost(open_store())
    origin = log_origin(key.key_id)
    state = Path(state_file) if state_file else _state_path(origin)
    trusted = []
    for name in trusted_files:
        found = _read_state(Path(name), "checkpoint file")
        if found is None:
            raise CliFailure(f"no checkpoint file {name}", USAGE)
        trusted.append((f"--trusted {name}", found))
    cosigners = [cosigner for _, cosigner in _witness_entries(witnesses)]
    need = _quorum(quorum, len(cosigners))

    def check() -> LogAudit:
        """One audit against the remembered and trusted checkpoints, reported."""
        known = list(trusted)
        remembered = _read_state(state, "log state")
        if remembered is not None:
            known.insert(0, (f"the checkpoint remembered in {state}", remembered))
        audit = run_audit(host, key, known, grace, cosigners, need)
        if audit.checkpoint is None and not audit.findings:
            raise CliFailure(f"the store {host.where} has no transparency log", 3)
        if audit.history_holds and audit.note is not None:
            _remember(state, audit.note)
        if as_json:  # followed: one JSON line each
            emit_json(log_json(audit), compact=follow)
        else:
            show_audit(audit)
        if audit.findings:
            ctx.exit(max(finding.exit_code for finding in audit.findings))
        return audit

    audit = check()
    if follow:
        _follow(host, key.key_id, audit.note, interval, check)


def _follow(
    host: LogHost,
    key_id: str,
    seen: bytes | None,
    interval: float,
    check: Callable[[], object],
) -> None:
    """Run ``check`` each time the log's checkpoint changes, until a signal.

    SIGINT and SIGTERM end the watch between two looks (exit 0); ``check``
    exits on its own with a finding's code.
    """
    import signal
    import threading

    stop = threading.Event()
    previous = {
        number: signal.signal(number, lambda *_: stop.set())
        for number in (signal.SIGINT, signal.SIGTERM)
    }
    try:
        tlog = host.log(key_id)
        while not stop.wait(interval):
            note = tlog.checkpoint_note()
            if note != seen:
                check()
                seen = note
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)


def run_audit(
    host: LogHost,
    key: PublicKey,
    known: list[tuple[str, bytes]],
    grace: float,
    witnesses: Sequence[Cosigner] = (),
    quorum: int = 0,
) -> LogAudit:
    """Audit the store's log and records with the log's public ``key``."""
    from ..tlog.audit import audit_log

    host.store.close()  # what this process queued is in the log
    return audit_log(
        host.log(key.key_id),
        key,
        known=known,
        records=host.records(key),
        grace=grace,
        witnesses=witnesses,
        quorum=quorum,
    )


def audit_beside_records(
    key_files: tuple[str, ...], key_dirs: tuple[str, ...]
) -> LogAudit | None:
    """The log audit ``verify --all`` adds, or None: no log, or no key for it.

    The log's key is the public key, among those given, whose id its origin
    names; none remembered checkpoint is used (that is ``log verify``'s).
    """
    from ..record.keys import PublicKey
    from ..tlog.audit import log_origin

    host = LogHost(open_store())
    logs = host.logs()
    if not logs:
        return None
    paths = [*key_files]
    for folder in key_dirs:
        paths.extend(str(path) for path in sorted(Path(folder).glob("*.pub")))
    origins = {tlog.tree_head().origin for tlog in logs}
    for path in paths:
        key = PublicKey.load(path)
        if log_origin(key.key_id) in origins:
            return run_audit(host, key, [], 60.0)
    origin = ", ".join(sorted(origins))
    from .output import note

    note(
        f"The store keeps a transparency log ({origin}); give its key "
        "(--key) to check it too."
    )
    return None


def log_json(audit: LogAudit) -> JSONObject:
    """An audit as ``--json`` prints it."""
    head = audit.checkpoint
    findings: list[JSONValue] = [
        {
            "name": f.name,
            "executionId": f.execution_id,
            "detail": f.detail,
            "exitCode": f.exit_code,
        }
        for f in audit.findings
    ]
    return {
        "origin": None if head is None else head.origin,
        "size": None if head is None else head.size,
        "root": None if head is None else base64.b64encode(head.root).decode(),
        "leaves": audit.leaves,
        "records": audit.records,
        "findings": findings,
        "valid": not audit.findings,
    }


def show_audit(audit: LogAudit) -> None:
    """The findings, then one line: the log, its size, the verdict."""
    for finding in audit.findings:
        click.echo(
            f"{click.style(finding.name, fg='red')}: "
            f"{finding.execution_id or 'log'}: {finding.detail}"
        )
    head = audit.checkpoint
    verdict = (
        click.style("VALID", fg="green")
        if not audit.findings
        else click.style(f"{len(audit.findings)} findings", fg="red")
    )
    named = "the log" if head is None else f"{head.origin} at size {head.size}"
    click.echo(
        f"Log: {named}, {audit.leaves} leaves, {audit.records} records - {verdict}"
    )


def _state_path(origin: str) -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.expanduser("~/.local/state")
    name = "".join(c if c.isalnum() or c in "-." else "_" for c in origin)
    return Path(base) / "intentusnet" / "log" / f"{name}.checkpoint"


def _read_state(path: Path, what: str) -> bytes | None:
    try:
        with open(path, "rb") as file:
            return file.read(_MAX_PROOF)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CliFailure(
            f"cannot read the {what} {path}: {exc.strerror or exc}", USAGE
        ) from None


def _remember(path: Path, note: bytes) -> None:
    """Write the accepted checkpoint to ``path`` whole (a temporary file, renamed)."""
    from .._util.files import make_dirs

    try:
        make_dirs(path.parent)
        temp = path.with_name(path.name + ".tmp")
        temp.write_bytes(note)
        os.replace(temp, path)
    except OSError as exc:
        raise CliFailure(
            f"cannot write the log state {path}: {exc.strerror or exc}", 1
        ) from None


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            data = file.read(_MAX_PROOF + 1)
    except OSError as exc:
        raise CliFailure(
            f"cannot read proof file {path}: {exc.strerror or exc}", USAGE
        ) from None
    if len(data) > _MAX_PROOF:
        raise CliFailure(f"{path} is not a proof file (larger than 1 MiB)", USAGE)
    return data
