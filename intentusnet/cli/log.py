"""``intentusnet log``: the transparency log's proofs, made and checked (docs/log.md).

``log prove ID`` writes the C2SP tlog-proof of a record's leaf in the log kept in
the file store's ``log/`` folder; ``log verify-proof FILE --key PUB`` checks one
offline, with the log's public key alone. The log is being built: until the
store appends a leaf when a record closes, a log exists only where a program
wrote one with ``TileLog``.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Final

import click

from .context import ExecutionId, open_store
from .output import emit_json
from .params import USAGE, CliFailure

NOT_FOUND: Final = 3
#: Proof files larger than this are not proof files (one is about 3 KB).
_MAX_PROOF: Final = 1024 * 1024


@click.group()
def log() -> None:
    """Prove records are in the transparency log, and check proofs offline."""


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
    from ..store import FileExecutionStore
    from ..tlog.leaf import LogLeaf
    from ..tlog.log import TileLog

    store = open_store()
    if not isinstance(store, FileExecutionStore):
        raise CliFailure("the transparency log lives in a file store's folder", USAGE)
    log_dir = store.root / "log"
    tlog = TileLog(log_dir)
    index = tlog.find(
        lambda leaf: LogLeaf.from_bytes(leaf).execution_id == execution_id
    )
    if index is None:
        raise CliFailure(
            f"record {execution_id} has no leaf in the log {log_dir} "
            f"({tlog.size} leaves)",
            NOT_FOUND,
        )
    data = tlog.proof_of(index).to_bytes()
    if out == "-":
        click.echo(data, nl=False)
        return
    try:
        Path(out).write_bytes(data)
    except OSError as exc:
        raise CliFailure(f"cannot write {out}: {exc.strerror or exc}", USAGE) from None


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
    from ..tlog.proof import parse_proof

    key = PublicKey.load(key_file)
    proof = parse_proof(_read(proof_file))
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
