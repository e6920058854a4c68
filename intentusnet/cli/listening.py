"""Binding a command's listening socket before anything is printed; its limits.

``ui`` and ``gateway`` bind their port here and hand the socket to uvicorn, so
a port in use (or an address this machine does not have) is one line and exit
2, not a banner, the server's log and its own exit code.

Every listening command (``serve``, ``gateway``, ``ui``, ``mcp proxy
--listen``) takes the same ``--body-timeout``, ``--keep-alive`` and
``--max-connections`` (:data:`deadline_options`).
"""

from __future__ import annotations

import errno
import importlib.util
import socket
from typing import Any

import click

from .._util.deadlines import (
    BODY_SECONDS,
    KEEP_ALIVE_SECONDS,
    MAX_CONNECTIONS,
    Deadlines,
)
from .params import USAGE, CliFailure, options

__all__ = [
    "Deadlines",
    "deadline_options",
    "listen_address",
    "listening_socket",
    "need_server",
    "serve_on",
]


def need_server(command: str, *modules: str) -> None:
    """Exit 2 naming those of ``modules`` (the ``server`` extra's) not installed."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        needs = " and ".join(missing)
        hint = "pip install 'intentusnet[server]'"
        raise CliFailure(f"{command} needs {needs}: {hint}", USAGE)


#: ``--body-timeout``, ``--keep-alive`` and ``--max-connections``.
deadline_options = options(
    click.option(
        "--body-timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=BODY_SECONDS,
        show_default=True,
        metavar="SECONDS",
        help="A request body must arrive within this long after its headers "
        "(408 and the connection closed).",
    ),
    click.option(
        "--keep-alive",
        type=click.IntRange(min=1),
        default=KEEP_ALIVE_SECONDS,
        show_default=True,
        metavar="SECONDS",
        help="Close a connection idle this long between requests.",
    ),
    click.option(
        "--max-connections",
        type=click.IntRange(min=2),
        default=MAX_CONNECTIONS,
        show_default=True,
        metavar="N",
        help="With N connections open, answer a request 503.",
    ),
)


def listening_socket(host: str, port: int, hint: str) -> socket.socket:
    """A socket listening on ``host:port``, or a usage error saying why not.

    Args:
        host: an IPv4 or IPv6 address, or a name.
        port: the port; 0 picks a free one.
        hint: what the user can do instead, e.g. ``choose another with --port``.

    Raises:
        CliFailure: the address cannot be listened on (exit 2).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named, not left 0: asyncio sets TCP_NODELAY only on sockets
    # that say they are TCP, and without it a response written in two parts
    # (head, then body) waits for the client's delayed ACK, about 40 ms.
    listening = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        # as uvicorn binds: a port left in TIME_WAIT by a stopped server is free
        listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listening.bind((host, port))
        listening.listen(2048)
    except OSError as exc:
        listening.close()
        in_use = exc.errno == errno.EADDRINUSE
        reason = "the port is in use" if in_use else str(exc.strerror or exc)
        shown = f"[{host}]" if family == socket.AF_INET6 else host
        raise CliFailure(
            f"cannot listen on {shown}:{port}: {reason}; {hint}", USAGE
        ) from None
    return listening


def listen_address(text: str) -> tuple[str, int]:
    """``--listen HOST:PORT`` (``PORT`` alone listens on 127.0.0.1).

    Raises:
        CliFailure: not of that form, or the port is above 65535 (exit 2).
    """
    host, colon, port = text.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise CliFailure(f"--listen takes HOST:PORT, not {text!r}", USAGE)
    return (host.strip("[]") if colon and host else "127.0.0.1"), int(port)


def serve_on(
    listening: socket.socket, app: Any, limits: Deadlines, failed: str, **settings: Any
) -> None:
    """Serve ``app`` on ``listening`` with uvicorn until stopped (Ctrl-C, SIGTERM).

    No ``Server`` header is sent and no proxy header trusted; ``settings`` are
    the other ``uvicorn.Config`` arguments.

    Raises:
        CliFailure: the server never started (``failed``, exit 1).
    """
    import uvicorn

    config = uvicorn.Config(
        limits.guard(app),
        server_header=False,
        proxy_headers=False,
        **settings,
        **limits.uvicorn_settings(),
    )
    server = uvicorn.Server(config)
    with listening:
        server.run(sockets=[listening])
    if not server.started:
        raise CliFailure(failed, 1)
