"""The pytest plugin, run as users run it: real inner test files through pytester.

Each test writes an inner test module, starts the fake OpenAI/Anthropic API on
127.0.0.1 (its URL and key reach the inner tests through the environment), and
runs pytest on the inner module with the plugin's options, counting the
requests that reach the server. A replay runs with the server stopped. The
inner runs are in this process (the plugin is the subject, not a process);
importing the plugin in a fresh interpreter is tested on its own.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import anthropic
import httpcore
import httpx
import httpx2
import openai
import orjson
import pytest
from click.testing import CliRunner

from intentusnet.cli import cli
from intentusnet.integrations import cassette, network, pytest_plugin
from intentusnet.store import FileExecutionStore

from .fakeapi import API_KEY, FakeAPI

pytest_plugins = ["pytester"]

# The inner runs are in this process, and pytester drops the modules first
# imported during a run when it ends: what the plugin and the inner tests use is
# imported here once, so that every run shares one copy of each module.
SHARED = (anthropic, cassette, httpcore, httpx, httpx2, network, openai)

ROOT = Path(__file__).resolve().parents[2]
PLUGIN = "intentusnet.integrations.pytest_plugin"

#: One inner test asking the fake OpenAI API with a plain httpx client.
ASK = """
import os

import httpx
import pytest

URL, KEY = os.environ["FAKE_URL"], os.environ["FAKE_KEY"]


def ask(prompt):
    answer = httpx.post(
        f"{URL}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": prompt}]},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=10,
    )
    assert answer.status_code == 200
    return answer.json()["choices"][0]["message"]["content"]


@pytest.mark.intentusnet
def test_ask(intentusnet_cassette):
    for prompt in PROMPTS:
        assert ask(prompt) == f"echo {prompt} t=None"
    print("STATES", [i.cache for i in intentusnet_cassette.interactions])
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    """Run pytest on the inner files with the plugin, in this process."""
    return pytester.runpytest_inprocess(
        "-p", "no:cacheprovider", "-W", "error", "-s", *args, plugins=[pytest_plugin]
    )


@pytest.fixture(autouse=True)
def _inner_pytest(monkeypatch: pytest.MonkeyPatch) -> None:
    """The inner pytest loads this checkout's plugin and no other installed plugin."""
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")


def ask_module(pytester: pytest.Pytester, *prompts: str) -> None:
    """Write the inner ``test_inner.py`` asking ``prompts`` in order."""
    pytester.makepyfile(test_inner=f"PROMPTS = {list(prompts)!r}\n" + ASK)


def states(result: pytest.RunResult) -> list[str]:
    """The cache states the inner test printed, in order."""
    for line in result.outlines:
        if "STATES" in line:
            return re.findall(r"'(\w+)'", line.split("STATES", 1)[1])
    raise AssertionError("the inner test printed no states:\n" + result.stdout.str())


def cassette_files(pytester: pytest.Pytester) -> list[Path]:
    """Every file under the inner tests' cassettes directory."""
    return sorted(p for p in (pytester.path / "cassettes").rglob("*") if p.is_file())


@pytest.fixture
def api(monkeypatch: pytest.MonkeyPatch) -> FakeAPI:
    """The fake API, running; its URL and key in the inner tests' environment."""
    server = FakeAPI().__enter__()
    monkeypatch.setenv("FAKE_URL", server.url)
    monkeypatch.setenv("FAKE_KEY", API_KEY)
    yield server
    server.__exit__(None, None, None)


def test_options_and_marker_show_in_help(pytester: pytest.Pytester) -> None:
    """``pytest --help`` lists the three options; ``--markers`` the marker."""
    helped = run(pytester, "--help").stdout.str()
    for option in (
        "--intentusnet-record-mode",
        "--intentusnet-block-network",
        "--intentusnet-allowed-hosts",
    ):
        assert option in helped
    assert "rewrite (delete the cassette and record it anew)" in " ".join(
        helped.split()
    )
    assert (
        "@pytest.mark.intentusnet(record_mode"
        in run(pytester, "--markers").stdout.str()
    )


