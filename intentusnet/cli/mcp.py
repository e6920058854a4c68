"""``intentusnet mcp proxy``: record, replay or cache an MCP server's calls.

The proxy speaks MCP on its own stdin and stdout, so a client starts it where
it would start the server: ``intentusnet mcp proxy --mode record -- SERVER...``.
Only protocol messages go to stdout; what the proxy has to say goes to stderr.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

import click

from .context import LAST, named_store, open_named
from .listening import (
    Deadlines,
    deadline_options,
    listen_address,
    listening_socket,
)
from .output import note
from .params import USAGE, Choice, CliFailure, keyed_redactor

#: The exit code of a session the upstream cut short (or that never started).
UPSTREAM_EXITED: Final = 1

if TYPE_CHECKING:
    from ..integrations.mcp.calls import RecordedCalls
    from ..integrations.mcp.listen import Gate
    from ..integrations.mcp.proxy import Upstream
    from ..integrations.mcp.session import Endpoint
    from ..routing.redact import Redactor


@click.group()
def mcp() -> None:
    """Model Context Protocol: record and replay the tool calls of an MCP server."""


@mcp.command(context_settings={"allow_interspersed_args": False})
@click.option(
    "--store",
    "store_name",
    metavar="PATH|URL",
    help="Execution store (overrides the global --store).",
)
@click.option(
    "--mode",
    type=Choice(["record", "replay", "cache"]),
    default="record",
    show_default=True,
    help="record: forward and record every call; replay: answer from a record "
    "with no upstream; cache: answer recorded calls, forward and record the rest.",
)
@click.option(
    "--side-effect",
    "side_effects",
    multiple=True,
    metavar="TOOL",
    help="A tool never answered from the cache (repeatable); tools the server "
    "marks destructiveHint are too.",
)
@click.option(
    "--record",
    "record_id",
    default=LAST,
    show_default=True,
    metavar="ID|last",
    help="The one session record replay and cache answer from; 'last': any "
    "recorded session of the same upstream, the newest first (of the newest "
    "session's upstream, in a replay given none).",
)
@click.option(
    "--force", is_flag=True, help="Replay even a record that is not replayable."
)
@click.option(
    "--upstream-url",
    "url",
    metavar="URL",
    help="A streamable-HTTP MCP server to forward to, instead of -- UPSTREAM.",
)
@click.option(
    "--header",
    "headers",
    multiple=True,
    metavar="'NAME: VALUE'",
    help="A header sent to --upstream-url (repeatable); never recorded.",
)
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="PATH",
    help="A path into every call's arguments and results whose value is recorded "
    "as a keyed marker (repeatable; docs/redaction.md). Needs --redact-key-file.",
)
@click.option(
    "--redact-key-file",
    "redact_key_file",
    envvar="INTENTUSNET_REDACT_KEY_FILE",
    show_envvar=True,
    metavar="FILE",
    type=click.Path(exists=True, dir_okay=False),
    help="The redaction key (at least 16 bytes), the same for every session.",
)
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help="Serve clients over streamable HTTP at http://HOST:PORT/mcp instead of "
    "stdio: any number of sessions, one record each, until SIGINT or SIGTERM.",
)
@click.option(
    "--api-keys-file",
    envvar="INTENTUSNET_API_KEYS_FILE",
    show_envvar=True,
    type=click.Path(dir_okay=False),
    metavar="PATH",
    help="With --listen: API keys, one a line (ro:KEY is read-only: answered from "
    "the records only), as serve's; clients send 'Authorization: Bearer KEY'. "
    "Needed to listen on an address other than loopback.",
)
@click.option(
    "--idle",
    type=click.FloatRange(min=0, min_open=True),
    default=600.0,
    show_default=True,
    metavar="SECONDS",
    help="With --listen: a session whose client sends nothing for this long ends "
    "(its record is closed).",
)
@click.option(
    "--allow-host",
    "allow_hosts",
    multiple=True,
    metavar="HOST[:PORT]",
    help="With --listen: a Host header accepted besides the loopback names and the "
    "address listened on (DNS rebinding protection; repeatable).",
)
@deadline_options
@click.argument("upstream", nargs=-1, metavar="-- UPSTREAM...")
def proxy(
    store_name: str | None,
    mode: str,
    side_effects: tuple[str, ...],
    record_id: str,
    force: bool,
    url: str | None,
    headers: tuple[str, ...],
    redact: tuple[str, ...],
    redact_key_file: str | None,
    listen: str | None,
    api_keys_file: str | None,
    idle: float,
    allow_hosts: tuple[str, ...],
    body_timeout: float,
    keep_alive: int,
    max_connections: int,
    upstream: tuple[str, ...],
) -> None:
    """Sit between an MCP client and the stdio MCP server UPSTREAM.

    Each session is one execution record of intent mcp.session; each
    tools/call, resources/read and prompts/get is a step keyed by its name
    and the canonical hash of its arguments, answered in replay and cache mode
    by any recorded session of the same upstream. A replay needs no UPSTREAM
    (given, it names the sessions to answer from) and never starts it.
    """
    # here, not at the top: `intentusnet --help` imports this module
    import asyncio
    import time
    from signal import SIGINT, SIGTERM

    from ..hashing import compute_hash
    from ..integrations.mcp.listen import Listener, ListenSession
    from ..integrations.mcp.proxy import (
        SessionIncomplete,
        http_envelope,
        record_session,
        replay_session,
        session_envelope,
    )
    from ..integrations.mcp.sources import recorded_calls
    from ..integrations.mcp.stdio import StdioClient, UpstreamProcess

    if url is not None and upstream:
        raise CliFailure("give --upstream-url or -- UPSTREAM, not both", USAGE)
    if mode != "replay" and not upstream and url is None:
        raise CliFailure(
            "give the upstream server's command after -- (or --upstream-url)", USAGE
        )
    sent = _headers(headers)
    address = None if listen is None else listen_address(listen)
    gate = None if address is None else _gate(address[0], api_keys_file)
    limits = Deadlines(body_timeout, keep_alive, max_connections)
    redactor = _redactor(redact, redact_key_file)
    envelope = None
    if url is not None:
        envelope = http_envelope(url)
    elif upstream:
        envelope = session_envelope(upstream)
    store = open_named(store_name or named_store(), create=mode != "replay")
    try:
        upstream_hash = None if envelope is None else compute_hash(envelope)

        def answers(replay: bool) -> RecordedCalls | None:
            """The recorded calls one session answers from.

            Asked again for each session: a cache session answers what the
            sessions before it learned.
            """
            if mode == "record" and not replay:
                return None
            return recorded_calls(
                store,
                upstream_hash,
                None if record_id == LAST else record_id,
                force=force,
                required=replay,
                clock=time.time if mode == "cache" and not replay else None,
            )

        # a replay with nothing to answer from fails before any I/O
        answers(mode == "replay")

        async def one(client: Endpoint, read_only: bool = False) -> str:
            """Record or replay one session with ``client``; its summary.

            A read-only caller's session is replayed, whatever the mode.
            """
            replay = mode == "replay" or read_only
            calls = answers(replay)
            if replay:
                assert calls is not None
                done = await replay_session(
                    client, calls, side_effects=set(side_effects), redactor=redactor
                )
                return f"replayed from {_sessions(calls)}: {_counts(done)}"
            assert envelope is not None
            server: Upstream
            if url is not None:
                from ..integrations.mcp.http import HttpUpstream

                passed = statuses = None
                if isinstance(client, ListenSession):  # its headers, passed on
                    passed = client.passed_on
                    statuses = client.status  # and the upstream's error statuses
                server = HttpUpstream(url, sent, passed=passed, statuses=statuses)
            else:
                server = UpstreamProcess(upstream)
            try:
                answer = await record_session(
                    store,
                    client,
                    server,
                    envelope,
                    side_effects=set(side_effects),
                    calls=calls,
                    redactor=redactor,
                )
            except SessionIncomplete as cut:
                raise CliFailure(
                    f"{cut} ({_counts(cut.counts)}); "
                    "--mode replay --force serves the calls it holds",
                    UPSTREAM_EXITED,
                ) from None
            except OSError as exc:
                raise CliFailure(
                    f"could not start the upstream {upstream[0]!r}: {exc}",
                    UPSTREAM_EXITED,
                ) from None
            shown = answer.payload if answer.error is None else answer.error.message
            return (
                f"recorded {answer.metadata.execution_id} ({answer.status}): "
                f"{_counts(shown)}"
            )

        async def run() -> str:
            client = StdioClient()
            await client.open()
            try:
                return await one(client)
            finally:
                await client.close()

        async def each(client: ListenSession) -> None:
            try:
                note(f"intentusnet mcp proxy: {await one(client, client.read_only)}")
            except CliFailure as failed:  # this session's; the others go on
                note(f"intentusnet mcp proxy: {failed.message}")
                raise

        async def serve(host: str, port: int) -> str:
            listener = Listener(
                host,
                port,
                each,
                idle_seconds=idle,
                gate=gate,
                listening=listening,
                allow_hosts=allow_hosts,
                deadlines=limits,
                upstream_statuses=url is not None or mode == "replay",
            )
            await listener.open()
            loop = asyncio.get_running_loop()
            for signal in (SIGINT, SIGTERM):
                loop.add_signal_handler(signal, listener.stop)
            note(f"intentusnet mcp proxy: listening on {listener.url}")
            try:
                await listener.serve()
            finally:
                await listener.close()
            return "stopped"

        if address is None:
            note(f"intentusnet mcp proxy: {asyncio.run(run())}")
        else:
            listening = listening_socket(
                *address, "choose another with --listen HOST:PORT (port 0: any)"
            )
            with listening:
                note(f"intentusnet mcp proxy: {asyncio.run(serve(*address))}")
    finally:
        store.close()


def _sessions(calls: RecordedCalls) -> str:
    """The sessions a replay answered from, for its summary line."""
    ids = list(calls.answered_from) or [calls.execution_id]
    more = f" and {len(ids) - 1} other sessions" if len(ids) > 1 else ""
    return f"{ids[0]}{more}"


def _counts(done: object) -> str:
    if isinstance(done, dict):
        return ", ".join(f"{value} {key}" for key, value in done.items())
    return str(done)


def _redactor(paths: tuple[str, ...], key_file: str | None) -> Redactor | None:
    """The ``Redactor`` of ``--redact`` and ``--redact-key-file``, if any."""
    from ..routing.redact import Redactor

    if not paths:
        return None
    return keyed_redactor(
        key_file, lambda key: Redactor(key, args={"*": paths}, outputs={"*": paths})
    )


def _gate(host: str, keys_file: str | None) -> Gate | None:
    """What ``--listen`` lets each caller do: the keys of ``serve``, if any.

    Without keys only a loopback address may be listened on.
    """
    from ..integrations.mcp.listen import Allowed
    from ..server.auth import Access, KeyRing, check_bind

    try:
        keys = KeyRing.from_env(keys_file=keys_file)
        check_bind(host, keys)
    except (ValueError, OSError) as exc:
        raise CliFailure(str(exc), USAGE) from exc
    if not keys:
        return None

    def gate(authorization: str | None) -> Allowed | None:
        access = keys.bearer_access(authorization)
        if access is None:
            return None
        return Allowed.READ if access is Access.READ else Allowed.ALL

    return gate


def _headers(given: tuple[str, ...]) -> dict[str, str]:
    """``--header 'Name: value'`` options as a mapping."""
    found: dict[str, str] = {}
    for text in given:
        name, colon, value = text.partition(":")
        if not colon or not name.strip():
            raise CliFailure(f"--header takes 'NAME: VALUE', not {text!r}", USAGE)
        found[name.strip()] = value.strip()
    return found
