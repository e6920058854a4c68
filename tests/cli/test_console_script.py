"""The installed ``intentusnet`` console script, run as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import orjson
import pytest

from intentusnet.store import FileExecutionStore

from .support import CHECKOUT, envelope, write_json

HEAVY = ("pydantic", "httpx")


@pytest.fixture(scope="module")
def script() -> str:
    """The console script pip installed (not a version-manager shim)."""
    path = Path(sysconfig.get_path("scripts")) / "intentusnet"
    assert path.exists(), "run `pip install -e '.[dev]'` to install the script"
    return str(path)


def run(
    *argv: str, root: Path | None = None, input: bytes | None = None, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run argv with the store and extra environment; capture text output."""
    full_env = {**os.environ, **env}
    full_env.pop("INTENTUSNET_STORE", None)
    # First on the path: the installed script runs the package under test.
    paths = [CHECKOUT, full_env.get("PYTHONPATH", "")]
    full_env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    if root is not None:
        full_env["INTENTUSNET_STORE"] = str(root)
    return subprocess.run(
        argv,
        input=input.decode() if input is not None else None,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=30,
        check=False,
    )


def imported(stderr: str) -> set[str]:
    """Top-level packages named in ``PYTHONPROFILEIMPORTTIME`` output."""
    names = set()
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            names.add(line.rsplit("|", 1)[1].strip().split(".")[0])
    return names


