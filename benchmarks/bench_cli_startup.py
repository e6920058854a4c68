"""Cold start of the ``intentusnet`` command and of a first routed intent.

Beside a bare Python start, three rows depend on the package: ``intentusnet
--help``, ``intentusnet replay ID``, and a fresh process's first routed intent
(``import intentusnet``, build a router, route one intent, as
``FIRST_ROUTE`` below does).

Each command runs as a fresh subprocess; the figure is the median wall-clock
time over RUNS runs, after two warm-up runs that fill the OS file cache and
write the bytecode cache; beside it, the median CPU time (user + system) of
the same runs, which a busy machine moves far less, a command's given over
that of ``python -c "import click, orjson"``. Bytecode caching is on, as for
any user, even if this shell sets PYTHONDONTWRITEBYTECODE (else every run
would recompile the package and measure the compiler). The record replayed
is a real one, routed into a temporary store first.

By default this times the installed console script and the installed package.
``--checkout DIR`` times the same script with the package of the source
checkout DIR instead (``DIR`` first on ``PYTHONPATH``, ahead of an editable
install); give it twice, e.g. a base worktree and a changed one, to compare
them: their runs are interleaved, so load on the machine hits both alike. The
rows that do not depend on the package (``python -c pass``, ``import click``,
``import orjson``) run once per round, and every ``+`` figure is over the same
``pass`` median.

``--venv`` times what a user gets from ``pip install``: each checkout (or, with
no ``--checkout``, the source tree this script is in) is installed, not
editable, into a fresh virtual environment made with this Python, and that
environment's ``python`` and ``intentusnet`` are timed. An editable install
runs its finder at every start, ``python -c pass`` included (16 ms becomes
35 ms in a venv here), and the finder imports ``pathlib``, ``re`` and more that
the command then finds loaded, which hides part of the command's cost from its
``+`` figure; a regular install is also what users run. The environments live
in the temporary directory and go with it; pip fetches the dependencies (from
its cache after the first time), so the option needs the package index or a
cache.

Run: python benchmarks/bench_cli_startup.py [RUNS] [--checkout DIR ...] [--venv]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path
from typing import NamedTuple

from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

#: A fresh process's first routed intent: import, build a router, route one.
FIRST_ROUTE = """
from intentusnet import IntentRouter
router = IntentRouter()
router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
answer = router.route_intent({"intent": {"name": "echo"}, "payload": {"x": 1}})
assert answer.status == "success", answer
"""


def console_script() -> list[str]:
    """The installed ``intentusnet`` script itself (not a pyenv/asdf shim)."""
    script = Path(sysconfig.get_path("scripts")) / "intentusnet"
    if script.exists():
        return [str(script)]
    found = shutil.which("intentusnet")
    return [found] if found else [sys.executable, "-m", "intentusnet.cli"]


def run_ms(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[float, float]:
    """Wall-clock and CPU (user + system) milliseconds of running ``argv``.

    The CPU time is the child's own, which other work on a busy machine
    changes far less than the wall clock.
    """
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, check=False)
    elapsed = (time.perf_counter() - start) * 1000
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{argv} failed: {done.stderr.decode()}")
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return elapsed, cpu * 1000


def record_one(root: Path) -> str:
    """Route one echo intent into a store at ``root``; return its execution id."""
    with IntentRouter(store=FileExecutionStore(root)) as router:
        router.agent("echo", name="echo")(lambda env, ctx: {"echo": env.payload})
        response = router.route_intent(
            {"intent": {"name": "echo"}, "payload": {"text": "hello"}}
        )
    execution_id = response.metadata.execution_id
    assert execution_id is not None
    return execution_id


class Target(NamedTuple):
    """One package to time: the interpreter, the script and the environment."""

    label: str | None
    python: str
    script: list[str]
    env: dict[str, str]


def environment(root: Path, checkout: Path | None) -> dict[str, str]:
    """The environment of every run: the store, and the checkout's package."""
    env = {**os.environ, "INTENTUSNET_STORE": str(root)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    if checkout is not None:
        paths = [str(checkout.resolve()), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    return env


def fresh_venv(where: Path, source: Path, root: Path) -> Target:
    """A new virtual environment at ``where`` with ``source`` pip-installed."""
    print(f"installing {source} into a fresh venv ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(where)], check=True)
    bin_dir = where / "bin"  # POSIX only, as the store is
    python = str(bin_dir / "python")
    pip = [python, "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    subprocess.run([*pip, str(source.resolve())], check=True)
    # Nothing of this shell's Python setup may reach the venv's package.
    env = environment(root, None)
    env.pop("PYTHONPATH", None)
    return Target(str(source), python, [str(bin_dir / "intentusnet")], env)


def main() -> None:
    """Print the medians, per checkout when given some."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="?", type=int, default=20)
    parser.add_argument("--checkout", type=Path, action="append", default=[])
    parser.add_argument(
        "--venv",
        action="store_true",
        help="time a pip install of each checkout in a fresh venv",
    )
    options = parser.parse_args()
    floor = (
        "import intentusnet.replay; from intentusnet.store import FileExecutionStore"
    )
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "records"
        execution_id = record_one(root)
        if options.venv:
            sources = options.checkout or [Path(__file__).resolve().parents[1]]
            targets = [
                fresh_venv(Path(tmp) / f"venv{i}", source, root)
                for i, source in enumerate(sources)
            ]
        else:
            script = console_script()
            targets = [
                Target(
                    None if checkout is None else str(checkout),
                    sys.executable,
                    script,
                    environment(root, checkout),
                )
                for checkout in options.checkout or [None]
            ]
        python = targets[0].python
        # Rows that do not depend on the checkout run once per round, with the
        # first target's interpreter; the others once per target.
        shared = [
            ("python -c pass", [python, "-c", "pass"]),
            # The floors under the command: its framework, the JSON library
            # the library reads records with (it imports datetime, uuid,
            # dataclasses, json), and the library read path.
            ("python -c 'import click'", [python, "-c", "import click"]),
            ("python -c 'import orjson'", [python, "-c", "import orjson"]),
            # Both: the floor under any command that reads a record.
            (
                "python -c 'import click, orjson'",
                [python, "-c", "import click, orjson"],
            ),
        ]
        own = [
            ("python -c '<store+replay>'", lambda t: [t.python, "-c", floor]),
            ("intentusnet --help", lambda t: [*t.script, "--help"]),
            ("intentusnet replay ID", lambda t: [*t.script, "replay", execution_id]),
            ("first routed intent", lambda t: [t.python, "-c", FIRST_ROUTE]),
        ]
        samples: dict[tuple[int, str], list[float]] = {}
        cpu: dict[tuple[int, str], list[float]] = {}
        # Two warm-up rounds, then RUNS rounds; each round runs every command
        # once per target, so no target gets a quieter stretch of time.
        # The runs start in the temporary directory: ``python -c`` puts the
        # current directory on sys.path, which must not pick the package.
        for round_ in range(options.runs + 2):
            runs = [(0, label, argv) for label, argv in shared]
            runs += [
                (i, label, argv(target))
                for label, argv in own
                for i, target in enumerate(targets)
            ]
            for index, label, command in runs:
                elapsed, used = run_ms(command, targets[index].env, Path(tmp))
                if round_ >= 2:
                    samples.setdefault((index, label), []).append(elapsed)
                    cpu.setdefault((index, label), []).append(used)
    how = "fresh venvs, pip install" if options.venv else " ".join(targets[0].script)
    print(f"median wall-clock of {options.runs} runs each ({how})")
    print(f"  (<store+replay> = {floor})")
    print("  CPU: median user + system time; for the commands, over the floor's")
    base = statistics.median(samples[0, "python -c pass"])
    floor_cpu = statistics.median(cpu[0, "python -c 'import click, orjson'"])
    for label, _ in shared:
        value = statistics.median(samples[0, label])
        extra = "" if label == "python -c pass" else f"  (+{value - base:.1f} ms)"
        used = statistics.median(cpu[0, label])
        print(f"  {label:<28} {value:7.1f} ms{extra}  CPU {used:.1f} ms")
    for index, target in enumerate(targets):
        if target.label is not None:
            print(f"checkout {target.label}")
        for label, _ in own:
            value = statistics.median(samples[index, label])
            used = statistics.median(cpu[index, label])
            print(
                f"  {label:<28} {value:7.1f} ms  (+{value - base:.1f} ms)"
                f"  CPU {used:.1f} ms (+{used - floor_cpu:.1f} over click, orjson)"
            )


if __name__ == "__main__":
    main()
