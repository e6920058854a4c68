"""``main`` answers ``replay ID`` without click, exactly as the click command does."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from intentusnet import IntentRouter, JSONObject
from intentusnet.cli import cli, main
from intentusnet.replay import ReplayEngine
from intentusnet.store import FileExecutionStore

from .support import CHECKOUT, envelope

#: The two ways in: the entry point as the console script calls it (no
#: arguments: it may answer itself, owning the process), and click alone.
ENTRY = "from intentusnet.cli import main; main()"
CLICK = (
    "import sys; from intentusnet.cli import cli; "
    "cli.main(args=sys.argv[1:], prog_name='intentusnet')"
)


def both(
    argv: list[str], env: dict[str, str], cwd: Path, stdout: int | None = None
) -> list[tuple[int, bytes, bytes]]:
    """Exit code, stdout and stderr of ``argv`` run each way."""
    full_env = {**os.environ, **env, "PYTHONPATH": CHECKOUT}
    if "INTENTUSNET_STORE" not in env:
        full_env.pop("INTENTUSNET_STORE", None)
    results = []
    for code in (ENTRY, CLICK):
        done = subprocess.run(
            [sys.executable, "-c", code, *argv],
            env=full_env,
            cwd=cwd,
            stdout=stdout if stdout is not None else subprocess.PIPE,
            stderr=subprocess.PIPE,
            timeout=30,
            check=False,
        )
        results.append((done.returncode, done.stdout or b"", done.stderr))
    return results


@pytest.mark.parametrize(
    ("kind", "extra", "exit_code"),
    [
        ("completed", [], 0),
        ("completed", ["--json"], 0),
        ("fallback", ["--json"], 0),
        ("failed", [], 0),
        ("incomplete", [], 4),
        ("tampered", ["--json"], 6),
        ("exec-missing", [], 3),
        ("../x", [], 3),
        ("completed", ["--json", "--json"], 0),
        ("completed", ["--force"], 0),
        ("--json", [], 2),
    ],
)
def test_replay_id_prints_what_click_prints(
    kind: str,
    extra: list[str],
    exit_code: int,
    store_root: Path,
    ids: dict[str, str],
    tmp_path: Path,
) -> None:
    """Output and exit code are the same whichever path answers."""
    argv = ["replay", ids.get(kind, kind), *extra]
    quick, slow = both(argv, {"INTENTUSNET_STORE": str(store_root)}, tmp_path)
    assert quick == slow
    assert quick[0] == exit_code, quick[2]


def test_json_may_come_before_the_id(store_root: Path, ids: dict[str, str]) -> None:
    """`replay --json ID` is `replay ID --json`, as click reads it."""
    env = {"INTENTUSNET_STORE": str(store_root)}
    before = both(["replay", "--json", ids["completed"]], env, store_root)
    after = both(["replay", ids["completed"], "--json"], env, store_root)
    assert before[0] == before[1] == after[0]
    assert before[0][1].count(b"\n") == 1


#: Values the stdlib twins leave to orjson (cli/_quick.py reads and prints with
#: them): exponents, long integers, tiny fractions, a key beyond the BMP, control
#: and separator characters, deep nesting.
AWKWARD: JSONObject = {
    "tiny": 1.5e-7,
    "small": 2.5e-5,
    "big": 1e20,
    "long": 9007199254740991,
    "integral": 3.0,
    "\U0001f600": "a key beyond the BMP",
    "text": '\x00\x1f\u2028\ufeff"\\ é',
    "deep": [[[[[[[[[[{"x": -0.0}]]]]]]]]]],
}


@pytest.mark.parametrize("extra", [[], ["--json"]])
def test_awkward_values_print_what_click_prints(
    extra: list[str], store_root: Path, tmp_path: Path
) -> None:
    """A record of numbers and strings the stdlib cannot vouch for: same bytes."""
    with IntentRouter(store=FileExecutionStore(store_root)) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
        response = router.route_intent(envelope(**AWKWARD))
    execution_id = response.metadata.execution_id
    assert execution_id is not None
    env = {"INTENTUSNET_STORE": str(store_root)}
    quick, slow = both(["replay", execution_id, *extra], env, tmp_path)
    assert quick == slow
    assert quick[0] == 0, quick[2]
    assert orjson.loads(quick[1])["payload"]["echo"] == AWKWARD


@pytest.mark.parametrize("store", ["missing", "file", "default"])
def test_a_store_that_is_not_there_is_clicks_usage_error(
    store: str, ids: dict[str, str], tmp_path: Path
) -> None:
    """No store directory: the same one-line error, exit 2."""
    env = {}
    if store == "missing":
        env["INTENTUSNET_STORE"] = str(tmp_path / "nope")
    elif store == "file":
        (tmp_path / "file").write_text("")
        env["INTENTUSNET_STORE"] = str(tmp_path / "file")
    quick, slow = both(["replay", ids["completed"]], env, tmp_path)
    assert quick == slow
    assert quick[0] == 2
    assert quick[2].startswith(b"Error: ")


def test_the_default_store_is_found_in_the_working_directory(
    store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """Without INTENTUSNET_STORE, both read .intentusnet/records."""
    (tmp_path / ".intentusnet").mkdir()
    store_root.rename(tmp_path / ".intentusnet" / "records")
    quick, slow = both(["replay", ids["completed"]], {}, tmp_path)
    assert quick == slow
    assert quick[0] == 0


def test_a_closed_pipe_ends_both_alike(
    store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """Writing into a pipe nobody reads: exit 1, nothing on stderr."""
    outcomes = []
    for _ in range(2):
        read, write = os.pipe()
        os.close(read)
        try:
            env = {"INTENTUSNET_STORE": str(store_root)}
            outcomes.append(both(["replay", ids["completed"]], env, tmp_path, write))
        finally:
            os.close(write)
    for quick, slow in outcomes:
        assert quick == slow == (1, b"", b"")


def test_a_full_disk_is_an_internal_error_both_ways(
    store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """Output to /dev/full: the same internal-error line, exit 1."""
    if not os.path.exists("/dev/full"):
        pytest.skip("needs /dev/full")
    with open("/dev/full", "wb") as full:
        env = {"INTENTUSNET_STORE": str(store_root)}
        quick, slow = both(["replay", ids["completed"]], env, tmp_path, full.fileno())
    assert quick == slow
    assert quick[0] == 1
    assert b"No space left on device" in quick[2]


def test_completion_is_left_to_click(tmp_path: Path) -> None:
    """A shell asking for completions gets click's answer, never a replay."""
    env = {
        "_INTENTUSNET_COMPLETE": "bash_complete",
        "COMP_WORDS": "intentusnet replay x",
        "COMP_CWORD": "2",
        "INTENTUSNET_STORE": str(tmp_path),
    }
    quick, slow = both(["replay", "x"], env, tmp_path)
    assert quick == slow
    assert quick[0] == 0