def test_entry_point_is_declared() -> None:
    """pyproject installs the plugin as the pytest11 entry point ``intentusnet``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert project["project"]["entry-points"]["pytest11"] == {"intentusnet": PLUGIN}


def test_plugin_imports_nothing_heavy() -> None:
    """Importing the plugin (as pytest does at start-up) imports no httpx, pydantic."""
    code = (
        f"import sys, {PLUGIN}\n"
        "heavy = {'httpx', 'httpx2', 'pydantic', 'orjson', 'diskcache'}\n"
        "assert not heavy & set(sys.modules), heavy & set(sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr


def test_unmarked_tests_are_untouched(pytester: pytest.Pytester, api: FakeAPI) -> None:
    """A test without the marker or fixture calls the network and leaves no cassette."""
    pytester.makepyfile(
        test_plain="""
        import os, httpx

        def test_plain():
            url = os.environ["FAKE_URL"] + "/v1/chat/completions"
            answer = httpx.post(url, json={}, timeout=10)
            assert answer.status_code == 401
            assert "x-intentusnet-cache" not in answer.headers
        """
    )
    run(pytester).assert_outcomes(passed=1)
    assert api.hits == 1
    assert not (pytester.path / "cassettes").exists()


def test_once_records_then_replays_with_the_server_stopped(
    pytester: pytest.Pytester, api: FakeAPI
) -> None:
    """``once`` records a new cassette; the default mode replays it, server down."""
    ask_module(pytester, "hello", "bye", "hello")
    first = run(pytester, "--intentusnet-record-mode=once")
    first.assert_outcomes(passed=1)
    assert states(first) == ["miss", "miss", "hit"]
    assert api.hits == 2
    store = pytester.path / "cassettes" / "test_inner" / "test_ask"
    assert len(list(store.glob("*/*.jsonl"))) == 2
    api.__exit__(None, None, None)  # nothing answers on that port any more
    second = run(pytester)
    second.assert_outcomes(passed=1)
    assert states(second) == ["hit", "hit", "hit"]
    third = run(pytester, "--intentusnet-record-mode=once")
    third.assert_outcomes(passed=1)
    assert states(third) == ["hit", "hit", "hit"]


def test_none_fails_a_new_request_naming_it_and_the_cassette(
    pytester: pytest.Pytester, api: FakeAPI
) -> None:
    """Mode ``none`` never calls: the test fails with RequestNotRecorded; no dir."""
    ask_module(pytester, "hello")
    result = run(pytester, "--intentusnet-record-mode=none")
    result.assert_outcomes(failed=1)
    assert api.hits == 0
    cassette = pytester.path / "cassettes" / "test_inner" / "test_ask"
    result.stdout.fnmatch_lines(
        [
            f"E *intentusnet.errors.RequestNotRecorded: POST {api.url}/v1/chat/"
            f"completions is not in the cassette {cassette} (envelope sha256:*); "
            "record mode 'none' never records; run with "
            "--intentusnet-record-mode=once*"
        ]
    )
    assert "_serve.py" not in result.stdout.str()  # the plugin's frames hidden
    assert not (pytester.path / "cassettes").exists()


def test_once_with_a_cassette_fails_a_new_request(
    pytester: pytest.Pytester, api: FakeAPI
) -> None:
    """``once`` on a recorded cassette replays it and refuses what it does not hold."""
    ask_module(pytester, "hello")
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=1)
    ask_module(pytester, "hello", "new")
    result = run(pytester, "--intentusnet-record-mode=once")
    result.assert_outcomes(failed=1)
    assert api.hits == 1
    result.stdout.fnmatch_lines(
        [
            "E *intentusnet.errors.RequestNotRecorded: POST */v1/chat/completions "
            "is not in the cassette * record mode 'once' records only a cassette "
            "that holds no records yet; run with "
            "--intentusnet-record-mode=new_episodes to add it*"
        ]
    )


def test_new_episodes_replays_and_adds(pytester: pytest.Pytester, api: FakeAPI) -> None:
    """``new_episodes`` answers what is recorded and records the new request."""
    ask_module(pytester, "hello")
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=1)
    ask_module(pytester, "hello", "new")
    added = run(pytester, "--intentusnet-record-mode=new_episodes")
    added.assert_outcomes(passed=1)
    assert states(added) == ["hit", "miss"]
    assert api.hits == 2
    api.__exit__(None, None, None)
    replayed = run(pytester)
    replayed.assert_outcomes(passed=1)
    assert states(replayed) == ["hit", "hit"]


def test_all_records_every_request_again(
    pytester: pytest.Pytester, api: FakeAPI
) -> None:
    """``all`` calls and records even what the cassette holds; the newest answers."""
    ask_module(pytester, "hello")
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=1)
    again = run(pytester, "--intentusnet-record-mode=all")
    again.assert_outcomes(passed=1)
    assert states(again) == ["bypass"]
    assert api.hits == 2
    store = pytester.path / "cassettes" / "test_inner" / "test_ask"
    assert len(list(store.glob("*/*.jsonl"))) == 2
    api.__exit__(None, None, None)
    run(pytester).assert_outcomes(passed=1)


def test_marker_and_config_options(pytester: pytest.Pytester, api: FakeAPI) -> None:
    """The marker's record_mode beats the command line; config feeds the transports."""
    pytester.makeconftest(
        """
        import pytest

        @pytest.fixture
        def intentusnet_config():
            return {"record_mode": "none", "ignore_body_paths": ["user"]}
        """
    )
    pytester.makepyfile(
        test_options="""
        import os, httpx, pytest

        def ask(user):
            return httpx.post(
                os.environ["FAKE_URL"] + "/v1/chat/completions",
                json={"model": "m", "user": user,
                      "messages": [{"role": "user", "content": "hi"}]},
                headers={"authorization": "Bearer " + os.environ["FAKE_KEY"]},
                timeout=10,
            )

        @pytest.mark.intentusnet(record_mode="once")
        def test_users(intentusnet_cassette):
            ask("ann")
            ask("bob")  # the same request: "user" is ignored
            assert [i.cache for i in intentusnet_cassette.interactions] == [
                "miss" if not intentusnet_cassette.existed else "hit", "hit"
            ]

        def test_config_mode(intentusnet_cassette):
            assert intentusnet_cassette.record_mode == "none"
        """
    )
    run(pytester, "--intentusnet-record-mode=all").assert_outcomes(passed=2)
    assert api.hits == 1


