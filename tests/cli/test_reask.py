"""``reask`` and ``rerun --reask``: a recorded model call asked again from the shell.

The application asks the fake OpenAI API (on 127.0.0.1, answering per model)
through the real SDK twice, the second prompt quoting the first answer.
"""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from integrations.fakeapi import API_KEY, FakeAPI

from .support import Invoke, write_json

STORY_APP = textwrap.dedent(
    f"""
    import os
    import httpx
    import openai
    from intentusnet import IntentRouter, open_store
    from intentusnet.integrations.httpx import RecordingTransport

    store = open_store()
    router = IntentRouter(store=store)

    @router.agent("story")
    def story(env, ctx):
        transport = RecordingTransport(store)
        with httpx.Client(transport=transport, timeout=10) as http:
            client = openai.OpenAI(
                base_url=os.environ["FAKE_URL"] + "/v1",
                api_key="{API_KEY}",
                http_client=http,
                max_retries=0,
            )

            def chat(prompt):
                answer = client.chat.completions.create(
                    model="model-a", messages=[{{"role": "user", "content": prompt}}]
                )
                return answer.choices[0].message.content

            line = chat(env.payload["prompt"])
            return {{"line": line, "verdict": chat("judge " + line)}}
    """
)


@pytest.fixture(scope="module")
def api() -> Iterator[FakeAPI]:
    """The fake API, answering per model."""
    with FakeAPI(by_model=True) as server:
        yield server


@pytest.fixture
def story(
    invoke: Invoke, app_dir: Path, store_root: Path, api: FakeAPI
) -> tuple[tuple[str, str], str]:
    """``--store`` and one recorded ``story`` execution's id."""
    (app_dir / "demo_app_story.py").write_text(STORY_APP)
    store = ("--store", str(store_root))
    request = write_json(
        app_dir / "story.json",
        {"intent": {"name": "story"}, "payload": {"prompt": "hi"}},
    )
    ran = invoke(
        *store, "run", "--app", "demo_app_story:router", str(request), FAKE_URL=api.url
    )
    assert ran.exit_code == 0, ran.output
    return store, str(orjson.loads(ran.stdout)["metadata"]["executionId"])


def test_reask_prints_answers_side_by_side(
    invoke: Invoke, story: tuple[tuple[str, str], str], tmp_path: Path
) -> None:
    """Another model, twice, priced: a table of both sides, then the texts."""
    store, source = story
    prices = write_json(
        tmp_path / "prices.json",
        {"currency": "USD", "models": {"model-*": {"input": 1, "output": 2}}},
    )
    result = invoke(
        *store,
        "reask",
        source,
        "--step",
        "1",
        "--model",
        "model-b",
        "--times",
        "2",
        "--set",
        "temperature=0.5",
        "--prices",
        str(prices),
        OPENAI_API_KEY=API_KEY,
    )
    assert result.exit_code == 0, result.output
    out = result.stdout
    assert f"Re-asked step 1 of {source} as exec-" in out
    assert "changed: model, temperature" in out
    for shown in ("ask 2", "cost (USD)", "tokens out"):
        assert shown in out
    assert "Recorded answer\n  echo hi t=None by model-a" in out
    assert "\n  echo hi t=0.5 by model-b" in out
    assert "differs at: choices[0].message.content" in out

    as_json = invoke(
        *store, "reask", source, "--step", "1", "--json", OPENAI_API_KEY=API_KEY
    )
    assert as_json.exit_code == 0, as_json.output
    doc = orjson.loads(as_json.stdout)
    assert doc["sourceExecutionId"] == source
    assert doc["changed"] == []
    assert doc["answers"][0]["text"] == doc["recorded"]["text"]


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (("--step", "1"), {"OPENAI_API_KEY": ""}, "set OPENAI_API_KEY"),
        (("--step", "1", "--set", "model=gpt"), {}, "the value is not JSON"),
        (("--step", "7"), {}, "has no step 7"),
        ((), {}, "name the model call by its step"),
    ],
    ids=["no key", "bad JSON", "no such step", "no step"],
)
def test_reask_errors_are_one_line(
    invoke: Invoke, story: tuple[tuple[str, str], str], api: FakeAPI, args, env, message
) -> None:
    """Refusals exit 2 with one clear line and send nothing."""
    store, source = story
    before = api.hits
    result = invoke(
        *store, "reask", source, *args, **{"OPENAI_API_KEY": API_KEY, **env}
    )
    assert result.exit_code == 2
    assert message in result.stderr
    assert "Traceback" not in result.stderr
    assert api.hits == before


def test_rerun_reask_forks_from_a_new_answer(
    invoke: Invoke, story: tuple[tuple[str, str], str], api: FakeAPI
) -> None:
    """The step gets model-b's answer; the judge call quoting it runs live."""
    store, source = story
    result = invoke(
        *store,
        "rerun",
        source,
        "--app",
        "demo_app_story:router",
        "--reask",
        "1",
        "--model",
        "model-b",
        "--json",
        FAKE_URL=api.url,
        OPENAI_API_KEY=API_KEY,
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    assert doc["response"]["payload"] == {
        "line": "echo hi t=None by model-b",
        "verdict": "echo judge echo hi t=None by model-b t=None by model-a",
    }
    assert doc["reask"]["answers"][0]["text"] == "echo hi t=None by model-b"
    assert [s["overridden"] for s in doc["steps"]] == [True, False]
    refused = invoke(
        *store, "rerun", source, "--app", "demo_app_story:router", "--model", "x"
    )
    assert refused.exit_code == 2
    assert "go with --reask STEP" in refused.stderr
