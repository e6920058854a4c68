"""``intentusnet gateway``: a recording reverse proxy for LLM (and any HTTP) APIs.

Needs the ``server`` extra (uvicorn). docs/gateway.md describes it.
"""

from __future__ import annotations

import importlib.util
import sys
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .context import named_store, open_named
from .listening import (
    Deadlines,
    deadline_options,
    listen_address,
    listening_socket,
    need_server,
    serve_on,
)
from .params import (
    LOG_LEVELS,
    USAGE,
    Choice,
    CliFailure,
    keyed_redactor,
    prices_option,
    size_param,
)

if TYPE_CHECKING:
    from ..routing.redact import Redactor
    from ..server.gateway.traffic import AccessLog


@dataclass(frozen=True)
class GatewayOptions:
    """The options of ``intentusnet gateway``, as one value (see its --help)."""

    listen: str
    upstreams: tuple[str, ...]
    mode: str
    store_name: str | None
    shared_cache: bool
    tenant_key_file: str | None
    credentials: tuple[str, ...]
    not_credentials: tuple[str, ...]
    redact: tuple[str, ...]
    redact_headers: tuple[str, ...]
    redact_key_file: str | None
    api_keys_file: str | None
    max_body_size: int
    max_concurrency: int
    access_log: str
    prices_file: str | None
    pace: str
    shutdown_timeout: int
    timeout: float
    body_timeout: float
    keep_alive: int
    max_connections: int
    otel: bool
    log_level: str


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
    type=Choice(["record", "replay", "cache"]),
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
    help="Share answers across credentials (by default each caller's credentials, "
    "headers and query parameters, have their own cache). See docs/gateway.md for "
    "the risk.",
)
@click.option(
    "--credential",
    "credentials",
    multiple=True,
    metavar="NAME",
    help="A header or query-parameter name (or a pattern such as '*session*') that "
    "carries a credential too: never recorded, part of the tenant (repeatable; "
    "docs/redaction.md).",
)
@click.option(
    "--not-credential",
    "not_credentials",
    multiple=True,
    metavar="NAME",
    help="A name (or pattern) the credential rule matches that carries no credential "
    "(repeatable).",
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
    callback=size_param,
    metavar="SIZE",
    help="Refuse larger request bodies (413).",
)
@click.option(
    "--max-concurrency",
    type=click.IntRange(min=0),
    default=256,
    show_default=True,
    metavar="N",
    help="Answer at most N requests at once; more get 503 with Retry-After "
    "(0: no limit).",
)
@click.option(
    "--access-log",
    default="-",
    show_default=True,
    metavar="FILE|-|off",
    help="Where one JSON line per request goes (no credential, no query string): "
    "a file appended to, - for stderr, or off.",
)
@prices_option("the cost saved in /metrics")
@click.option(
    "--pace",
    type=Choice(["fast", "recorded"]),
    default="fast",
    show_default=True,
    help="recorded: answer a recorded event stream at the pace its events came "
    "when it was recorded; fast: at once.",
)
@click.option(
    "--shutdown-timeout",
    type=click.IntRange(min=0),
    default=30,
    show_default=True,
    metavar="SECONDS",
    help="On SIGTERM or SIGINT, wait this long for answers and streams in flight.",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="How long an upstream may take to answer, or between two chunks (504).",
)
@deadline_options
@click.option(
    "--otel",
    is_flag=True,
    help="Send OpenTelemetry spans over OTLP/HTTP: a server span per request (its "
    "parent the caller's traceparent), a chat MODEL span per upstream call. The "
    "standard OTEL_EXPORTER_OTLP_* variables say where (default "
    "http://localhost:4318/v1/traces). Needs the otel extra.",
)
@click.option(
    "--log-level",
    type=Choice(LOG_LEVELS),
    default="info",
    show_default=True,
    help="The least severe log line written (every line is a JSON object).",
)
def gateway(**given: Any) -> None:  # the options: typed by GatewayOptions
    """Forward /NAME/... to each --upstream NAME=URL, recording every call.

    Clients point their SDK's base URL at http://HOST:PORT/NAME. Requests are
    hashed, redacted, recorded and answered exactly as the httpx recording
    transports do, into the same store. Runs until SIGINT or SIGTERM.
    """
    options = GatewayOptions(**given)
    need_server("gateway", "starlette", "uvicorn")
    if options.otel and not _have(_OTEL_MODULES):
        raise CliFailure(
            "--otel needs the OpenTelemetry SDK and its OTLP/HTTP exporter: "
            "pip install 'intentusnet[otel]'",
            USAGE,
        )

    # What the command line says wrong is said before the gateway is imported.
    from ..server.auth import KeyRing, check_bind
    from ..server.gateway.upstream import upstreams_of

    host, port = listen_address(options.listen)
    limits = Deadlines(
        options.body_timeout, options.keep_alive, options.max_connections
    )
    redactor = _redactor(options)
    try:
        found = upstreams_of(options.upstreams)
        keys = KeyRing.from_env({}, keys_file=options.api_keys_file)
        check_bind(host, keys)
    except (ValueError, OSError) as exc:
        raise CliFailure(str(exc), USAGE) from exc

    from ..cache.prices import price_table
    from ..integrations.credentials import CredentialRule
    from ..integrations.httpx import TransportMode
    from ..server.gateway import GatewaySettings, create_gateway
    from ..server.gateway.logs import FIELDS, log_config
    from ..server.gateway.settings import TENANT_KEY_FILE, Pace, tenant_key
    from ..store.file import FileExecutionStore

    prices = price_table(options.prices_file)  # bad: exit 2
    store = open_named(
        options.store_name or named_store(), create=options.mode != "replay"
    )
    try:
        key = None
        if not options.shared_cache:
            if options.tenant_key_file is None and not isinstance(
                store, FileExecutionStore
            ):
                raise CliFailure(
                    "give --tenant-key-file (or --shared-cache) for a store that "
                    "is not a directory",
                    USAGE,
                )
            path = Path(options.tenant_key_file or store.root / TENANT_KEY_FILE)
            key = tenant_key(path, create=options.tenant_key_file is None)
        settings = GatewaySettings(
            found,
            mode=TransportMode.parse(options.mode),
            tenant_key=key,
            max_body=options.max_body_size,
            timeout=options.timeout,
            redactor=redactor,
            keys=keys,
            max_concurrency=options.max_concurrency or None,
            prices=prices,
            pace=Pace(options.pace),
            credentials=CredentialRule(options.credentials, options.not_credentials),
        )
    except (ValueError, OSError) as exc:
        store.close()
        raise CliFailure(str(exc), USAGE) from None
    except BaseException:
        store.close()
        raise
    import logging.config  # only a running gateway logs: --help never imports it

    with ExitStack() as stack:
        stack.callback(store.close)
        listening = stack.enter_context(
            listening_socket(host, port, "choose another with --listen HOST:PORT")
        )
        log = _access_log(options.access_log, stack)
        logging_config = log_config(options.log_level)
        logging.config.dictConfig(logging_config)  # JSON from the first line
        provider = None
        if options.otel:
            from ..server.gateway.spans import otlp_provider

            provider = otlp_provider()
            stack.callback(provider.shutdown)  # what is batched is sent
        app = create_gateway(store, settings, access_log=log, tracer_provider=provider)
        url = f"http://{host}:{port}"
        shown = ", ".join(f"/{n}/ -> {u.url}" for n, u in settings.upstreams.items())
        logging.getLogger("intentusnet.gateway").info(
            "intentusnet gateway: %s mode on %s (%s)",
            options.mode,
            url,
            shown,
            extra={
                FIELDS: {
                    "event": "started",
                    "mode": options.mode,
                    "url": url,
                    "upstreams": {n: u.url for n, u in settings.upstreams.items()},
                    "otel": options.otel,
                }
            },
        )
        serve_on(
            listening,
            app,
            limits,
            "the gateway could not start (see the log above)",
            log_config=logging_config,
            log_level=options.log_level,
            access_log=False,  # a URL's query may hold a key: never logged
            date_header=False,  # the upstream's (or the record's) is served
            timeout_graceful_shutdown=options.shutdown_timeout,
        )


