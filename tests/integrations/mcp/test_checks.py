"""What --listen checks of a request: DNS rebinding, headers against the body."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from intentusnet.integrations.mcp.checks import (
    allowed_hosts,
    header_mismatch,
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
