"""``signal``: deliver a signal to an execution that waits for it (or will)."""

from __future__ import annotations

import click

from .context import open_store
from .output import emit_json


@click.command()
@click.argument("execution_id", metavar="ID")
@click.argument("name", metavar="NAME")
@click.argument("payload_text", metavar="JSON", required=False)
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
def signal(
    execution_id: str, name: str, payload_text: str | None, as_json: bool
) -> None:
    """Send signal NAME with the JSON payload JSON (default null) to execution ID.

    Kept in the store for the execution until a ctx.wait_for(NAME) takes it
    (one that has not begun yet too); an execution waiting for it is resumed
    by the next recovery scan (intentusnet serve's, or recover --once).
    Prints the signal's id. A payload that is not JSON or over 64 KiB, or a
    blank name, is exit 2; an execution that finished, or that keeps 100
    signals already, exit 4; an unknown one exit 3. Nothing is written then.
    """
    import getpass

    import orjson

    from ..errors import InvalidSignal
    from ..routing.durable import StoreOnly
    from ..routing.signals import signal as send_signal

    payload = None
    if payload_text is not None:
        try:
            payload = orjson.loads(payload_text)
        except orjson.JSONDecodeError as exc:
            raise InvalidSignal(f"the payload is not JSON: {exc}") from None
    store = open_store()
    sent = send_signal(
        StoreOnly(store), execution_id, name, payload, by=getpass.getuser(), via="cli"
    )
    if as_json:
        emit_json(
            {"executionId": execution_id, "name": name, "signal": sent}, compact=True
        )
        return
    click.echo(sent)
    click.echo(f"signal {name!r} kept for {execution_id}", err=True)