#: What ``--otel`` needs: the SDK and the OTLP/HTTP exporter.
_OTEL_MODULES = ("opentelemetry.sdk", "opentelemetry.exporter.otlp.proto.http")


def _have(modules: tuple[str, ...]) -> bool:
    """Whether every one of ``modules`` can be imported (none is imported)."""
    try:
        return all(importlib.util.find_spec(m) is not None for m in modules)
    except ModuleNotFoundError:  # a parent package is missing
        return False


def _access_log(target: str, stack: ExitStack) -> AccessLog | None:
    """The access log ``--access-log`` names (a file stays open until the end)."""
    from ..server.gateway.traffic import AccessLog

    if target == "off":
        return None
    if target == "-":
        return AccessLog(sys.stderr)
    try:
        stream = stack.enter_context(open(target, "a", encoding="utf-8"))  # noqa: SIM115
    except OSError as exc:
        raise CliFailure(f"--access-log {target!r}: {exc.strerror}", USAGE) from None
    return AccessLog(stream)


def _redactor(options: GatewayOptions) -> Redactor | None:
    """The ``Redactor`` of the --redact options, if any."""
    paths, headers = options.redact, options.redact_headers
    if not paths and not headers:
        return None

    def make(key: bytes) -> Redactor:
        # Imported once the key file is known: a missing one is said at once.
        from ..routing.redact import Redactor

        return Redactor(key, http_body=paths, http_headers=headers)

    return keyed_redactor(options.redact_key_file, make)
