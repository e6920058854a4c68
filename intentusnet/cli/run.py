"""``intentusnet run``: route one envelope through an application's router."""

from __future__ import annotations

from typing import Final

import click

from .application import app_option, running_app
from .output import emit_json
from .params import read_json_object

#: Exit code of an execution that ran and failed (as ``rerun``'s; docs/cli.md).
EXECUTION_FAILED: Final = 8


@click.command()
@app_option("The IntentRouter to use, e.g. myapp.routing:router.")
@click.argument("envelope_file", metavar="ENVELOPE_FILE")
@click.option("--json", "as_json", is_flag=True, help="Print compact one-line JSON.")
def run(app_ref: str, envelope_file: str, as_json: bool) -> None:
    """Route the envelope in ENVELOPE_FILE (- for stdin) and print the response.

    With --store (or INTENTUSNET_STORE) the execution is recorded there: a
    router without a store is given it, a router recording elsewhere is
    refused (exit 2). Without, the router records as the application
    configured it. The response is printed either way; when the execution
    failed (its status is error) the command exits 8.
    """
    envelope = read_json_object(envelope_file)
    with running_app(app_ref) as router:
        response = router.route_intent(envelope)
    emit_json(response.to_wire(), compact=as_json)
    if response.status == "error":
        raise click.exceptions.Exit(EXECUTION_FAILED)
