"""What ``--listen`` checks of a request before its session sees it.

Two checks MCP's streamable HTTP transport asks of a server:

- **DNS rebinding.** A web page the user visits can make the browser send
  requests to ``127.0.0.1`` under a name the attacker controls; the ``Host``
  header then names that name, and the ``Origin`` header (a browser always
  sends one) the attacker's site. A request whose ``Host`` is not an allowed
  host is refused (``421``, as the official SDK's servers do), one whose
  ``Origin`` is present and not an allowed host's origin too (``403``, as the
  2026-07-28 revision says). The allowed hosts are the loopback names
  (``localhost``, ``127.0.0.1``, ``[::1]``), the host listened on, and those
  the user names (``--allow-host``), each with the port listened on.
- **Headers against the body** (2026-07-28). A request's ``Mcp-Method`` must
  be its ``method``, its ``Mcp-Name`` the ``params.name`` (``tools/call``,
  ``prompts/get``) or ``params.uri`` (``resources/read``), once decoded from
  MCP's base64 form, and, when its ``_meta`` names a revision (a stateless
  request), its ``MCP-Protocol-Version`` that revision. A header that is sent
  is checked whatever the revision; a stateless request must send all those
  that apply. A mismatch is ``400`` with JSON-RPC error ``-32020``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import urlsplit

from ..._util.jsonvalue import JSONValue
from .jsonrpc import is_request, request_version

__all__ = ["HEADER_MISMATCH", "allowed_hosts", "header_mismatch", "rebinding"]

#: The JSON-RPC error of a header that does not match the body (2026-07-28).
HEADER_MISMATCH: Final = -32020
_LOOPBACK: Final = ("localhost", "127.0.0.1", "[::1]")
_NAMED: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_ENCODED: Final = re.compile(r"=\?base64\?(.*)\?=", re.DOTALL)


def allowed_hosts(host: str, port: int, more: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` values a listener on ``host:port`` accepts.

    Each allowed name with the port, and without it (a client may leave out
    the port it is told). ``more``: names the user allows (``--allow-host``),
    with or without a port.
    """
    named = ("[::1]" if host == "::1" else host, *_LOOPBACK)
    found: set[str] = set()
    for name in named:
        found |= {name, f"{name}:{port}"}
    for name in more:
        found.add(name.lower())
    return frozenset(found)


def rebinding(headers: Mapping[str, str], allowed: frozenset[str]) -> int | None:
    """The status refusing a request that may come through DNS rebinding, or None.

    ``421`` for a ``Host`` that is not allowed, ``403`` for an ``Origin`` that
    is present and is not an allowed host's.
    """
    host = headers.get("host", "").lower()
    if host not in allowed:
        return 421
    origin = headers.get("origin")
    if origin is None:
        return None
    parts = urlsplit(origin.lower())
    if parts.scheme not in ("http", "https") or parts.netloc not in allowed:
        return 403
    return None


def header_mismatch(headers: Mapping[str, str], message: JSONValue) -> str | None:
    """Why ``message``'s headers do not match its body, or None if they do."""
    if not isinstance(message, dict) or "method" not in message:
        return None  # a response: it has no method to name
    method = str(message.get("method"))
    stateless = request_version(message)
    expected: dict[str, str | None] = {"mcp-method": method}
    if stateless is not None:  # else the session's revision: not in the body
        expected["mcp-protocol-version"] = stateless
    key = _NAMED.get(method)
    if key is not None:
        params = message.get("params")
        named = params.get(key) if isinstance(params, dict) else None
        expected["mcp-name"] = named if isinstance(named, str) else None
    required = stateless is not None and is_request(message)
    for header, value in expected.items():
        sent = headers.get(header)
        if sent is None:
            if required and value is not None:
                return f"Header mismatch: {header} header is missing"
            continue
        decoded = _decoded(sent)
        if decoded is None:
            return f"Header mismatch: {header} header value {sent!r} is malformed"
        if decoded != value:
            return (
                f"Header mismatch: {header} header value {decoded!r} "
                f"does not match body value {value!r}"
            )
    return None


def _decoded(value: str) -> str | None:
    """A header value, decoded from MCP's ``=?base64?...?=`` form; None if bad."""
    found = _ENCODED.fullmatch(value)
    if found is None:
        return value
    try:
        return base64.b64decode(found.group(1), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
