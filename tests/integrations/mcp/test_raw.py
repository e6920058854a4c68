"""The proxy at the JSON-RPC level: a killed proxy, a broken upstream (no SDK)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from intentusnet import FileExecutionStore

ROOT = Path(__file__).resolve().parents[3]
FAKE = [sys.executable, str(Path(__file__).with_name("fake_upstream.py"))]
LIMIT = 30.0


def _proxy(store: Path, mode: str, *more: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "intentusnet.cli",
        "mcp",
        "proxy",
        "--store",
        str(store),
        "--mode",
        mode,
        *more,
    ]


def _call(request_id: int, tool: str, **arguments: Any) -> bytes:
    params = {"name": tool, "arguments": arguments}
    message = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call"}
    return json.dumps({**message, "params": params}).encode() + b"\n"


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_a_killed_proxy_leaves_an_incomplete_record_forced_replay_serves(
    tmp_path: Path,
) -> None:
    """Killed mid-session: the record is incomplete; --force replays its calls."""
    store = tmp_path / "store"
    with subprocess.Popen(
        [*_proxy(store, "record"), "--", *FAKE],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_env(),
    ) as proxy:
        try:
            assert proxy.stdin is not None
            assert proxy.stdout is not None
            proxy.stdin.write(_call(1, "echo", word="hi"))
            proxy.stdin.flush()
            answer = json.loads(proxy.stdout.readline())  # bounded: the kill below
            assert answer["id"] == 1
        finally:
            proxy.kill()  # the fake upstream exits when its stdin closes
            proxy.wait(timeout=LIMIT)
    records = FileExecutionStore(store)
    (summary,) = records.list()
    assert summary.status.value == "incomplete"  # its owner is gone: settled
    records.close()
    refused = subprocess.run(
        _proxy(store, "replay"),
        input=_call(2, "echo", word="hi"),
        capture_output=True,
        env=_env(),
        timeout=LIMIT,
        check=False,
    )
    assert refused.returncode == 4, refused.stderr
    served = subprocess.run(
        [*_proxy(store, "replay", "--force")],
        input=_call(2, "echo", word="hi"),
        capture_output=True,
        env=_env(),
        timeout=LIMIT,
        check=False,
    )
    assert served.returncode == 0, served.stderr
    replayed = json.loads(served.stdout)
    assert replayed == {**answer, "id": 2}


def test_a_line_that_is_not_json_from_the_upstream_is_skipped(tmp_path: Path) -> None:
    """A broken line from the server does not end the session or reach the client."""
    requests = _call(1, "garbage", n=1) + _call(2, "echo", n=2)
    done = subprocess.run(
        [*_proxy(tmp_path / "store", "record"), "--", *FAKE],
        input=requests,
        capture_output=True,
        env=_env(),
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    answers = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(a["id"] for a in answers) == [1, 2]


def test_redacted_arguments_never_reach_the_store_and_still_replay(
    tmp_path: Path,
) -> None:
    """--redact records a keyed marker; a replay with the same key still matches."""
    store = tmp_path / "store"
    key = tmp_path / "key"
    key.write_text("0123456789abcdef0123456789abcdef")
    redact = ("--redact", "token", "--redact-key-file", str(key))
    call = _call(1, "login", user="ada", token="s3cret-value")
    recorded = subprocess.run(
        [*_proxy(store, "record", *redact), "--", *FAKE],
        input=call,
        capture_output=True,
        env=_env(),
        timeout=LIMIT,
        check=False,
    )
    assert recorded.returncode == 0, recorded.stderr
    for path in store.rglob("*"):
        if path.is_file():
            assert b"s3cret-value" not in path.read_bytes(), path
    replayed = subprocess.run(
        _proxy(store, "replay", *redact),
        input=call,
        capture_output=True,
        env=_env(),
        timeout=LIMIT,
        check=False,
    )
    assert replayed.returncode == 0, replayed.stderr
    answer = json.loads(replayed.stdout)
    assert "result" in answer, answer
    assert "[redacted:" in answer["result"]["content"][0]["text"]


def test_redact_without_a_key_is_a_usage_error(tmp_path: Path) -> None:
    """A random key would never match again: --redact needs --redact-key-file."""
    done = subprocess.run(
        [*_proxy(tmp_path / "store", "record", "--redact", "token"), "--", *FAKE],
        capture_output=True,
        env={k: v for k, v in _env().items() if k != "INTENTUSNET_REDACT_KEY_FILE"},
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 2
    assert b"--redact-key-file" in done.stderr


def test_inspect_shows_the_session_as_a_timeline_of_calls(tmp_path: Path) -> None:
    """`intentusnet inspect` lists each call of the session as a step, in order."""
    from click.testing import CliRunner

    from intentusnet.cli import cli

    store = tmp_path / "store"
    done = subprocess.run(
        [*_proxy(store, "record"), "--", *FAKE],
        input=_call(1, "search", q="a") + _call(2, "fetch", url="x"),
        capture_output=True,
        env=_env(),
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    shown = CliRunner().invoke(cli, ["--store", str(store), "inspect", "last"])
    assert shown.exit_code == 0, shown.output
    assert "mcp.session" in shown.stdout
    ended = [line for line in shown.stdout.splitlines() if "STEP_END" in line]
    # the two calls run at once: either may end first; each holds the step
    # saying it was asked naming no revision (the fake upstream has no
    # initialize), not shown under "Calls"
    assert sorted(line.split()[-3] for line in ended) == [
        "mcp:asked-by",
        "mcp:asked-by",
        "mcp:tools/call:fetch",
        "mcp:tools/call:search",
    ]
    # and under "Calls", one line per call: its tool and its arguments
    calls = shown.stdout.split("\nCalls\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(calls) == 2
    assert any('tools/call search {"q":"a"}' in line for line in calls)
    assert any('tools/call fetch {"url":"x"}' in line for line in calls)
    assert all(" success " in line for line in calls)


def test_an_upstream_that_cannot_start_is_exit_1_naming_it(tmp_path: Path) -> None:
    """A command that does not exist: one error line, exit 1, no traceback."""
    done = subprocess.run(
        [*_proxy(tmp_path / "store", "record"), "--", str(tmp_path / "no-such-server")],
        input=_call(1, "echo", word="hi"),
        capture_output=True,
        env=_env(),
        timeout=LIMIT,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert b"could not start the upstream" in done.stderr
    assert b"no-such-server" in done.stderr
    assert b"Traceback" not in done.stderr