def test_replay_exit_codes(
    script: str, store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """0, 3, 4, 5 and 6 from the real script, errors on one line of stderr."""
    ok = run(script, "replay", ids["completed"], root=store_root)
    assert ok.returncode == 0, ok.stderr
    assert orjson.loads(ok.stdout)["originalExecutionId"] == ids["completed"]
    missing = run(script, "replay", "exec-missing", root=store_root)
    assert missing.returncode == 3
    assert missing.stderr.count("\n") == 1
    assert run(script, "replay", ids["incomplete"], root=store_root).returncode == 4
    other = write_json(tmp_path / "other.json", envelope(text="other"))
    mismatch = run(
        script,
        "replay",
        ids["completed"],
        "--verify-envelope",
        str(other),
        root=store_root,
    )
    assert mismatch.returncode == 5
    assert "payload.text" in mismatch.stderr
    assert run(script, "replay", ids["tampered"], root=store_root).returncode == 6


def test_usage_error_and_internal_paths(script: str, tmp_path: Path) -> None:
    """click's usage errors exit 2; a missing store is one line, exit 2."""
    assert run(script, "no-such-command").returncode == 2
    missing = run(script, "--store", str(tmp_path / "nope"), "records", "list")
    assert missing.returncode == 2
    assert missing.stderr.startswith("Error: no execution store at")
    assert "Traceback" not in missing.stderr


def test_replay_does_not_import_pydantic_or_httpx(
    script: str, store_root: Path, ids: dict[str, str]
) -> None:
    """`intentusnet replay ID` and `--help` never import pydantic or httpx."""
    for argv in (["replay", ids["completed"]], ["--help"]):
        done = run(script, *argv, root=store_root, PYTHONPROFILEIMPORTTIME="1")
        assert done.returncode == 0, done.stderr
        names = imported(done.stderr)
        assert "intentusnet" in names  # the profile really ran
        assert not names & set(HEAVY), argv


#: Python code that runs the command's ``main`` on its arguments, as the
#: console script does, and goes on after a successful exit.
_RUN_MAIN = (
    "import sys\n"
    "from intentusnet.cli import main\n"
    "try:\n"
    "    main(sys.argv[1:])\n"
    "except SystemExit as exc:\n"
    "    assert exc.code in (0, None), exc.code\n"
)
_SHOW_MODULES = "sys.stderr.write('MODULES=' + ' '.join(sorted(sys.modules)))\n"


def test_sys_modules_after_replay(
    store_root: Path, ids: dict[str, str], tmp_path: Path
) -> None:
    """After a replay with --verify-envelope, neither heavy package is loaded."""
    file = write_json(tmp_path / "env.json", envelope(text="hello"))
    code = _RUN_MAIN + (
        f"heavy = sorted(m for m in sys.modules if m.split('.')[0] in {HEAVY!r})\n"
        "sys.stderr.write('HEAVY=' + ','.join(heavy))\n"
    )
    done = run(
        sys.executable,
        "-c",
        code,
        "replay",
        ids["completed"],
        "--verify-envelope",
        str(file),
        root=store_root,
    )
    assert done.returncode == 0, done.stderr
    assert "Envelope hash matches." in done.stderr
    assert done.stderr.endswith("HEAVY=")
    assert orjson.loads(done.stdout)["payload"] == {"echo": {"text": "hello"}}


#: Never imported by either command line below: the router, the cache, the
#: catalog (sqlite3), the hit journal, the memory and PostgreSQL stores, logging.
NEVER = frozenset(
    {
        *HEAVY,
        "diskcache",
        "psycopg",
        "sqlite3",
        "logging",
        "intentusnet.envelope",
        "intentusnet.routing",
        "intentusnet.steps",
        "intentusnet.cache",
        "intentusnet.store.file.index",
        "intentusnet.store.hits",
        "intentusnet.store.memory.store",
        "intentusnet.store.postgres.store",
        "intentusnet.store.protocol",
    }
)
#: ``replay ID`` reads a record: it routes nothing, opens no server and, writing
#: no record, publishes nothing to the transparency log, signs nothing (without
#: ``--key``) and passes no crash test's fault point.
REPLAY_NEVER = NEVER | {
    "intentusnet.server",
    "intentusnet.http",
    "intentusnet.tlog.leaf",
    "intentusnet.tlog.publish",
    "intentusnet.record.signing",
    "signal",
}
#: ``--help`` needs no record, store or hash.
HELP_NEVER = NEVER | {
    "hashlib",
    "intentusnet.record",
    "intentusnet.replay",
    "intentusnet.store",
}


@pytest.mark.parametrize(
    ("argv", "never"), [(["replay"], REPLAY_NEVER), (["--help"], HELP_NEVER)]
)
def test_start_up_imports_only_what_the_command_needs(
    argv: list[str], never: frozenset[str], store_root: Path, ids: dict[str, str]
) -> None:
    """`replay ID` and `--help` leave the modules they do not need unimported.

    Counted are the modules the command adds to a bare start: this machine's
    site-packages may import some (``random``, ``threading``) at every start.
    """
    if argv == ["replay"]:
        argv = ["replay", ids["completed"]]
    _done, modules = modules_added(argv, store_root)
    assert not {m for m in modules if m in never or m.split(".")[0] in never}


def modules_added(
    argv: list[str], store_root: Path, *flags: str
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """Run the command's ``main`` in a fresh Python (with ``flags``); return the
    run and the modules it imported beyond a bare start with the same flags."""
    code = _RUN_MAIN + _SHOW_MODULES
    done = run(sys.executable, *flags, "-c", code, *argv, root=store_root)
    bare = run(sys.executable, *flags, "-c", "import sys\n" + _SHOW_MODULES)
    assert done.returncode == bare.returncode == 0, done.stderr + bare.stderr
    modules = set(done.stderr.rpartition("MODULES=")[2].split())
    modules -= set(bare.stderr.rpartition("MODULES=")[2].split())
    assert "intentusnet.cli" in modules  # the probe really ran
    return done, modules


def test_run_through_stdin(script: str, app_dir: Path) -> None:
    """`run --app MODULE:ATTR -` routes an envelope read from stdin."""
    done = run(
        script,
        "run",
        "--app",
        "demo_app:router",
        "--json",
        "-",
        input=orjson.dumps(envelope(word="hi")),
    )
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout)["payload"] == {"echo": {"word": "hi"}}


def test_verify_all_piped_has_no_progress(
    script: str, store_root: Path, ids: dict[str, str]
) -> None:
    """Piped, verify --all prints failures and a summary: no progress, no colour."""
    done = run(script, "verify", "--all", root=store_root)
    assert done.returncode == 6
    assert done.stderr == ""
    assert "\x1b[" not in done.stdout
    lines = done.stdout.splitlines()
    assert [line.split(":")[0] for line in lines if line.startswith("exec-")] == [
        ids["tampered"]
    ]
    assert lines[-1].startswith(f"Total: {len(ids)} records (1 invalid")


def test_shell_completion(script: str) -> None:
    """click's completion script and completions work for the command."""
    source = run(script, _INTENTUSNET_COMPLETE="bash_source")
    assert source.returncode == 0
    assert "_intentusnet_completion" in source.stdout
    words = run(
        script,
        _INTENTUSNET_COMPLETE="bash_complete",
        COMP_WORDS="intentusnet records list --status co",
        COMP_CWORD="4",
    )
    assert words.stdout.split() == ["plain,completed"]


def _on_a_terminal(*argv: str, **env: str) -> tuple[int, str]:
    """Run argv with stdout and stderr on a pseudo-terminal; exit code and output."""
    import pty

    leader, follower = pty.openpty()
    full_env = {**os.environ, **env, "PYTHONPATH": CHECKOUT, "TERM": "xterm"}
    full_env.pop("INTENTUSNET_STORE", None)
    if "NO_COLOR" not in env:
        full_env.pop("NO_COLOR", None)
    child = subprocess.Popen(
        argv, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL, env=full_env
    )
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the terminal's other end is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(leader)
    return child.wait(timeout=30), b"".join(chunks).decode()


@pytest.mark.parametrize(
    "argv",
    [
        ("inspect", "exec-nope"),  # a library error: exit 3
        ("records", "list", "--limit", "0"),  # click's own usage error: exit 2
        ("recrods",),  # no such command: exit 2
    ],
)
def test_no_color_means_no_colour_on_a_terminal(
    script: str, store_root: Path, ids: dict[str, str], argv: tuple[str, ...]
) -> None:
    """NO_COLOR turns every colour off, the Error: line's included."""
    store = ("--store", str(store_root))
    code, coloured = _on_a_terminal(script, *store, *argv)
    assert code in (2, 3)
    assert "Error:" in coloured
    code_plain, plain = _on_a_terminal(script, *store, *argv, NO_COLOR="1")
    assert code_plain == code
    assert "Error:" in plain
    assert "\x1b[" not in plain
    _, listing = _on_a_terminal(script, *store, "records", "list", NO_COLOR="1")
    assert ids["completed"] in listing
    assert "\x1b[" not in listing
    _, listing = _on_a_terminal(script, *store, "records", "list")
    assert "\x1b[" in listing  # a terminal does show colour without NO_COLOR


def test_a_closed_pipe_ends_the_command_quietly(tmp_path: Path) -> None:
    """`records list | head -1` over many records: exit 0, nothing on stderr."""
    from intentusnet import IntentRouter

    root = tmp_path / "records"
    with IntentRouter(store=FileExecutionStore(root)) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"ok": True})
        for n in range(1500):  # a listing far larger than a pipe's buffer
            router.route_intent(envelope(n=n))
    listing = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "intentusnet.cli",
            "--store",
            str(root),
            "records",
            "list",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": CHECKOUT},
    )
    assert listing.stdout is not None
    assert listing.stderr is not None
    assert listing.stdout.readline().startswith(b"ID ")
    listing.stdout.close()  # as `head -1` does after one line
    errors = listing.stderr.read()
    listing.stderr.close()
    assert listing.wait(timeout=60) == 0, errors
    assert errors == b""