def test_bad_options_fail_the_test_precisely(
    pytester: pytest.Pytester, api: FakeAPI
) -> None:
    """An unknown option, record mode or positional marker argument: one clear line."""
    pytester.makepyfile(
        test_bad="""
        import pytest

        @pytest.mark.intentusnet(record_mode="sometimes")
        def test_mode():
            pass

        @pytest.mark.intentusnet(ignore_paths=["user"])
        def test_option():
            pass

        @pytest.mark.intentusnet("cassette.yaml")
        def test_positional():
            pass
        """
    )
    result = run(pytester)
    result.assert_outcomes(errors=3)
    out = result.stdout.str()
    assert (
        "unknown record mode 'sometimes'; use one of 'once', 'new_episodes', "
        "'none', 'all', 'rewrite'\n" in out
    )
    assert "unknown cassette option ignore_paths; the options are record_mode," in out
    assert "takes keyword options only, not ('cassette.yaml',)" in out
    assert "Traceback" not in out
    assert "cassette.py:" not in out
    wrong = run(pytester, "--intentusnet-record-mode=sometimes")
    assert wrong.ret == pytest.ExitCode.USAGE_ERROR
    wrong.stderr.fnmatch_lines(
        [
            "*invalid choice: 'sometimes' (choose from 'once', 'new_episodes', "
            "'none', 'all', 'rewrite')*"
        ]
    )


