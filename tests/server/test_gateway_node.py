"""The TypeScript OpenAI and Anthropic SDKs (Node) record and replay via the gateway.

The SDKs are installed by npm into the module's temporary folder; without
``node`` or ``npm`` on PATH the test is skipped, saying so (CI installs them:
``.ci/run``).
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from integrations.fakeapi import API_KEY, FakeAPI

from .test_gateway import Gateway

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).with_name("gateway_sdks.mjs")
PACKAGES = ("openai", "@anthropic-ai/sdk")


@pytest.fixture(scope="module")
def sdks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the SDKs (``npm install``) and the script calling them."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("node and npm are not on PATH: the TypeScript SDKs cannot run")
    folder = tmp_path_factory.mktemp("node-sdks")
    (folder / "package.json").write_text('{"private": true}\n', encoding="utf-8")
    subprocess.run(
        [npm, "install", "--no-audit", "--no-fund", "--loglevel=error", *PACKAGES],
        cwd=folder,
        check=True,
        capture_output=True,
        timeout=300,
    )
    shutil.copy(SCRIPT, folder / SCRIPT.name)
    return folder


def _node_calls(sdks: Path, url: str) -> dict[str, object]:
    """Run the script against the gateway at ``url``; what it printed."""
    done = subprocess.run(
        ["node", str(sdks / SCRIPT.name), url, API_KEY],
        cwd=sdks,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    answer: dict[str, object] = json.loads(done.stdout)
    return answer


def test_typescript_sdks_record_then_replay_with_the_upstream_stopped(
    sdks: Path, tmp_path: Path
) -> None:
    """Plain bodies byte for byte and streamed events one by one, upstream gone."""
    root = tmp_path / "records"
    with FakeAPI() as api:
        gateway = Gateway(root, api.url, "--mode", "record")
        try:
            recorded = _node_calls(sdks, gateway.url)
        finally:
            gateway.stop()
        upstream = api.url
        assert api.hits == 4
    gateway = Gateway(root, upstream, "--mode", "replay")
    try:
        replayed = _node_calls(sdks, gateway.url)
    finally:
        gateway.stop()
    assert recorded.pop("cache") == ["bypass"] * 4
    assert replayed.pop("cache") == ["hit"] * 4
    assert replayed == recorded
    plain = json.loads(str(recorded["openai"]))
    assert plain["choices"][0]["message"]["content"] == "echo say hi from node t=None"
    events = recorded["openaiEvents"]
    assert isinstance(events, list)
    assert len(events) >= 6
    streamed = recorded["anthropicEvents"]
    assert isinstance(streamed, list)
    assert streamed[-1]["type"] == "message_stop"