def _redraws(shown: str) -> int:
    """Carriage returns that redraw a line (the terminal ends lines with \r\n)."""
    return shown.count("\r") - shown.count("\r\n")


def _many_records(root: Path, count: int) -> None:
    from recordkit import finished

    with FileExecutionStore(root) as store:
        for n in range(count):
            finished(store, f"record {n}")


def test_reindex_and_prune_show_progress_only_on_a_terminal(
    script: str, tmp_path: Path
) -> None:
    """On a terminal: a total, redrawn a few times a second; piped: the result only."""
    import time

    root = tmp_path / "records"
    _many_records(root, 1000)
    store = ("--store", str(root))
    started = time.monotonic()
    code, shown = _on_a_terminal(script, *store, "reindex", "--jobs", "1")
    elapsed = time.monotonic() - started
    assert code == 0, shown
    assert "Reading records: 1,000/1,000 records (100%)" in shown
    assert _redraws(shown) <= elapsed / 0.2 + 3  # not one redraw a record
    assert "Reindexed 1000 records." in shown
    piped = run(script, *store, "reindex")
    assert (piped.returncode, piped.stderr) == (0, "")
    assert piped.stdout == "Reindexed 1000 records.\n"

    started = time.monotonic()
    code, shown = _on_a_terminal(script, *store, "prune", "--older-than", "0s")
    elapsed = time.monotonic() - started
    assert code == 0, shown
    assert "Deleting records: 1,000/1,000 records (100%)" in shown
    assert _redraws(shown) <= elapsed / 0.2 + 3
    _many_records(root, 20)
    piped = run(script, *store, "prune", "--older-than", "0s")
    assert piped.returncode == 0
    assert "records" not in piped.stderr.replace("Deleted 20 records.", "")
    assert "\r" not in piped.stderr + piped.stdout
    assert len(piped.stdout.split()) == 20  # the ids, nothing else
