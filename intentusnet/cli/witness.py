"""``intentusnet witness``: cosign logs' checkpoints over HTTP (docs/log.md).

Speaks C2SP tlog-witness ``add-checkpoint`` for the logs given with
``--log ORIGIN=PUBKEY``; remembers each log's last cosigned checkpoint in
``--state DIR``. Needs the ``server`` extra (Starlette and uvicorn).
"""

from __future__ import annotations

from pathlib import Path

import click

from .listening import (
    Deadlines,
    deadline_options,
    listen_address,
    listening_socket,
    need_server,
    serve_on,
)
from .params import USAGE, CliFailure


@click.command()
@click.option(
    "--listen",
    default="127.0.0.1:8768",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to listen on; other than loopback only with --public.",
)
@click.option(
    "--log",
    "logs",
    multiple=True,
    required=True,
    metavar="ORIGIN=PUBKEY",
    help="A log to witness: its origin and its public key file (repeatable).",
)
@click.option(
    "--key",
    "key_file",
    required=True,
    metavar="FILE",
    help="The witness's Ed25519 signing key (PEM, as keys generate writes it).",
)
@click.option(
    "--name",
    default=None,
    metavar="NAME",
    help="The witness's key name in its cosignatures "
    "[default: intentusnet-witness/<key id>].",
)
@click.option(
    "--state",
    "state_dir",
    required=True,
    metavar="DIR",
    help="Where each log's last cosigned checkpoint is kept (one witness a folder).",
)
@click.option(
    "--public",
    is_flag=True,
    help="Allow a non-loopback --listen address: anyone reaching it may submit "
    "checkpoints (each is checked against its log's key; nothing else is).",
)
@deadline_options
def witness(
    listen: str,
    logs: tuple[str, ...],
    key_file: str,
    name: str | None,
    state_dir: str,
    public: bool,
    body_timeout: float,
    keep_alive: int,
    max_connections: int,
) -> None:
    """Cosign each checkpoint of the --log logs that extends the last one cosigned.

    Answers POST /add-checkpoint as C2SP tlog-witness says: 200 and an
    Ed25519 cosignature line, 409 and the size held when the request's old
    size is not it, 422 when the consistency proof fails, 403 for a bad log
    signature, 404 for an unknown log. Prints the witness's verifier key
    (give it to `log publish --witness` and `log verify --witness`). Runs
    until stopped (Ctrl-C, SIGTERM).
    """
    need_server("witness", "starlette", "uvicorn")
    from ..errors import LogError
    from ..record.keys import PublicKey, SigningKey
    from ..server.auth import is_loopback
    from ..tlog.cosignature import Cosigner
    from ..tlog.witness import Witness

    host, port = listen_address(listen)
    if not public and not is_loopback(host):
        raise CliFailure(
            f"refusing to listen on {host!r}: a witness answers anyone who reaches "
            "it; give --public to mean it, or listen on 127.0.0.1",
            USAGE,
        )
    known: dict[str, PublicKey] = {}
    for entry in logs:
        origin, equals, path = entry.partition("=")
        if not equals or not path or not _is_key_name(origin):
            raise CliFailure(f"--log takes ORIGIN=PUBKEY, not {entry!r}", USAGE)
        known[origin] = PublicKey.load(path)
    key = SigningKey.load(key_file)
    name = name or f"intentusnet-witness/{key.key_id.partition(':')[2]}"
    if not _is_key_name(name):
        raise CliFailure(f"--name {name!r}: no spaces or '+'", USAGE)
    limits = Deadlines(body_timeout, keep_alive, max_connections)
    try:
        server_witness = Witness(name, key, known, Path(state_dir))
    except LogError as exc:
        raise CliFailure(str(exc), USAGE) from None
    from ..server.witness import create_witness_app

    try:
        listening = listening_socket(host, port, "choose another with --listen")
        port = listening.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        click.echo(
            f"Witness {Cosigner(name, key.public_key).vkey()} on "
            f"http://{shown}:{port} ({len(known)} logs; Ctrl-C stops)",
        )
        serve_on(
            listening,
            create_witness_app(server_witness),
            limits,
            f"the witness could not start on {shown}:{port}",
            log_level="warning",
        )
    finally:
        server_witness.close()


def _is_key_name(name: str) -> bool:
    """Whether ``name`` may name a log or a witness (signed-note key names)."""
    from ..errors import LogIntegrityError
    from ..tlog.note import check_key_name

    try:
        check_key_name(name)
    except LogIntegrityError:
        return False
    return True
