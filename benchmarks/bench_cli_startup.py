"""Cold start of the ``intentusnet`` command, beside a bare Python start.

Each command runs as a fresh subprocess; the figure is the median wall-clock
time over RUNS runs, after two warm-up runs that fill the OS file cache and
write the bytecode cache. Bytecode caching is on, as for any user, even if
this shell sets PYTHONDONTWRITEBYTECODE (else every run would recompile the
package and measure the compiler). The record replayed is a real one, routed
into a temporary store first.

Run: python benchmarks/bench_cli_startup.py [RUNS]
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from intentusnet import IntentRouter
from intentusnet.store import FileExecutionStore

RUNS = int(sys.argv[1]) if len(sys.argv) > 1 else 20


def console_script() -> list[str]:
    """The installed ``intentusnet`` script itself (not a pyenv/asdf shim)."""
    script = Path(sysconfig.get_path("scripts")) / "intentusnet"
    if script.exists():
        return [str(script)]
    found = shutil.which("intentusnet")
    return [found] if found else [sys.executable, "-m", "intentusnet.cli"]


def median_ms(argv: list[str], env: dict[str, str]) -> float:
    """Median wall-clock milliseconds of running ``argv`` to completion."""
    samples = []
    for i in range(RUNS + 2):
        start = time.perf_counter()
        done = subprocess.run(argv, env=env, capture_output=True, check=False)
        elapsed = (time.perf_counter() - start) * 1000
        if done.returncode != 0:
            raise SystemExit(f"{argv} failed: {done.stderr.decode()}")
        if i >= 2:
            samples.append(elapsed)
    return statistics.median(samples)


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


def main() -> None:
    """Print the medians."""
    script = console_script()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "records"
        execution_id = record_one(root)
        env = {**os.environ, "INTENTUSNET_STORE": str(root)}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        floor = "import intentusnet.store, intentusnet.replay"
        rows = [
            ("python -c pass", [sys.executable, "-c", "pass"]),
            # The floors under the command: its framework and the library read path.
            ("python -c 'import click'", [sys.executable, "-c", "import click"]),
            ("python -c '<store+replay>'", [sys.executable, "-c", floor]),
            ("intentusnet --help", [*script, "--help"]),
            ("intentusnet replay ID", [*script, "replay", execution_id]),
        ]
        print(f"median wall-clock of {RUNS} runs each ({' '.join(script)})")
        medians = {label: median_ms(argv, env) for label, argv in rows}
    base = medians["python -c pass"]
    print(f"  (<store+replay> = {floor})")
    for label, value in medians.items():
        extra = "" if label == "python -c pass" else f"  (+{value - base:.1f} ms)"
        print(f"  {label:<28} {value:7.1f} ms{extra}")


if __name__ == "__main__":
    main()
