"""``intentusnet ui``: the explorer over a store, as a real process on loopback."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from livekit import UiProcess

from intentusnet import IntentRouter
from intentusnet.cli import cli
from intentusnet.store import FileExecutionStore


@pytest.mark.slow
def test_ui_serves_the_store_read_only(tmp_path: Path) -> None:
    """The pages list the store's records, name --app; nothing routes; SIGTERM stops."""
    root = tmp_path / "records"
    store = FileExecutionStore(root)
    with IntentRouter(store=store) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
        answer = router.route_intent({"intent": {"name": "echo"}, "payload": {}})
    store.close()
    execution_id = answer.metadata.execution_id
    ui = UiProcess(root, "--app", "shop.agents:router")
    try:
        with httpx.Client(base_url=ui.url, trust_env=False, timeout=10) as http:
            assert execution_id in http.get("/ui").text
            page = http.get(f"/ui/executions/{execution_id}")
            assert page.status_code == 200
            assert "--app shop.agents:router" in page.text
            assert "MODULE:ATTR" not in page.text
            assert http.get("/").headers["location"] == "/ui"
            assert http.post("/v1/intents", json={}).status_code in (404, 405)
            assert http.get("/openapi.json").status_code == 404
    finally:
        assert ui.stop() in (0, -15)


def test_ui_refuses_a_missing_store(tmp_path: Path) -> None:
    """A --store that does not exist is a usage error, not a new empty store."""
    result = CliRunner().invoke(cli, ["--store", str(tmp_path / "nope"), "ui"])
    assert result.exit_code == 2
    assert not (tmp_path / "nope").exists()


def test_ui_has_no_host_option() -> None:
    """There is no way to bind anything but 127.0.0.1."""
    result = CliRunner().invoke(cli, ["ui", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "No such option" in result.output


def test_ui_refuses_a_key_it_cannot_read(tmp_path: Path) -> None:
    """--key naming no key file, or --keys no directory, fails before serving."""
    root = tmp_path / "records"
    FileExecutionStore(root).close()
    missing = CliRunner().invoke(
        cli, ["--store", str(root), "ui", "--keys", str(tmp_path / "none")]
    )
    assert missing.exit_code == 2
    assert "does not exist" in missing.output
    (tmp_path / "bad.pub").write_text("not a key")
    bad = CliRunner().invoke(
        cli, ["--store", str(root), "ui", "--key", str(tmp_path / "bad.pub")]
    )
    assert bad.exit_code == 2
    assert "bad.pub" in bad.output
    lonely = CliRunner().invoke(
        cli, ["--store", str(root), "ui", "--require-signature"]
    )
    assert lonely.exit_code == 2
    assert "--require-signature needs --key" in lonely.output


def test_ui_on_a_port_in_use_says_so_in_one_line_and_exits_2(tmp_path: Path) -> None:
    """A taken port: one line naming it, exit 2, and no URL printed first."""
    root = tmp_path / "records"
    store = FileExecutionStore(root)
    with IntentRouter(store=store) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {})
        router.route_intent({"intent": {"name": "echo"}})
    store.close()
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = CliRunner().invoke(
            cli, ["--store", str(root), "ui", "--port", str(port)]
        )
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr == (
        f"Error: cannot listen on 127.0.0.1:{port}: the port is in use; "
        "choose another with --port (0: any free port)\n"
    )


def test_ui_default_port_is_neither_serves_nor_the_example_agents() -> None:
    """The default port is 8767: serve has 8765, the docs' example agent 8766."""
    result = CliRunner().invoke(cli, ["ui", "--help"])
    assert result.exit_code == 0
    assert "[default: 8767;" in result.output