def test_parametrized_ids_make_safe_directories(
    pytester: pytest.Pytester, api: FakeAPI
) -> None:
    """Each parametrized case gets its own cassette; ``/`` and ``:`` become ``-``."""
    pytester.makepyfile(
        test_params="""
        import os, httpx, pytest

        class TestGroup:
            @pytest.mark.intentusnet
            @pytest.mark.parametrize("path", ["a/b:c", "d"])
            def test_get(self, path, intentusnet_cassette):
                httpx.post(os.environ["FAKE_URL"] + "/" + path, timeout=10)
        """
    )
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=2)
    made = sorted(p.name for p in (pytester.path / "cassettes/test_params").iterdir())
    assert made == ["TestGroup.test_get[a-b-c]", "TestGroup.test_get[d]"]


BLOCKED = """
import os, socket, httpx, pytest
from intentusnet import NetworkBlocked

URL, KEY = os.environ["FAKE_URL"], os.environ["FAKE_KEY"]
HOST, PORT = URL.removeprefix("http://").split(":")


def test_raw_socket():
    with pytest.raises(NetworkBlocked, match="is blocked"):
        socket.create_connection((HOST, int(PORT)), timeout=5)


def test_unmarked_client():
    with pytest.raises(httpx.ConnectError, match="is blocked"):
        httpx.get(URL, timeout=5)


@pytest.mark.intentusnet
def test_recording(intentusnet_cassette):
    answer = httpx.post(
        f"{URL}/v1/chat/completions",
        json={"model": "m", "messages": [{"role": "user", "content": "hi"}]},
        headers={"authorization": f"Bearer {KEY}"},
        timeout=10,
    )
    assert answer.status_code == 200
    if intentusnet_cassette.record_mode == "none":
        # Replaying needs no network, and the network stays blocked.
        with pytest.raises(NetworkBlocked):
            socket.create_connection((HOST, int(PORT)), timeout=5)
"""


def test_block_network(pytester: pytest.Pytester, api: FakeAPI) -> None:
    """Blocked: raw sockets, unmarked clients; a recording cassette may call."""
    pytester.makepyfile(test_blocked=BLOCKED)
    recorded = run(
        pytester, "--intentusnet-block-network", "--intentusnet-record-mode=once"
    )
    recorded.assert_outcomes(passed=3)
    assert api.hits == 1
    replayed = run(pytester, "--intentusnet-block-network")
    replayed.assert_outcomes(passed=3)
    assert api.hits == 1


ALLOWED = """
import os, socket, pytest
from intentusnet import NetworkBlocked

HOST, PORT = os.environ["FAKE_URL"].removeprefix("http://").split(":")


def test_allowed_host():
    socket.create_connection((HOST, int(PORT)), timeout=5).close()


def test_other_host():
    with pytest.raises(NetworkBlocked, match="127.0.0.2"):
        socket.create_connection(("127.0.0.2", int(PORT)), timeout=5)
"""


def test_allowed_hosts_stay_reachable(pytester: pytest.Pytester, api: FakeAPI) -> None:
    """``--intentusnet-allowed-hosts`` lets its hosts through, and only them."""
    pytester.makepyfile(test_allowed=ALLOWED)
    run(
        pytester, "--intentusnet-block-network", "--intentusnet-allowed-hosts=127.0.0.1"
    ).assert_outcomes(passed=2)
    run(pytester, "--intentusnet-block-network").assert_outcomes(passed=1, failed=1)


