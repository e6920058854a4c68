"""Block the network: every outgoing connection refused, but to allowed hosts.

:func:`block_network` is how a strict re-run (``with block_network():
rerun(engine, router)``, ``intentusnet rerun --block-network``) and the pytest
plugin (``--intentusnet-block-network``) make sure nothing leaves the process:
whatever client an agent or a test builds, its connection fails with
:class:`~intentusnet.errors.NetworkBlocked` naming the address, and the block
keeps the addresses it refused (an agent may catch the error; the block still
tells).

It works by replacing ``socket.socket.connect`` and ``connect_ex`` (the calls
every TCP and UDP client makes, blocking or asyncio) while a block is active,
and putting them back when the last one ends. Unix-domain sockets are never
blocked (they do not leave the machine). The block is process-wide: a
connection from any thread is refused while one is active.
"""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Collection, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Final

from ..errors import NetworkBlocked

__all__ = ["NetworkBlock", "block_network"]

#: What ``localhost`` in an allowed-hosts list stands for.
_LOCALHOST: Final = frozenset({"localhost", "127.0.0.1", "::1"})

_lock = threading.Lock()


@dataclass(eq=False)
class NetworkBlock:
    """One active :func:`block_network`: what it allows, and what it refused.

    Attributes:
        allowed: the hosts still reachable (normalised; ``localhost`` expanded).
        refused: the addresses (``host:port``) whose connections it refused,
            in order, even those whose ``NetworkBlocked`` an agent caught.

    Added in 0.1.0.
    """

    allowed: frozenset[str]
    refused: list[str] = field(default_factory=list)


#: The active blocks; a connection must pass them all.
_active: list[NetworkBlock] = []
#: The methods replaced, and whether ``socket.socket`` defined them itself.
_original: dict[str, tuple[Callable[..., Any], bool]] = {}


@contextmanager
def block_network(allowed_hosts: Collection[str] = ()) -> Iterator[NetworkBlock]:
    """Refuse every network connection made inside the block.

    ``allowed_hosts`` are host names or IP addresses that stay reachable: an
    address is compared as connected to (an IP, or a name for a socket connected
    by name), and ``localhost`` allows ``127.0.0.1`` and ``::1`` too. Blocks nest:
    a connection must be allowed by every active block. A refused connection
    raises :class:`~intentusnet.errors.NetworkBlocked`; the block yielded
    (``with block_network() as block:``) lists it in ``block.refused``.

    Added in 0.1.0.
    """
    allowed = frozenset(_normal(h) for h in allowed_hosts)
    if allowed & _LOCALHOST:
        allowed |= _LOCALHOST
    block = NetworkBlock(allowed)
    with _lock:
        if not _active:
            _install()
        _active.append(block)
    try:
        yield block
    finally:
        with _lock:
            _active.remove(block)
            if not _active:
                _uninstall()


def _normal(host: str) -> str:
    host = host.strip().lower().strip("[]")
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        return host


def _check(sock: socket.socket, address: object) -> None:
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return
    host, port = (
        (address[0], address[1]) if isinstance(address, tuple) else (address, "")
    )
    name = _normal(str(host))
    refused = [block for block in list(_active) if name not in block.allowed]
    if refused:
        shown = f"[{name}]" if ":" in name else name
        address = f"{shown}:{port}"
        for block in refused:
            block.refused.append(address)
        raise NetworkBlocked(address)


def _install() -> None:
    connect = socket.socket.connect
    connect_ex = socket.socket.connect_ex
    own = vars(socket.socket)
    _original["connect"] = (connect, "connect" in own)
    _original["connect_ex"] = (connect_ex, "connect_ex" in own)

    def blocked_connect(self: socket.socket, address: Any) -> None:
        _check(self, address)
        connect(self, address)

    def blocked_connect_ex(self: socket.socket, address: Any) -> int:
        _check(self, address)
        return connect_ex(self, address)

    setattr(socket.socket, "connect", blocked_connect)  # noqa: B010 - typeshed's type is _socket's
    setattr(socket.socket, "connect_ex", blocked_connect_ex)  # noqa: B010


def _uninstall() -> None:
    for name in ("connect", "connect_ex"):
        method, own = _original.pop(name)
        if own:
            setattr(socket.socket, name, method)
        else:
            delattr(socket.socket, name)  # the inherited one shows through again
