"""The official MCP conformance suite passes through the proxy as it passes directly.

``@modelcontextprotocol/conformance`` 0.2 (installed with npm into the test's
own folder) runs against ``conformance_server.py`` (the official Python SDK,
speaking 2025-11-25 and 2026-07-28) directly, through ``mcp proxy --listen``
recording (an HTTP upstream), and through ONE replay proxy with the server
stopped. The whole 2026-07-28 requirement set runs; of the 2025-11-25 set, four
scenarios whose traffic the 2026 set does not have (the handshake, a server's
own request mid-call, log lines, a stream the server closes mid-call).
``benchmarks/bench_mcp_conformance.py`` runs every scenario of both sets, with a
stdio upstream too.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from . import conformancekit as kit

pytest.importorskip("mcp")

# npm, the suite (node) and three Python processes: tens of seconds
pytestmark = pytest.mark.slow

#: The 2025-11-25 scenarios run (each a suite run of its own).
SCENARIOS_2025 = (
    "server-initialize",
    "tools-call-with-logging",
    "tools-call-sampling",
    "server-sse-polling",
)
#: Where the proxy's checks differ from the server's, and why.
DIFFERENCES: dict[tuple[str, str, str], tuple[kit.Tally, str]] = {
    ("record", "2026-07-28", "server-sse-multiple-streams"): (
        kit.Tally(2, 0),
        "one check more: the proxy answers each request on a stream of its own "
        "where the SDK's server answers with plain JSON, which the suite skips",
    ),
    ("replay", "2026-07-28", "server-sse-multiple-streams"): (
        kit.Tally(2, 0),
        "as recording",
    ),
}


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    """The suite, installed with npm into the module's own folder."""
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed (the suite is a Node package)")
    work = tmp_path_factory.mktemp("conformance")
    try:
        return kit.install(work)
    except subprocess.CalledProcessError as exc:
        pytest.fail(f"npm could not install {kit.SUITE}: {exc}")


def _sets(
    suite: tuple[Path, dict[str, str]], url: str, where: Path
) -> dict[str, dict[str, kit.Tally]]:
    return {
        "2025-11-25": kit.run(*suite, url, "2025-11-25", where / "25", SCENARIOS_2025),
        "2026-07-28": kit.run(*suite, url, "2026-07-28", where / "26"),
    }


def test_the_proxy_passes_the_suite_as_the_server_does(
    suite: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    """Recorded and replayed by one proxy, each scenario's checks are as direct."""
    port = kit.free_port()
    upstream = f"http://127.0.0.1:{port}/mcp"
    server = kit.server(port, tmp_path / "server.log")
    try:
        direct = _sets(suite, upstream, tmp_path / "direct")
        listen = kit.free_port()
        proxy = kit.proxy(
            tmp_path / "store",
            "record",
            listen,
            tmp_path / "proxy.log",
            ["--upstream-url", upstream],
        )
        try:
            url = f"http://127.0.0.1:{listen}/mcp"
            recorded = _sets(suite, url, tmp_path / "record")
        finally:
            kit.stop(proxy)
    finally:
        kit.stop(server)
    listen = kit.free_port()
    proxy = kit.proxy(tmp_path / "store", "replay", listen, tmp_path / "replay.log")
    try:
        replayed = _sets(suite, f"http://127.0.0.1:{listen}/mcp", tmp_path / "replay")
    finally:
        kit.stop(proxy)
    assert kit.totals(direct["2026-07-28"])[0] >= 160  # the server does pass it
    for pass_name, found in (("record", recorded), ("replay", replayed)):
        for requirements, results in direct.items():
            assert set(found[requirements]) == set(results)
            for scenario, tally in results.items():
                known = DIFFERENCES.get((pass_name, requirements, scenario))
                expected = tally if known is None else known[0]
                assert found[requirements][scenario] == expected, (
                    pass_name,
                    requirements,
                    scenario,
                )
