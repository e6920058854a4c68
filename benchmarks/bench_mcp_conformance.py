"""The official MCP conformance suite: directly, through the proxy, then replayed.

Run: ``python benchmarks/bench_mcp_conformance.py [--node PATH] [--keep]``.

Installs ``@modelcontextprotocol/conformance`` and the reference server
``@modelcontextprotocol/server-everything`` with npm into a temporary folder,
starts the server (streamable HTTP), and runs ``conformance server --url ...``
three times:

1. directly against the server;
2. through ``intentusnet mcp proxy --mode record --listen ... --upstream-url ...``;
3. through one ``--mode replay --listen`` proxy, with the server stopped.

Then prints each scenario's result side by side (a scenario passes when none
of its checks failed) and the counts. The suite needs Node 22 or newer: with
an older ``node`` on the PATH the script says so and stops; ``--node`` names
another (``npm install --prefix /tmp/node22 node@22`` puts one, from the npm
registry, at ``/tmp/node22/node_modules/node/bin/node``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PACKAGES = (
    "@modelcontextprotocol/conformance",
    "@modelcontextprotocol/server-everything",
)
NODE_MAJOR = 22
LIMIT = 60.0
_STAMP = re.compile(r"-\d{4}-\d{2}-\d{2}T[\d\-.:Z]+$")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + LIMIT
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if process.poll() is not None:
                sys.exit(f"{process.args} exited with {process.returncode}")
            if time.monotonic() > deadline:
                sys.exit(f"nothing listens on port {port}")
            time.sleep(0.1)


def _node_major(node: str) -> int:
    shown = subprocess.run([node, "--version"], capture_output=True, text=True)
    return int(shown.stdout.strip().lstrip("v").split(".")[0])


def _bin(work: Path, package: str) -> Path:
    """The executable an installed package declares (its first ``bin``)."""
    manifest = json.loads(
        (work / "node_modules" / package / "package.json").read_text()
    )
    declared = manifest["bin"]
    name = (
        next(iter(declared)) if isinstance(declared, dict) else package.split("/")[-1]
    )
    return work / "node_modules" / ".bin" / name


def _conformance(
    suite: Path, url: str, where: Path, env: dict[str, str]
) -> dict[str, bool]:
    """Run every server scenario against ``url``; each scenario's pass or fail."""
    where.mkdir(parents=True)
    subprocess.run(
        [str(suite), "server", "--url", url, "--output-dir", str(where / "results")],
        cwd=where,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=1800,
        check=False,
    )
    results: dict[str, bool] = {}
    for checks in sorted(where.glob("results/*/checks.json")):
        name = _STAMP.sub("", checks.parent.name)
        name = name.removeprefix("server-").removesuffix("-server")
        found = json.loads(checks.read_text())
        results[name] = not any(c.get("status") == "FAILURE" for c in found)
    return results


def _proxy(work: Path, mode: str, upstream: str, port: int) -> subprocess.Popen[bytes]:
    args = [sys.executable, "-m", "intentusnet.cli", "mcp", "proxy"]
    args += ["--store", str(work / "records"), "--mode", mode]
    args += ["--listen", f"127.0.0.1:{port}", "--upstream-url", upstream]
    log = open(work / f"proxy-{mode}.log", "wb")  # noqa: SIM115 - the proxy's to close
    proxy = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=log)
    _wait_port(port, proxy)
    return proxy


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=LIMIT)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def main() -> None:
    """Install, run the three passes, print the side-by-side results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--node", default=shutil.which("node") or "node")
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    options = parser.parse_args()
    node = str(Path(options.node).resolve()) if os.sep in options.node else options.node
    try:
        major = _node_major(node)
    except (OSError, ValueError):
        sys.exit(
            f"no usable node at {options.node!r} (Node {NODE_MAJOR} or newer needed)"
        )
    if major < NODE_MAJOR:
        sys.exit(
            f"the conformance suite needs Node {NODE_MAJOR} or newer; {node} is "
            f"Node {major}. Install one from the npm registry "
            f"(npm install --prefix /tmp/node22 node@{NODE_MAJOR}) and run again with "
            f"--node /tmp/node22/node_modules/node/bin/node"
        )
    work = Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    env = dict(os.environ)
    if os.sep in node:  # the chosen node first, for npm and the packages' scripts
        env["PATH"] = f"{Path(node).parent}{os.pathsep}{env.get('PATH', '')}"
    try:
        subprocess.run(
            [
                "npm",
                "install",
                "--prefix",
                str(work),
                "--no-audit",
                "--no-fund",
                *PACKAGES,
            ],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
        suite = _bin(work, PACKAGES[0])
        port = _free_port()
        server = subprocess.Popen(
            [str(_bin(work, PACKAGES[1])), "streamableHttp"],
            env={**env, "PORT": str(port)},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        upstream = f"http://127.0.0.1:{port}/mcp"
        try:
            _wait_port(port, server)
            direct = _conformance(suite, upstream, work / "direct", env)
            listen = _free_port()
            proxy = _proxy(work, "record", upstream, listen)
            try:
                url = f"http://127.0.0.1:{listen}/mcp"
                recorded = _conformance(suite, url, work / "record", env)
            finally:
                _stop(proxy)
        finally:
            _stop(server)
        listen = _free_port()
        proxy = _proxy(work, "replay", upstream, listen)  # the server is stopped
        try:
            url = f"http://127.0.0.1:{listen}/mcp"
            replayed = _conformance(suite, url, work / "replay", env)
        finally:
            _stop(proxy)
        _report(direct, recorded, replayed)
    finally:
        if options.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _report(
    direct: dict[str, bool], recorded: dict[str, bool], replayed: dict[str, bool]
) -> None:
    names = sorted({*direct, *recorded, *replayed})
    width = max((len(n) for n in names), default=8)

    def shown(results: dict[str, bool], name: str) -> str:
        return {True: "pass", False: "FAIL", None: "-"}[results.get(name)]

    print(f"{'scenario':<{width}}  direct  record  replay")
    for name in names:
        row = [shown(r, name) for r in (direct, recorded, replayed)]
        print(f"{name:<{width}}  {row[0]:<6}  {row[1]:<6}  {row[2]:<6}")
    counts = [sum(r.values()) for r in (direct, recorded, replayed)]
    print(
        f"{'passed':<{width}}  {counts[0]:<6}  {counts[1]:<6}  {counts[2]:<6}"
        f"  (of {len(names)})"
    )
    live = {n for n, ok in direct.items() if ok}
    lost = sorted(n for n in live if not replayed.get(n))
    print(
        "replay passes every scenario the server passes"
        if not lost
        else f"replay fails: {', '.join(lost)}"
    )


if __name__ == "__main__":
    main()