@pytest.mark.parametrize("entry", ["quick", "click"])
def test_ctrl_c_aborts_as_click_does(
    entry: str,
    store_root: Path,
    ids: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Interrupted while replaying: a blank line, `Aborted!`, exit 1."""

    def interrupted(*args: object) -> ReplayEngine:
        raise KeyboardInterrupt

    monkeypatch.setenv("INTENTUSNET_STORE", str(store_root))
    monkeypatch.setattr(ReplayEngine, "from_store", interrupted)
    argv = ["replay", ids["completed"]]
    run = main if entry == "quick" else lambda a: cli.main(a, "intentusnet")
    with pytest.raises(SystemExit) as stopped:
        run(argv)
    assert stopped.value.code == 1
    assert capsys.readouterr().err == "\nAborted!\n"


def test_called_with_arguments_it_leaves_the_collector_alone(
    store_root: Path,
    ids: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """In-process, main(argv) neither turns the collector off nor freezes objects."""
    monkeypatch.setenv("INTENTUSNET_STORE", str(store_root))
    frozen = gc.get_freeze_count()
    with pytest.raises(SystemExit) as stopped:
        main(["replay", ids["completed"]])
    assert stopped.value.code == 0
    assert ids["completed"] in capsys.readouterr().out
    assert gc.isenabled()
    assert gc.get_freeze_count() == frozen


#: The console script's way in, reporting the collector's state at exit.
PROBE = (
    "import atexit, gc, sys\n"
    "atexit.register(lambda: sys.stderr.write(\n"
    "    f'FROZEN={gc.get_freeze_count() > 0} ENABLED={gc.isenabled()}'))\n"
    "from intentusnet.cli import main\n"
    "main()\n"
)


@pytest.mark.parametrize(
    ("argv", "state"),
    [
        (["replay", "completed"], "FROZEN=True ENABLED=False"),
        (["replay", "exec-missing"], "FROZEN=False ENABLED=True"),
        (["--help"], "FROZEN=False ENABLED=True"),
    ],
)
def test_only_a_quick_replay_ends_with_the_collector_frozen(
    argv: list[str], state: str, store_root: Path, ids: dict[str, str]
) -> None:
    """The console script freezes objects only after answering a replay itself."""
    argv = [ids.get(arg, arg) for arg in argv]
    env = {**os.environ, "PYTHONPATH": CHECKOUT, "INTENTUSNET_STORE": str(store_root)}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv],
        env=env,
        capture_output=True,
        timeout=30,
        check=False,
    )
    assert done.stderr.decode().endswith(state), done.stderr
