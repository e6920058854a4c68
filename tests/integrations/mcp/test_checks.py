"""What --listen checks of a request: DNS rebinding, headers against the body."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from intentusnet.integrations.mcp.checks import (
    ERROR_STATUS,
    allowed_hosts,
    binding_status,
    header_mismatch,
    not_stateless,
    param_mismatch,
    rebinding,
)

ALLOWED = allowed_hosts("127.0.0.1", 8123, ["mcp.example:443"])
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"host": "127.0.0.1:8123"}, None),
        ({"host": "localhost:8123"}, None),
        ({"host": "[::1]:8123"}, None),
        ({"host": "LOCALHOST"}, None),  # names are case-insensitive; no port
        ({"host": "mcp.example:443"}, None),  # --allow-host
        ({"host": "evil.example:8123"}, 421),  # a rebound name
        ({"host": "127.0.0.1:9999"}, 421),  # another port
        ({}, 421),  # no Host at all
        ({"host": "127.0.0.1:8123", "origin": "http://localhost:8123"}, None),
        ({"host": "127.0.0.1:8123", "origin": "https://mcp.example:443"}, None),
        ({"host": "127.0.0.1:8123", "origin": "http://evil.example"}, 403),
        ({"host": "127.0.0.1:8123", "origin": "http://localhost:9999"}, 403),
        ({"host": "127.0.0.1:8123", "origin": "null"}, 403),  # a sandboxed page
        ({"host": "127.0.0.1:8123", "origin": "file://localhost:8123"}, 403),
    ],
)
def test_rebinding_refuses_other_hosts_and_origins(
    headers: dict[str, str], status: int | None
) -> None:
    """Host must be an allowed host; an Origin, if sent, one of theirs."""
    assert rebinding(headers, ALLOWED) == status


def _call(name: str, meta: bool = True) -> dict[str, Any]:
    params: dict[str, Any] = {"name": name, "arguments": {}}
    if meta:
        params["_meta"] = META
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


STATELESS = {
    "mcp-method": "tools/call",
    "mcp-name": "add",
    "mcp-protocol-version": "2026-07-28",
}
ENCODED = "=?base64?" + base64.b64encode(b"add").decode() + "?="


@pytest.mark.parametrize(
    ("headers", "message", "fault"),
    [
        (STATELESS, _call("add"), None),
        ({**STATELESS, "mcp-name": ENCODED}, _call("add"), None),  # base64 form
        ({**STATELESS, "mcp-name": "sub"}, _call("add"), "does not match"),
        ({**STATELESS, "mcp-method": "tools/list"}, _call("add"), "does not match"),
        (
            {**STATELESS, "mcp-protocol-version": "2025-11-25"},
            _call("add"),
            "does not match",
        ),
        ({**STATELESS, "mcp-name": "=?base64?!!?="}, _call("add"), "malformed"),
        ({"mcp-method": "tools/call", "mcp-name": "add"}, _call("add"), "missing"),
        (
            {"mcp-method": "tools/call", "mcp-protocol-version": "2026-07-28"},
            _call("add"),
            "missing",
        ),
        ({}, _call("add"), "missing"),  # a stateless request sends them all
        ({}, _call("add", meta=False), None),  # a 2025 session's: none needed
        (
            {"mcp-protocol-version": "2025-11-25"},  # the session's revision
            _call("add", meta=False),
            None,
        ),
        ({"mcp-name": "sub"}, _call("add", meta=False), "does not match"),
        ({"mcp-method": "tools/call"}, {"jsonrpc": "2.0", "id": 1, "result": {}}, None),
    ],
)
def test_headers_must_match_the_body(
    headers: dict[str, str], message: dict[str, Any], fault: str | None
) -> None:
    """Mcp-Method, Mcp-Name, MCP-Protocol-Version: sent means checked."""
    found = header_mismatch(headers, message)
    assert (found is None) == (fault is None)
    if fault is not None:
        assert found is not None
        assert fault in found


#: A tool whose ``region`` (a string) and ``count`` (an integer) are mirrored.
SCHEMA = {
    "type": "object",
    "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "count": {"type": "integer", "x-mcp-header": "Count"},
        "note": {"type": "string"},
    },
}


def _call(**arguments: Any) -> dict[str, Any]:
    params = {"name": "tool", "arguments": arguments}
    return {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}


def _b64(text: str) -> str:
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


@pytest.mark.parametrize(
    ("headers", "arguments", "refused"),
    [
        (
            {"mcp-param-region": "eu", "mcp-param-count": "3"},
            {"region": "eu", "count": 3},
            False,
        ),
        ({"mcp-param-region": "  eu  "}, {"region": "eu"}, False),  # trimmed
        ({"mcp-param-region": _b64("Hello")}, {"region": "Hello"}, False),
        ({}, {"note": "x"}, False),  # nothing mirrored is given
        ({"mcp-param-region": "SGVsbG8="}, {"region": "SGVsbG8="}, False),  # literal
        (
            {"mcp-param-region": "=?base64?SGVsbG8"},
            {"region": "=?base64?SGVsbG8"},
            False,
        ),
        ({}, {"region": "eu"}, True),  # the header is missing
        ({"mcp-param-region": "us"}, {"region": "eu"}, True),
        ({"mcp-param-count": "4"}, {"count": 3}, True),
        ({"mcp-param-region": "eu"}, {}, True),  # a header without its argument
        (
            {"mcp-param-region": "=?base64?SGVsbG8?="},
            {"region": "Hello"},
            True,
        ),  # padding
        ({"mcp-param-region": "=?base64?SGVs!!!bG8=?="}, {"region": "Hello"}, True),
    ],
)
def test_param_headers_must_mirror_the_marked_arguments(
    headers: dict[str, str], arguments: dict[str, Any], refused: bool
) -> None:
    """Each x-mcp-header argument given needs its Mcp-Param header, equal to it."""
    found = param_mismatch(headers, _call(**arguments), SCHEMA)
    assert (found is not None) is refused
    if refused:
        assert found.startswith("Header mismatch: mcp-param-")


def test_a_tool_without_a_known_schema_is_not_checked() -> None:
    """No listed schema (or none marking a header): any Mcp-Param header passes."""
    assert param_mismatch({"mcp-param-region": "x"}, _call(region="y"), None) is None
    assert param_mismatch({}, _call(region="y"), {"type": "object"}) is None


@pytest.mark.parametrize(("code", "status"), [*ERROR_STATUS.items(), (-32603, None)])
def test_a_sessionless_error_gets_the_revisions_status(
    code: int, status: int | None
) -> None:
    """Each mapped JSON-RPC error code has its status; any other answer none."""
    answer = {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m"}}
    assert binding_status(json.dumps(answer).encode()) == status
    assert binding_status(b'{"jsonrpc": "2.0", "id": 1, "result": {}}') is None
    assert binding_status(b"not json") is None


@pytest.mark.parametrize(
    ("header", "method", "meta", "in_session", "refused"),
    [
        ("2026-07-28", "tools/list", META, False, None),
        ("2026-07-28", "tools/list", None, False, (400, -32602)),  # no _meta
        ("2026-07-28", "tools/list", {}, False, (400, -32602)),  # no revision in it
        ("2026-07-28", "initialize", None, False, (404, -32601)),  # removed
        ("2027-01-01", "tools/list", None, False, (400, -32602)),  # a later one
        ("2025-11-25", "tools/list", None, False, None),  # the handshake era
        (None, "tools/list", None, False, None),  # no header: the body decides
        ("2026-07-28", "tools/list", None, True, None),  # in a session
    ],
)
def test_a_request_its_header_dates_stateless_must_be_one(
    header: str | None,
    method: str,
    meta: dict[str, Any] | None,
    in_session: bool,
    refused: tuple[int, int] | None,
) -> None:
    """A sessionless 2026 request names its revision in _meta and is no initialize."""
    headers = {} if header is None else {"mcp-protocol-version": header}
    params = {} if meta is None else {"_meta": meta}
    message = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    found = not_stateless(headers, message, in_session)
    assert (found if found is None else found[:2]) == refused