SDKS = """
import asyncio, os
from pathlib import Path

import anthropic, httpx, httpx2, openai, pytest

URL, KEY, OUT = os.environ["FAKE_URL"], os.environ["FAKE_KEY"], os.environ["OUT"]
ASK = {"model": "m", "messages": [{"role": "user", "content": "hi there"}]}


def save(cassette, name, data):
    run = "replay" if cassette.existed else "record"
    Path(OUT, f"{name}-{run}.bin").write_bytes(data)


@pytest.mark.intentusnet
def test_openai(intentusnet_cassette):
    client = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0)
    answer = client.chat.completions.create(**ASK)
    assert answer.choices[0].message.content == "echo hi there t=None"
    words = [
        chunk.choices[0].delta.content
        for chunk in client.chat.completions.create(**ASK, stream=True)
    ]
    assert "".join(words) == "echo hi there t=None"
    client.close()


@pytest.mark.intentusnet
def test_openai_async(intentusnet_cassette):
    async def main():
        client = openai.AsyncOpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0)
        answer = await client.chat.completions.create(**ASK, temperature=0.5)
        await client.close()
        return answer.choices[0].message.content

    assert asyncio.run(main()) == "echo hi there t=0.5"


@pytest.mark.intentusnet
def test_anthropic(intentusnet_cassette):
    client = anthropic.Anthropic(base_url=URL, api_key=KEY, max_retries=0)
    answer = client.messages.create(max_tokens=16, **ASK)
    assert answer.content[0].text == "echo hi there t=None"
    with client.messages.stream(max_tokens=16, **ASK) as stream:
        assert "".join(stream.text_stream) == "echo hi there t=None"
    client.close()


@pytest.mark.intentusnet
def test_anthropic_async(intentusnet_cassette):
    async def main():
        client = anthropic.AsyncAnthropic(base_url=URL, api_key=KEY, max_retries=0)
        async with client.messages.stream(max_tokens=16, **ASK) as stream:
            text = "".join([t async for t in stream.text_stream])
        await client.close()
        return text

    assert asyncio.run(main()) == "echo hi there t=None"


@pytest.mark.intentusnet(record_mode="none")
def test_sdks_refuse_what_is_not_recorded():
    from intentusnet import RequestNotRecorded

    never = {**ASK, "messages": [{"role": "user", "content": "never recorded"}]}
    gpt = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0)
    with pytest.raises(RequestNotRecorded, match="is not in the cassette"):
        gpt.chat.completions.create(**never)  # the OpenAI SDK lets it through
    claude = anthropic.Anthropic(base_url=URL, api_key=KEY, max_retries=0)
    with pytest.raises(anthropic.APIConnectionError) as caught:
        claude.messages.create(max_tokens=16, **never)
    assert isinstance(caught.value.__cause__, RequestNotRecorded)
    assert "is not in the cassette" in str(caught.value.__cause__)


@pytest.mark.intentusnet
def test_stream_bytes(intentusnet_cassette):
    body = {**ASK, "stream": True}
    headers = {"authorization": f"Bearer {KEY}"}
    with httpx.Client(timeout=10) as client:
        with client.stream("POST", URL + "/v1/chat/completions", json=body,
                           headers=headers) as answer:
            save(intentusnet_cassette, "stream", b"".join(answer.iter_raw()))
    with httpx2.Client(timeout=10) as client:
        anthropic_body = {**ASK, "stream": True, "max_tokens": 16}
        with client.stream("POST", URL + "/v1/messages", json=anthropic_body,
                           headers={"x-api-key": KEY}) as answer:
            save(intentusnet_cassette, "stream2", b"".join(answer.iter_raw()))
    expected = "hit" if intentusnet_cassette.existed else "miss"
    assert [i.cache for i in intentusnet_cassette.interactions] == [expected] * 2
"""


