"""Binding a command's listening socket before anything is printed.

``ui`` and ``gateway`` bind their port here and hand the socket to uvicorn, so
a port in use (or an address this machine does not have) is one line and exit
2, not a banner, the server's log and its own exit code.
"""

from __future__ import annotations

import errno
import socket

from .params import USAGE, CliFailure

__all__ = ["listening_socket"]


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
    listening = socket.socket(family, socket.SOCK_STREAM)
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
