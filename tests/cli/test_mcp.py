"""``intentusnet mcp proxy``: its refusals (sessions: tests/integrations/mcp/)."""

from __future__ import annotations

from pathlib import Path

from .support import Invoke


def test_record_needs_an_upstream(invoke: Invoke, store_root: Path) -> None:
    """Recording without a command after -- is a usage error (exit 2)."""
    result = invoke("mcp", "proxy", "--store", str(store_root), "--mode", "record")
    assert result.exit_code == 2
    assert "upstream server's command" in result.stderr


def test_replay_without_a_session_is_not_found(
    invoke: Invoke, store_root: Path
) -> None:
    """A replay with no recorded session to answer from exits 3, before any I/O."""
    result = invoke("mcp", "proxy", "--store", str(store_root), "--mode", "replay")
    assert result.exit_code == 3
    assert "no recorded MCP session" in result.stderr


def test_replay_of_an_unknown_record_is_not_found(
    invoke: Invoke, store_root: Path
) -> None:
    """--record names a record that does not exist: exit 3."""
    result = invoke(
        "mcp",
        "proxy",
        "--store",
        str(store_root),
        "--mode",
        "replay",
        "--record",
        "exec-nope",
    )
    assert result.exit_code == 3


def test_a_bad_mode_lists_the_valid_ones(invoke: Invoke, store_root: Path) -> None:
    """--mode takes record, replay or cache."""
    result = invoke("mcp", "proxy", "--mode", "replays")
    assert result.exit_code == 2
    assert "record" in result.stderr
    assert "cache" in result.stderr


def test_url_and_command_are_exclusive(invoke: Invoke, store_root: Path) -> None:
    """--upstream-url with a command after -- is a usage error (exit 2)."""
    result = invoke(
        "mcp",
        "proxy",
        "--store",
        str(store_root),
        "--upstream-url",
        "http://127.0.0.1:9/mcp",
        "--",
        "server",
    )
    assert result.exit_code == 2
    assert "not both" in result.stderr


def test_a_header_needs_a_name_and_a_colon(invoke: Invoke, store_root: Path) -> None:
    """--header takes 'NAME: VALUE' (exit 2 otherwise)."""
    result = invoke(
        "mcp",
        "proxy",
        "--store",
        str(store_root),
        "--upstream-url",
        "http://127.0.0.1:9/mcp",
        "--header",
        "no colon",
    )
    assert result.exit_code == 2
    assert "NAME: VALUE" in result.stderr


def test_listen_takes_host_and_port(invoke: Invoke, store_root: Path) -> None:
    """--listen without a port number is a usage error (exit 2)."""
    result = invoke(
        "mcp",
        "proxy",
        "--store",
        str(store_root),
        "--listen",
        "localhost",
        "--",
        "server",
    )
    assert result.exit_code == 2
    assert "HOST:PORT" in result.stderr