@pytest.mark.slow  # imports the OpenAI and Anthropic SDKs, runs inner sessions
def test_sdks_record_and_replay(
    pytester: pytest.Pytester, api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The OpenAI and Anthropic SDKs, sync, async and streamed, replay offline.

    Streamed bodies (httpx and httpx2) replay byte for byte, the API key is in
    no file, and a request not recorded fails with RequestNotRecorded (the
    Anthropic SDK raises its connection error from it).
    """
    out = pytester.path / "out"
    out.mkdir()
    monkeypatch.setenv("OUT", str(out))
    pytester.makepyfile(test_sdks=SDKS)
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=6)
    assert api.hits == 8
    assert (out / "stream-record.bin").read_bytes().startswith(b"data: {")
    assert (out / "stream2-record.bin").read_bytes().startswith(b"event: message_start")
    api.__exit__(None, None, None)
    run(pytester, "--intentusnet-block-network").assert_outcomes(passed=6)
    for name in ("stream", "stream2"):
        replayed = (out / f"{name}-replay.bin").read_bytes()
        assert replayed == (out / f"{name}-record.bin").read_bytes()
    files = cassette_files(pytester)
    assert any(path.suffix == ".jsonl" for path in files)
    for path in files:
        data = path.read_bytes()
        assert API_KEY.encode() not in data, path
        assert b"SECRET" not in data, path


def test_fixture_alone_records_requests_of_other_fixtures(
    pytester: pytest.Pytester, api: FakeAPI
) -> None:
    """The fixture without the marker works; a marked test's fixtures are recorded."""
    pytester.makepyfile(
        test_fixture="""
        import os, httpx, pytest

        @pytest.fixture
        def greeting():
            return httpx.post(os.environ["FAKE_URL"] + "/v1/x", timeout=10)

        @pytest.mark.intentusnet
        def test_from_fixture(greeting, intentusnet_cassette):
            assert greeting.headers["x-intentusnet-cache"] in ("miss", "hit")

        def test_fixture_only(intentusnet_cassette):
            answer = httpx.post(os.environ["FAKE_URL"] + "/v1/y", timeout=10)
            assert answer.extensions["intentusnet_cache"] in ("miss", "hit")
            assert intentusnet_cassette.misses + intentusnet_cassette.hits == 1
            assert len(intentusnet_cassette.record_ids()) == 1
        """
    )
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=2)
    assert api.hits == 2
    api.__exit__(None, None, None)
    run(pytester).assert_outcomes(passed=2)


def doc_example(name: str) -> str:
    """The example test file ``name`` in docs/pytest.md (its first line names it)."""
    text = (ROOT / "docs" / "pytest.md").read_text()
    match = re.search(rf"```python\n(# {re.escape(name)}\n.*?)```", text, re.S)
    assert match, f"docs/pytest.md has no {name} block"
    return match.group(1)


def test_documented_example_runs(pytester: pytest.Pytester) -> None:
    """docs/pytest.md's example records, replays, and replays with no network."""
    pytester.makepyfile(test_weather=doc_example("test_weather.py"))
    recorded = run(pytester, "--intentusnet-record-mode=once")
    recorded.assert_outcomes(passed=2)
    cassettes = pytester.path / "cassettes" / "test_weather"
    assert sorted(p.name for p in cassettes.iterdir()) == [
        "test_forecast",
        "test_forecast_async",
    ]
    run(pytester).assert_outcomes(passed=2)
    run(pytester, "--intentusnet-block-network").assert_outcomes(passed=2)


@pytest.mark.slow  # imports the OpenAI and Anthropic SDKs, runs inner sessions
def test_documented_sdk_example_runs(
    pytester: pytest.Pytester, api: FakeAPI, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/pytest.md's SDK example records both SDKs, then replays them offline."""
    monkeypatch.setenv("OPENAI_BASE_URL", api.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_BASE_URL", api.url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)
    pytester.makepyfile(test_chat=doc_example("test_chat.py"))
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=2)
    assert api.hits == 2
    api.__exit__(None, None, None)
    run(pytester, "--intentusnet-block-network").assert_outcomes(passed=2)


def cassette_bytes(pytester: pytest.Pytester) -> dict[str, bytes]:
    """Every file under the inner cassettes, by relative path, with its bytes."""
    root = pytester.path / "cassettes"
    return {str(p.relative_to(root)): p.read_bytes() for p in cassette_files(pytester)}


def test_a_cassette_holds_only_its_record_files(
    pytester: pytest.Pytester, api: FakeAPI
) -> None:
    """No catalog, no log in the cassette: recording writes records, replay nothing."""
    ask_module(pytester, "hello", "bye")
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=1)
    recorded = cassette_bytes(pytester)
    assert len(recorded) == 2
    assert all(
        re.fullmatch(r"test_inner/test_ask/[0-9a-f]{2}/exec-\w+\.jsonl", p)
        for p in recorded
    )
    dirs = [p for p in (pytester.path / "cassettes").rglob("*") if p.is_dir()]
    assert all(any(d.iterdir()) for d in dirs)  # no empty directory left either
    run(pytester).assert_outcomes(passed=1)
    assert cassette_bytes(pytester) == recorded
    store = str(pytester.path / "cassettes" / "test_inner" / "test_ask")
    for name in recorded:
        execution_id = Path(name).stem
        for command in (["records", "show"], ["inspect"], ["verify"]):
            shown = CliRunner().invoke(cli, ["--store", store, *command, execution_id])
            assert shown.exit_code == 0, shown.output
    assert cassette_bytes(pytester) == recorded  # the CLI's reads wrote nothing


