"""``intentusnet mcp proxy``: its refusals (sessions: tests/integrations/mcp/)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

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


@pytest.mark.parametrize("host", ["0.0.0.0", "192.0.2.7", "[::]", "example.com"])
def test_listening_beyond_loopback_needs_api_keys(
    invoke: Invoke, store_root: Path, host: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--listen beyond loopback without keys: exit 2, before anything is bound."""
    monkeypatch.delenv("INTENTUSNET_API_KEYS", raising=False)
    monkeypatch.delenv("INTENTUSNET_API_KEYS_FILE", raising=False)
    result = invoke(
        "mcp", "proxy", "--store", str(store_root), "--listen", f"{host}:1", "--", "x"
    )
    assert result.exit_code == 2
    assert "without an API key" in result.stderr
    assert "Traceback" not in result.output


def test_a_short_or_missing_keys_file_is_a_usage_error(
    invoke: Invoke, store_root: Path, tmp_path: Path
) -> None:
    """A keys file that cannot be read, or holds a short key: exit 2, named."""
    short = tmp_path / "short"
    short.write_text("short\n")
    for path, says in ((short, "at least 16"), (tmp_path / "none", "No such file")):
        result = invoke(
            "mcp",
            "proxy",
            "--store",
            str(store_root),
            "--listen",
            "127.0.0.1:1",
            "--api-keys-file",
            str(path),
            "--",
            "x",
        )
        assert result.exit_code == 2
        assert says in result.stderr


def test_a_port_in_use_is_one_line_and_exit_2(invoke: Invoke, store_root: Path) -> None:
    """--listen on a port another socket holds: one line naming it, exit 2."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = invoke(
            "mcp",
            "proxy",
            "--store",
            str(store_root),
            "--listen",
            f"127.0.0.1:{port}",
            "--",
            "x",
        )
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"Error: cannot listen on 127.0.0.1:{port}: the port is in use; "
        "choose another with --listen HOST:PORT (port 0: any)"
    ]
