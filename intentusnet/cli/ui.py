"""``intentusnet ui``: the record explorer over a store, in the browser.

Serves the pages of ``intentusnet serve``'s ``/ui`` alone, read-only, on
loopback only: it routes nothing, needs no application and no key, and opens
nothing remote. Needs the ``server`` extra.
"""

from __future__ import annotations

from typing import Final

import click

from .application import app_option
from .context import open_store
from .keys import key_options, key_ring
from .listening import (
    Deadlines,
    deadline_options,
    listening_socket,
    need_server,
    serve_on,
)
from .params import LOG_LEVELS, Choice, prices_option

#: The explorer's port unless --port says otherwise: not ``serve``'s (8765),
#: nor the one the docs' example agent listens on (8766).
DEFAULT_PORT: Final = 8767


@click.command()
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=DEFAULT_PORT,
    show_default=True,
    help="Port on 127.0.0.1 (0: any free port).",
)
@click.option(
    "--log-level",
    type=Choice(LOG_LEVELS),
    default="warning",
    show_default=True,
)
@app_option(
    "The application's router, named in the commands the pages show "
    "(never imported: the explorer runs nothing).",
    required=False,
)
@prices_option("the cost of LLM calls in the records list and the overview")
@key_options
@deadline_options
def ui(
    port: int,
    log_level: str,
    app_ref: str | None,
    prices_file: str | None,
    key_files: tuple[str, ...],
    key_dirs: tuple[str, ...],
    require_signature: bool,
    body_timeout: float,
    keep_alive: int,
    max_connections: int,
) -> None:
    """Browse the records of --store at http://127.0.0.1:PORT/ui until stopped.

    Read-only, and bound to 127.0.0.1 only. With --key or --keys each
    record's page says whether its signatures verify with those public keys;
    with --prices the list and the overview show what LLM calls cost; with
    --app the commands the pages show name the application.
    Added in 0.1.0.
    """
    need_server("ui", "fastapi", "uvicorn", "jinja2")
    ring = key_ring(key_files, key_dirs, require_signature)
    limits = Deadlines(body_timeout, keep_alive, max_connections)
    from ..cache.prices import price_table

    prices = price_table(prices_file)  # bad: exit 2
    from ..server.ui import create_ui_app

    store = open_store()
    listening = listening_socket(
        "127.0.0.1", port, "choose another with --port (0: any free port)"
    )
    port = listening.getsockname()[1]  # the one picked, for --port 0
    app = create_ui_app(store, signature_keys=ring, app_ref=app_ref, prices=prices)
    click.echo(f"Explorer of {store.root} on http://127.0.0.1:{port}/ui (Ctrl-C stops)")
    serve_on(
        listening,
        app,
        limits,
        f"the explorer could not start on 127.0.0.1:{port}",
        host="127.0.0.1",
        port=port,
        log_level=log_level,
    )