@pytest.mark.parametrize(
    ("mode", "kept"),
    [
        ("none", True),
        ("once", True),  # the cassette holds records: it replays
        ("new_episodes", False),
        ("all", False),
        ("rewrite", False),
    ],
)
def test_an_old_cassettes_catalog_is_kept_by_replays_dropped_by_recordings(
    pytester: pytest.Pytester, api: FakeAPI, mode: str, kept: bool
) -> None:
    """An old catalog in a cassette: replaying keeps it, a recording mode drops it."""
    ask_module(pytester, "hello")
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=1)
    path = pytester.path / "cassettes" / "test_inner" / "test_ask"
    with FileExecutionStore(path) as old:  # as the store made cassettes before
        assert len(old.list()) == 1
    (path / "opened").mkdir(exist_ok=True)
    (path / "opened" / "1-dead.rows").write_text("[]\n")  # a killed writer's log
    before = {p.name: p.read_bytes() for p in path.glob("catalog.sqlite3*")}
    assert "catalog.sqlite3" in before
    run(pytester, f"--intentusnet-record-mode={mode}").assert_outcomes(passed=1)
    after = {p.name: p.read_bytes() for p in path.glob("catalog.sqlite3*")}
    if kept:
        assert after == before  # replaying writes nothing there
        assert (path / "opened" / "1-dead.rows").is_file()
    else:
        assert after == {}
        assert [p.name for p in path.iterdir() if len(p.name) != 2] == []  # shards
    with FileExecutionStore(path) as store:  # a catalog made now sees them all
        assert len(store.list()) == len(list(path.glob("*/*.jsonl")))


def test_rewrite_deletes_the_cassette_and_records_it_anew(
    pytester: pytest.Pytester, api: FakeAPI
) -> None:
    """``rewrite`` drops the old records and records each new request once."""
    ask_module(pytester, "hello")
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=1)
    old = set(cassette_bytes(pytester))
    ask_module(pytester, "bye", "bye")
    again = run(
        pytester, "--intentusnet-record-mode=rewrite", "--intentusnet-block-network"
    )
    again.assert_outcomes(passed=1)
    assert states(again) == ["miss", "hit"]  # equal requests get one answer
    assert api.hits == 2
    new = set(cassette_bytes(pytester))
    assert len(new) == 1
    assert not new & old
    api.__exit__(None, None, None)
    replayed = run(pytester)
    replayed.assert_outcomes(passed=1)
    assert states(replayed) == ["hit", "hit"]


def test_record_modes_of_the_option_are_the_cassettes() -> None:
    """The command line offers exactly the modes a cassette knows."""
    assert tuple(m.value for m in cassette.RecordMode) == pytest_plugin._MODES


#: A weather API whose answer is $FORECAST, recorded under one host name.
FORECAST = """
import os
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest


class Weather(BaseHTTPRequestHandler):
    def do_GET(self):
        body = ('{"forecast": "%s"}' % os.environ["FORECAST"]).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def url():
    server = ThreadingHTTPServer(("127.0.0.1", 0), Weather)
    thread = threading.Thread(target=server.serve_forever, args=(0.01,))
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


@pytest.fixture
def intentusnet_config(url):
    def one_host(request):
        request["url"] = request["url"].replace(url, "http://weather.test")
        return request

    return {"before_record_request": one_host}


@pytest.mark.intentusnet
def test_forecast(url):
    assert httpx.get(f"{url}/oslo").json() == {"forecast": os.environ["FORECAST"]}
"""


