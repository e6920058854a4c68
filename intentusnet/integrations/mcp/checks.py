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
  that apply. A mismatch is ``400`` with JSON-RPC error ``-32020``. So is a
  ``tools/call`` whose ``Mcp-Param-*`` headers do not mirror the arguments
  the tool's listed input schema marks ``x-mcp-header`` (:func:`param_mismatch`).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from typing import Final
from urllib.parse import urlsplit

import orjson

from ..._util.jsonvalue import JSONValue
from .jsonrpc import is_request, request_version

__all__ = [
    "HEADER_MISMATCH",
    "PARAM_PREFIX",
    "allowed_hosts",
    "binding_status",
    "header_mismatch",
    "not_stateless",
    "param_mismatch",
    "rebinding",
]

#: The JSON-RPC error of a header that does not match the body (2026-07-28).
HEADER_MISMATCH: Final = -32020
#: The custom headers mirroring a tool's arguments (``x-mcp-header``), lower case.
PARAM_PREFIX: Final = "mcp-param-"
#: The HTTP status of a sessionless (2026-07-28) request answered with one
#: of these JSON-RPC errors, as the revision's HTTP transport says.
ERROR_STATUS: Final = {
    -32700: 400,  # parse error
    -32600: 400,  # invalid request
    -32602: 400,  # invalid params (a malformed _meta among them)
    HEADER_MISMATCH: 400,
    -32021: 400,  # a client capability the request needs is missing
    -32022: 400,  # unsupported protocol version
    -32601: 404,  # method not found (initialize, ping, ... in 2026-07-28)
}
#: The first revision whose requests carry their revision in ``_meta``.
STATELESS: Final = "2026-07-28"
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
        why = _mismatch(header, headers.get(header), value, required=required)
        if why is not None:
            return why
    return None


def _mismatch(
    header: str,
    sent: str | None,
    value: str | None,
    *,
    required: bool,
    trim: bool = False,
) -> str | None:
    """Why header ``header`` (``sent``) does not carry ``value``; None if it does.

    ``trim``: white space around the value, sent or decoded, does not count.
    """
    if sent is None:
        missing = required and value is not None
        return f"Header mismatch: {header} header is missing" if missing else None
    decoded = _decoded(sent.strip() if trim else sent)
    if decoded is None:
        return f"Header mismatch: {header} header value {sent!r} is malformed"
    if (decoded.strip() if trim else decoded) != value:
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


def param_mismatch(
    headers: Mapping[str, str], message: JSONValue, schema: JSONValue
) -> str | None:
    """Why a ``tools/call``'s ``Mcp-Param-*`` headers do not match its arguments.

    ``schema``: the tool's listed ``inputSchema``; each property it marks
    ``x-mcp-header: NAME`` is mirrored in the header ``Mcp-Param-NAME``
    (2026-07-28, SEP-2243). An argument that is given needs its header, equal
    to its value (a string as it is, a number or a boolean as JSON writes
    it) once decoded from MCP's base64 form and trimmed; a header whose
    argument is not given is a mismatch too. None if they match (or the
    schema names no such header).
    """
    properties = schema.get("properties") if isinstance(schema, dict) else None
    params = message.get("params") if isinstance(message, dict) else None
    given = params.get("arguments") if isinstance(params, dict) else None
    arguments = given if isinstance(given, dict) else {}
    if not isinstance(properties, dict):
        return None
    for name, spec in properties.items():
        header = spec.get("x-mcp-header") if isinstance(spec, dict) else None
        if not isinstance(header, str) or not header:
            continue
        field = PARAM_PREFIX + header.lower()
        expected = _header_text(arguments.get(name))
        why = _mismatch(field, headers.get(field), expected, required=True, trim=True)
        if why is not None:
            return why
    return None


def _header_text(value: JSONValue) -> str | None:
    """An argument as its ``Mcp-Param-*`` header carries it."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def binding_status(answer: bytes | None) -> int | None:
    """The HTTP status a sessionless request's error ``answer`` goes with, if any."""
    try:
        message = orjson.loads(answer or b"")
    except orjson.JSONDecodeError:
        return None
    body = message.get("error") if isinstance(message, dict) else None
    code = body.get("code") if isinstance(body, dict) else None
    return ERROR_STATUS.get(code) if isinstance(code, int) else None


def not_stateless(
    headers: Mapping[str, str], message: JSONValue, in_session: bool
) -> tuple[int, int, str] | None:
    """Why a sessionless request its header dates 2026-07-28 or later is not one.

    Its ``MCP-Protocol-Version`` header says it is a stateless request, so its
    ``_meta`` must name its revision (else ``400``, ``-32602``: invalid
    params), and it cannot be ``initialize``, which the revision removed
    (``404``, ``-32601``). The HTTP status, the JSON-RPC code and the message;
    None when it may go on. Said by the proxy itself: a stdio server sees no
    header, and would take the request for one of the handshake era.
    """
    header = headers.get("mcp-protocol-version", "").strip()
    if in_session or header < STATELESS or not is_request(message):
        return None
    assert isinstance(message, dict)
    if message.get("method") == "initialize":
        return 404, -32601, f"Method not found: initialize (there is none in {header})"
    if request_version(message) is None:
        return (
            400,
            -32602,
            "Invalid params: _meta names no protocol version "
            "(io.modelcontextprotocol/protocolVersion), as a request of "
            f"{header} must",
        )
    return None
