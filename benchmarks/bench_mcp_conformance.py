"""The official MCP conformance suite: directly, through the proxy, then replayed.

Run: ``python benchmarks/bench_mcp_conformance.py [--keep]``.

Installs ``@modelcontextprotocol/conformance`` 0.2 with npm into a temporary
folder (and a Node 22 from the npm registry when the ``node`` on the PATH is
older), and runs the server scenarios of both requirement sets
(``--requirements 2025-11-25`` and ``2026-07-28``) against
``tests/integrations/mcp/conformance_server.py`` (the official Python SDK,
speaking both revisions):

1. directly, the server over streamable HTTP;
2. through ``intentusnet mcp proxy --mode record --listen`` with the server
   as a stdio upstream (``-- python conformance_server.py``);
3. the same with the server over HTTP (``--upstream-url``);
4. through one ``--mode replay --listen`` proxy per store of 2 and 3, the
   server stopped: each answers both requirement sets.

Then prints each scenario's checks passed and failed side by side, and the
totals: checks passed / scenarios with no check failed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent.parent / "tests" / "integrations" / "mcp"))

import conformancekit as kit

COLUMNS = ("direct", "record stdio", "record http", "replay stdio", "replay http")


def _recorded(
    suite: Path, env: dict[str, str], work: Path, kind: str, upstream: list[str]
) -> dict[str, dict[str, kit.Tally]]:
    """Both sets through one recording proxy of ``kind``; each set's results."""
    port = kit.free_port()
    store, log = work / f"store-{kind}", work / "proxy.log"
    proxy = kit.proxy(store, "record", port, log, upstream)
    try:
        return {
            each: kit.run(suite, env, _url(port), each, work / f"record-{kind}-{each}")
            for each in kit.REQUIREMENTS
        }
    finally:
        kit.stop(proxy)


def _replayed(
    suite: Path, env: dict[str, str], work: Path, kind: str
) -> dict[str, dict[str, kit.Tally]]:
    """Both sets through one replay proxy of the store ``kind`` recorded."""
    port = kit.free_port()
    proxy = kit.proxy(work / f"store-{kind}", "replay", port, work / "proxy.log")
    try:
        return {
            each: kit.run(suite, env, _url(port), each, work / f"replay-{kind}-{each}")
            for each in kit.REQUIREMENTS
        }
    finally:
        kit.stop(proxy)


def _url(port: int) -> str:
    return f"http://127.0.0.1:{port}/mcp"


def main() -> None:
    """Install, run the passes, print the side-by-side results."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keep", action="store_true", help="keep the temporary folder")
    options = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="mcp-conformance-"))
    try:
        suite, env = kit.install(work)
        port = kit.free_port()
        server = kit.server(port, work / "server.log")
        try:
            direct = {
                each: kit.run(suite, env, _url(port), each, work / f"direct-{each}")
                for each in kit.REQUIREMENTS
            }
            stdio = _recorded(suite, env, work, "stdio", kit.stdio_upstream())
            http = _recorded(suite, env, work, "http", ["--upstream-url", _url(port)])
        finally:
            kit.stop(server)
        passes = [
            direct,
            stdio,
            http,
            _replayed(suite, env, work, "stdio"),
            _replayed(suite, env, work, "http"),
        ]
        for each in kit.REQUIREMENTS:
            _report(each, [p[each] for p in passes])
    finally:
        if options.keep:
            print(f"kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _report(requirements: str, passes: list[dict[str, kit.Tally]]) -> None:
    names = sorted({n for p in passes for n in p})
    width = max((len(n) for n in names), default=8)
    print(f"\n--requirements {requirements} (checks passed/failed)")
    print(f"{'scenario':<{width}}  " + "  ".join(f"{c:<12}" for c in COLUMNS))
    for name in names:
        cells = []
        for results in passes:
            found = results.get(name)
            cells.append("-" if found is None else f"{found.passed}/{found.failed}")
        marker = "" if len(set(cells)) == 1 else "  *"
        print(f"{name:<{width}}  " + "  ".join(f"{c:<12}" for c in cells) + marker)
    shown = [kit.totals(p) for p in passes]
    print(
        f"{'checks / clean':<{width}}  "
        + "  ".join(f"{f'{c} / {s}':<12}" for c, s in shown)
        + f"  (of {len(names)} scenarios)"
    )


if __name__ == "__main__":
    main()