def git(cwd: Path, *args: str) -> str:
    """Run git in ``cwd`` with a fixed identity; return its output."""
    return subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def test_a_rerecorded_cassette_diffs_as_readable_text(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In git, a changed answer shows as text lines; no binary file is committed."""
    pytester.makepyfile(test_weather=FORECAST)
    monkeypatch.setenv("FORECAST", "sunny")
    run(pytester, "--intentusnet-record-mode=once").assert_outcomes(passed=1)
    git(pytester.path, "init", "-q")
    git(pytester.path, "add", "cassettes")
    git(pytester.path, "commit", "-q", "-m", "record")
    committed = git(pytester.path, "ls-files", "cassettes").split()
    assert [Path(name).suffix for name in committed] == [".jsonl"]
    monkeypatch.setenv("FORECAST", "snow")
    run(pytester, "--intentusnet-record-mode=rewrite").assert_outcomes(passed=1)
    git(pytester.path, "add", "-A", "cassettes")
    diff = git(pytester.path, "diff", "--cached", "--no-color")
    assert "Binary files" not in diff
    diff.encode("ascii")  # text a reviewer reads as it is
    lines = diff.splitlines()
    # the answer's line, old and new (its body a JSON string in the JSON line)
    assert [x for x in lines if x.startswith("-") and '\\"sunny\\"' in x]
    assert [x for x in lines if x.startswith("+") and '\\"snow\\"' in x]
    run(pytester).assert_outcomes(passed=1)  # the new cassette replays


#: What differs between two recordings of one test with the same answers, as
#: docs/pytest.md lists it (JSON paths in a record's lines; ``[]`` any item).
UNSTABLE = {
    "executionId",
    "createdUtc",
    "envelope.metadata.createdAt",
    "envelope.metadata.requestId",
    "owner.pid",
    "owner.startTicks",
    "owner.host",
    "owner.bootId",
    "atMs",
    "data.openedAfterMs",
    "data.requestId",
    "data.durationMs",
    "data.response.metadata.executionId",
    "data.response.metadata.durationMs",
    "data.response.metadata.attempts[].durationMs",
    "data.output.response.headers[]",  # the server's date
    "data.response.payload.response.headers[]",
    "prevHash",
    "hash",
}


def changed_paths(a: object, b: object, path: str = "") -> set[str]:
    """The JSON paths where ``a`` and ``b`` differ, list indexes as ``[]``."""
    if isinstance(a, dict) and isinstance(b, dict):
        found: set[str] = set()
        for key in a.keys() | b.keys():
            found |= changed_paths(a.get(key), b.get(key), f"{path}.{key}")
        return found
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return set().union(
            *(changed_paths(x, y, f"{path}[]") for x, y in zip(a, b, strict=True))
        )
    if a != b:
        # a header pair's value: the pair is the item that changed
        return {path.removesuffix("[]") if "headers[][]" in path else path}
    return set()


def test_two_recordings_differ_only_where_the_docs_say(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Recorded twice with one answer, a cassette differs in the listed fields only."""
    pytester.makepyfile(test_weather=FORECAST)
    monkeypatch.setenv("FORECAST", "sunny")
    lines = []
    for _ in range(2):
        run(pytester, "--intentusnet-record-mode=rewrite").assert_outcomes(passed=1)
        (record,) = (pytester.path / "cassettes").rglob("*.jsonl")
        lines.append([orjson.loads(line) for line in record.read_bytes().splitlines()])
    first, second = lines
    assert [line.get("type") for line in first] == [line.get("type") for line in second]
    changed = set().union(
        *(changed_paths(a, b) for a, b in zip(first, second, strict=True))
    )
    assert {p.lstrip(".") for p in changed} <= UNSTABLE
    assert "executionId" in {p.lstrip(".") for p in changed}  # it did record anew
