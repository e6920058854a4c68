"""``intentusnet replay ID --step``: piped commands, and keys in a terminal (tmux)."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sysconfig
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from .support import CHECKOUT, Invoke

TMUX = shutil.which("tmux")


def step(invoke: Invoke, root: Path, execution_id: str, keys: str) -> str:
    """Walk ``execution_id`` with one command per input line; return stdout."""
    result = invoke("--store", str(root), "replay", execution_id, "--step", input=keys)
    assert result.exit_code == 0, result.output
    return result.stdout


def test_piped_commands_walk_forward_and_back(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """n shows the next line verified, p the one before; q quits."""
    out = step(invoke, store_root, ids["completed"], "n\nn\np\nq\n")
    frames = out.split("[n]ext  [p]revious  [q]uit\n")[:-1]
    assert len(frames) == 4
    assert "Line 1/6  header" in frames[0]
    assert "verified (links to the start of the chain)" in frames[0]
    assert "1/6 events verified" in frames[0]
    assert "Line 2/6  event 1  INTENT_RECEIVED" in frames[1]
    assert "verified (links to line 1)" in frames[1]
    assert "2/6 events verified" in frames[1]
    assert "Line 3/6  event 2  ROUTER_DECISION" in frames[2]
    assert "Line 2/6  event 1  INTENT_RECEIVED" in frames[3]
    assert "3/6 events verified" in frames[3]  # going back keeps the count


def test_walking_to_the_end_says_valid(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """The last line shows the total; input running out ends the walk."""
    out = step(invoke, store_root, ids["fallback"], "\n" * 40)
    last = out.rsplit("(step-through replay)", 1)[1]
    assert "FINAL_RESPONSE" in last
    assert "End of record: 0 failures - VALID" in last
    assert "events verified" in last


def test_step_refuses_the_other_options(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--step with --json, --force or --verify-envelope is a usage error."""
    for extra in (["--json"], ["--force"], ["--verify-envelope", "-"]):
        result = invoke(
            "--store", str(store_root), "replay", ids["completed"], "--step", *extra
        )
        assert result.exit_code == 2
        assert "--step walks the record" in result.stderr


def test_step_of_a_damaged_record_exits_6(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """A record that fails its check on load is refused as by replay (exit 6)."""
    result = invoke("--store", str(store_root), "replay", ids["tampered"], "--step")
    assert result.exit_code == 6


# -- a real terminal ---------------------------------------------------------------


class _Terminal:
    """A tmux server of our own (its own socket) running one command in a pane."""

    def __init__(self, command: str, env: dict[str, str]) -> None:
        assert TMUX is not None
        self.socket = f"intentusnet-test-{uuid.uuid4().hex[:12]}"
        exports = " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items())
        line = f"env {exports} {command}; echo EXIT=$?; sleep 60"
        self._tmux("new-session", "-d", "-s", "t", "-x", "120", "-y", "60", line)
        self.path = self._tmux("display-message", "-p", "#{socket_path}").strip()

    def _tmux(self, *args: str) -> str:
        assert TMUX is not None
        done = subprocess.run(
            [TMUX, "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return done.stdout

    def screen(self) -> str:
        """The pane's visible text."""
        return self._tmux("capture-pane", "-p", "-t", "t")

    def keys(self, *keys: str) -> None:
        """Type ``keys`` (tmux key names: ``n``, ``Right``, ``Left``...)."""
        self._tmux("send-keys", "-t", "t", *keys)

    def wait_for(self, text: str, timeout: float = 20.0) -> str:
        """Wait until ``text`` is on a screen drawn whole; return the screen.

        A screen is whole once its last line, the keys, is drawn; the
        process's exit line is a screen of its own.
        """
        deadline = time.monotonic() + timeout
        screen = ""
        while time.monotonic() < deadline:
            screen = self.screen()
            if text in screen and ("[q]uit" in screen or text.startswith("EXIT=")):
                return screen
            time.sleep(0.05)
        raise AssertionError(f"{text!r} never appeared; the screen:\n{screen}")

    def close(self) -> None:
        """Stop this test's tmux server (only ours: it has its own socket)."""
        subprocess.run(
            [TMUX or "tmux", "-L", self.socket, "kill-server"],
            capture_output=True,
            timeout=30,
            check=False,
        )
        if self.path:
            Path(self.path).unlink(missing_ok=True)


@pytest.fixture
def terminal(store_root: Path, ids: dict[str, str]) -> Iterator[_Terminal]:
    """`intentusnet replay <completed> --step` in a tmux pane, 120x60."""
    if TMUX is None:
        pytest.skip(
            "tmux is not installed: the keys of `replay --step` are tested in a "
            "real terminal under tmux (apt-get install tmux)"
        )
    script = Path(sysconfig.get_path("scripts")) / "intentusnet"
    assert script.exists(), "run `pip install -e '.[dev]'` to install the script"
    env = {
        "PYTHONPATH": CHECKOUT,
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", "/tmp"),
        "TERM": "xterm-256color",
        "NO_COLOR": "1",
    }
    command = f"{script} --store {store_root} replay {ids['completed']} --step"
    term = _Terminal(command, env)
    try:
        yield term
    finally:
        term.close()


def test_keys_in_a_terminal(terminal: _Terminal) -> None:
    """n and the right arrow go forward, p and the left arrow back, q quits (exit 0).

    Each screen replaces the last: one record title on screen at a time.
    """
    screen = terminal.wait_for("Line 1/6  header")
    assert "1/6 events verified" in screen
    terminal.keys("n")
    screen = terminal.wait_for("Line 2/6  event 1  INTENT_RECEIVED")
    assert screen.count("(step-through replay)") == 1
    assert "verified (links to line 1)" in screen
    terminal.keys("Right")
    terminal.wait_for("Line 3/6  event 2  ROUTER_DECISION")
    terminal.keys("p")
    screen = terminal.wait_for("Line 2/6  event 1  INTENT_RECEIVED")
    assert "3/6 events verified" in screen
    terminal.keys("Left")
    terminal.wait_for("Line 1/6  header")
    for _ in range(5):
        terminal.keys("Space")
    screen = terminal.wait_for("End of record: 0 failures - VALID")
    assert "6/6 events verified" in screen
    terminal.keys("q")
    terminal.wait_for("EXIT=0")


def test_keys_typed_ahead_are_not_lost(terminal: _Terminal) -> None:
    """Keys typed faster than screens are drawn all count, in order."""
    terminal.wait_for("Line 1/6  header")
    terminal.keys(*["n"] * 5, "p", "n")  # one burst
    screen = terminal.wait_for("End of record: 0 failures - VALID")
    assert "Line 6/6" in screen
    terminal.keys("q")
    terminal.wait_for("EXIT=0")
