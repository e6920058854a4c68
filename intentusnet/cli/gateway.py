"""``intentusnet gateway``: a recording reverse proxy for LLM (and any HTTP) APIs.

Needs the ``server`` extra (uvicorn). docs/gateway.md describes it.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .context import named_store, open_named
from .output import note
from .params import USAGE, CliFailure, keyed_redactor
from .serve import parse_size

if TYPE_CHECKING:
    from ..routing.redact import Redactor


def _size(ctx: click.Context, param: click.Parameter, value: str) -> int:
    try:
        return parse_size(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc), ctx, param) from None


@click.command()
@click.option(
    "--listen",
    default="127.0.0.1:8788",
    show_default=True,
    metavar="HOST:PORT",
    help="Address to listen on; other than loopback only with --api-keys-file.",
)
@click.option(
    "--upstream",
    "upstreams",
    multiple=True,
    required=True,
    metavar="NAME=URL",
    help="Forward /NAME/rest to URL/rest (repeatable), e.g. "
    "openai=https://api.openai.com.",
)
@click.option(
    "--mode",
    type=click.Choice(["record", "replay", "cache"]),
    default="cache",
    show_default=True,
    help="record: always forward and record; replay: answer from records only "
    "(404 for an unrecorded request); cache: answer recorded requests, forward "
    "and record the rest.",
)
@click.option(
    "--store",
    "store_name",
    metavar="PATH|URL",
    help="Execution store (overrides the global --store).",
)
@click.option(
    "--shared-cache",
    is_flag=True,
    help="Share answers across credentials (by default each Authorization / "
    "x-api-key value has its own cache). See docs/gateway.md for the risk.",
)
@click.option(
    "--tenant-key-file",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="The key of the credentials' HMAC; by default gateway-tenant.key in "
    "the store's directory, made on first use.",
)
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="PATH",
    help="A JSON body path recorded as a keyed marker (repeatable; "
    "docs/redaction.md). Needs --redact-key-file.",
)
@click.option(
    "--redact-header",
    "redact_headers",
    multiple=True,
    metavar="NAME",
    help="A header whose value is recorded as a keyed marker (repeatable).",
)
@click.option(
    "--redact-key-file",
    envvar="INTENTUSNET_REDACT_KEY_FILE",
    show_envvar=True,
    metavar="FILE",
    type=click.Path(exists=True, dir_okay=False),
    help="The redaction key (at least 16 bytes).",
)
@click.option(
    "--api-keys-file",
    type=click.Path(dir_okay=False),
    metavar="PATH",
    help="The gateway's own API keys, one a line; callers send one in "
    "x-intentusnet-key.",
)
@click.option(
    "--max-body-size",
    default="16MiB",
    show_default=True,
    callback=_size,
    metavar="SIZE",
    help="Refuse larger request bodies (413).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="How long an upstream may take to answer, or between two chunks (504).",
)
@click.option(
    "--log-level",
    type=click.Choice(("critical", "error", "warning", "info", "debug")),
    default="info",
    show_default=True,
)
def gateway(
    listen: str,
    upstreams: tuple[str, ...],
    mode: str,
    store_name: str | None,
    shared_cache: bool,
    tenant_key_file: str | None,
    redact: tuple[str, ...],
    redact_headers: tuple[str, ...],
    redact_key_file: str | None,
    api_keys_file: str | None,
    max_body_size: int,
    timeout: float,
    log_level: str,
) -> None:
    """Forward /NAME/... to each --upstream NAME=URL, recording every call.

    Clients point their SDK's base URL at http://HOST:PORT/NAME. Requests are
    hashed, redacted, recorded and answered exactly as the httpx recording
    transports do, into the same store. Runs until SIGINT or SIGTERM.
    """
    missing = [m for m in ("starlette", "uvicorn") if not importlib.util.find_spec(m)]
    if missing:
        raise CliFailure(
            f"gateway needs {' and '.join(missing)}: pip install 'intentusnet[server]'",
            USAGE,
        )
    import uvicorn

    from ..integrations.httpx import TransportMode
    from ..server.auth import KeyRing, check_bind
    from ..server.gateway import GatewaySettings, create_gateway
    from ..server.gateway.settings import TENANT_KEY_FILE, tenant_key
    from ..store.file import FileExecutionStore

    host, port = _address(listen)
    try:
        keys = KeyRing.from_env({}, keys_file=api_keys_file)
        check_bind(host, keys)
    except (ValueError, OSError) as exc:
        raise CliFailure(str(exc), USAGE) from exc
    redactor = _redactor(redact, redact_headers, redact_key_file)
    store = open_named(store_name or named_store(), create=mode != "replay")
    try:
        key = None
        if not shared_cache:
            if tenant_key_file is None and not isinstance(store, FileExecutionStore):
                raise CliFailure(
                    "give --tenant-key-file (or --shared-cache) for a store that "
                    "is not a directory",
                    USAGE,
                )
            path = Path(tenant_key_file or store.root / TENANT_KEY_FILE)
            key = tenant_key(path, create=tenant_key_file is None)
        settings = GatewaySettings.of(
            upstreams,
            mode=TransportMode.parse(mode),
            tenant_key=key,
            max_body=max_body_size,
            timeout=timeout,
            redactor=redactor,
            keys=keys,
        )
    except (ValueError, OSError) as exc:
        store.close()
        raise CliFailure(str(exc), USAGE) from None
    except BaseException:
        store.close()
        raise
    app = create_gateway(store, settings)
    shown = ", ".join(f"/{n}/ -> {u.url}" for n, u in settings.upstreams.items())
    note(f"intentusnet gateway: {mode} mode on http://{host}:{port} ({shown})")
    try:
        uvicorn.run(
            app,
            host=host,
            port=port,
            log_level=log_level,
            access_log=False,  # a URL's query may hold a key: never logged
            server_header=False,
            date_header=False,  # the upstream's (or the record's) is served
            proxy_headers=False,
            timeout_graceful_shutdown=30,
        )
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise CliFailure(
                f"the gateway could not start on {host}:{port} (see the log above)", 1
            ) from exc
    finally:
        store.close()


def _address(text: str) -> tuple[str, int]:
    """``--listen HOST:PORT`` (``PORT`` alone listens on 127.0.0.1)."""
    host, colon, port = text.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise CliFailure(f"--listen takes HOST:PORT, not {text!r}", USAGE)
    return (host.strip("[]") if colon and host else "127.0.0.1"), int(port)


def _redactor(
    paths: tuple[str, ...], headers: tuple[str, ...], key_file: str | None
) -> Redactor | None:
    """The ``Redactor`` of the --redact options, if any."""
    from ..routing.redact import Redactor

    if not paths and not headers:
        return None
    return keyed_redactor(
        key_file, lambda key: Redactor(key, http_body=paths, http_headers=headers)
    )
