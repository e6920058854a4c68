"""``intentusnet serve``: the application's router as an HTTP service.

Needs the ``server`` extra (FastAPI and uvicorn). With ``--workers N`` uvicorn
starts N processes; each imports the application and builds its own app from
the settings this command leaves in the environment (:func:`worker_app`),
``INTENTUSNET_STORE`` among them when the command line names a store.

With ``--recover`` (the default where the store keeps resume links) every
worker also finishes interrupted executions of the application's intents in
the background (``Recovery``, see docs/durability.md); claims are the store's,
so several workers, on several hosts, may scan one store.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

import click

from .application import app_option, open_app
from .context import named_store
from .keys import key_options, key_ring
from .listening import Deadlines, deadline_options, need_server
from .params import LOG_LEVELS, USAGE, Choice, CliFailure, prices_option, size_param

if TYPE_CHECKING:
    from .._util.deadlines import BodyDeadline, UvicornLimits
    from ..routing.router import IntentRouter

#: Where the command hands its settings to worker processes.
SETTINGS_ENV: Final = "INTENTUSNET_SERVE_SETTINGS"


# A pattern, compiled (and cached by ``re``) on first use: ``intentusnet --help``
# imports this module to list the command, and should not compile it.
@click.command()
@app_option("The IntentRouter to serve, e.g. myapp.routing:router.")
@click.option(
    "--host",
    default="127.0.0.1",
    show_default=True,
    help="Address to listen on; other than loopback only with an API key.",
)
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=1,
    show_default=True,
    help="Worker processes.",
)
@click.option(
    "--api-keys-file",
    type=click.Path(dir_okay=False),
    envvar="INTENTUSNET_API_KEYS_FILE",
    show_envvar=True,
    metavar="PATH",
    help="File of API keys, one a line; ro:KEY is read-only.",
)
@click.option(
    "--max-body-size",
    default="1MiB",
    show_default=True,
    callback=size_param,
    metavar="SIZE",
    help="Refuse larger request bodies (413).",
)
@click.option(
    "--graceful-timeout",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    metavar="SECONDS",
    help="On shutdown, wait this long for executions in flight.",
)
@click.option("--log-level", type=Choice(LOG_LEVELS), default="info", show_default=True)
@prices_option(
    "the cost LLM calls spent and hits avoided in GET /v1/savings, /metrics and "
    "the explorer at /ui"
)
@click.option(
    "--recover/--no-recover",
    default=None,
    help=(
        "Finish interrupted executions of the app's intents in the background, "
        "in every worker. [default: on when the store keeps resume links]"
    ),
)
@click.option(
    "--recover-after",
    type=click.FloatRange(min=0),
    default=5.0,
    show_default=True,
    metavar="SECONDS",
    help="Grace period: resume an interrupted execution only this long after "
    "it was opened.",
)
@key_options
@deadline_options
def serve(
    app_ref: str,
    host: str,
    port: int,
    workers: int,
    api_keys_file: str | None,
    max_body_size: int,
    graceful_timeout: float,
    log_level: str,
    prices_file: str | None,
    recover: bool | None,
    recover_after: float,
    key_files: tuple[str, ...],
    key_dirs: tuple[str, ...],
    require_signature: bool,
    body_timeout: float,
    keep_alive: int,
    max_connections: int,
) -> None:
    """Serve the router of MODULE:ATTR over HTTP until stopped (Ctrl-C, SIGTERM).

    With --store (or INTENTUSNET_STORE) every worker records there, as run
    does. With --key or --keys the explorer's record pages say whether each
    record's signatures verify with those public keys.
    """
    need_server(
        "serve", "fastapi", "uvicorn", "jinja2", "prometheus_client", "fastapi_offline"
    )
    from ..cache.prices import PriceTable
    from ..server.auth import KeyRing, check_bind

    if prices_file:
        PriceTable.load(prices_file)  # a bad table stops here (exit 2)
    try:
        keys = KeyRing.from_env(keys_file=api_keys_file)
        check_bind(host, keys)
    except (ValueError, OSError) as exc:
        raise CliFailure(str(exc), USAGE) from exc
    key_ring(key_files, key_dirs, require_signature)  # refuse bad keys here
    limits = Deadlines(body_timeout, keep_alive, max_connections)
    settings = {  # what worker_app builds the app from, in every worker
        "app": app_ref,
        "keysFile": api_keys_file,
        "maxBody": max_body_size,
        "drain": graceful_timeout,
        "prices": prices_file,
        "recover": recover,
        "recoverAfter": recover_after,
        "bodyTimeout": body_timeout,
        "signatureKeys": {
            "files": [os.path.abspath(f) for f in key_files],
            "dirs": [os.path.abspath(d) for d in key_dirs],
            "required": require_signature,
        },
    }
    with _shared_metrics(workers):
        _run(settings, host, port, workers, log_level, limits.uvicorn_settings())


@contextmanager
def _shared_metrics(workers: int) -> Iterator[None]:
    """With several workers, a fresh directory where they add up their metrics.

    ``prometheus_client`` reads ``PROMETHEUS_MULTIPROC_DIR`` when first imported,
    so it is set before any worker starts (or the application is imported); a
    directory the caller set already is used as it is, and kept.
    """
    from ..server.metrics import MULTIPROCESS_ENV

    if workers == 1 or os.environ.get(MULTIPROCESS_ENV):
        yield
        return
    with tempfile.TemporaryDirectory(prefix="intentusnet-metrics-") as directory:
        os.environ[MULTIPROCESS_ENV] = directory
        try:
            yield
        finally:
            del os.environ[MULTIPROCESS_ENV]


def _run(
    settings: dict[str, Any],
    host: str,
    port: int,
    workers: int,
    log_level: str,
    limits: UvicornLimits,
) -> None:
    import json

    import uvicorn

    # Fail here, with a clear message, not in a worker. This also leaves the
    # named store in the environment, where the workers find it.
    router, _ = open_app(settings["app"], named_store())
    settings["recover"] = _recovers(router, settings["recover"], settings["app"])
    os.environ[SETTINGS_ENV] = json.dumps(settings)
    app: BodyDeadline | str = worker_app() if workers == 1 else f"{__name__}:worker_app"
    try:
        uvicorn.run(
            app,
            factory=workers > 1,
            host=host,
            port=port,
            workers=workers,
            log_level=log_level,
            timeout_graceful_shutdown=math.ceil(settings["drain"]) or None,
            server_header=False,
            proxy_headers=False,
            **limits,
        )
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise CliFailure(
                f"the server could not start on {host}:{port} (see the log above)", 1
            ) from exc


def _recovers(router: IntentRouter, asked: bool | None, app_ref: str) -> bool:
    """Whether the workers run recovery: as asked, else if the store can.

    Raises:
        CliFailure: ``--recover`` for a router whose store keeps no resume
            links (exit 2).
    """
    from ..store.durable import DurableStore

    durable = isinstance(router.store, DurableStore)
    if asked and not durable:
        kind = type(router.store).__name__ if router.store is not None else "no store"
        raise CliFailure(
            f"--recover: {app_ref} records to {kind}, which keeps no resume links; "
            "use --no-recover",
            USAGE,
        )
    return durable if asked is None else asked


def worker_app() -> BodyDeadline:
    """Build the app from the settings ``serve`` left in the environment.

    The app is behind the body deadline ``serve --body-timeout`` set.

    The router records to the store ``serve`` was given (``INTENTUSNET_STORE``),
    as in the command's own process; the app closes that store on shutdown.
    """
    import json

    from .._util.deadlines import BodyDeadline
    from ..cache.prices import price_table
    from ..routing.recovery import Recovery
    from ..server import KeyRing, create_app

    settings = json.loads(os.environ[SETTINGS_ENV])
    prices = settings.get("prices")
    router, _ = open_app(settings["app"], os.environ.get("INTENTUSNET_STORE"))
    trusted = settings.get("signatureKeys") or {}
    recovery = None
    if settings.get("recover"):
        recovery = Recovery(router, grace=float(settings["recoverAfter"]))
    app = create_app(
        router,
        keys=KeyRing.from_env(keys_file=settings["keysFile"]),
        max_body_bytes=int(settings["maxBody"]),
        drain_timeout=float(settings["drain"]),
        close_router=True,
        prices=price_table(prices),
        signature_keys=key_ring(
            tuple(trusted.get("files", ())),
            tuple(trusted.get("dirs", ())),
            bool(trusted.get("required", False)),
        ),
        recovery=recovery,
        app_ref=settings["app"],
    )
    return BodyDeadline(app, float(settings["bodyTimeout"]))
