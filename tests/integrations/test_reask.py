"""Re-asking a recorded model call: the real SDKs' records, the fake API on 127.0.0.1.

An agent asks the fake OpenAI API through the SDK twice (the second prompt
quotes the first answer); the fake answers differently per model. One server
and one recorded execution serve the whole module.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from llmkit import ask

from intentusnet import (
    FileExecutionStore,
    IntentRouter,
    PriceTable,
    ReaskRefused,
    ReplayEngine,
    RerunOptions,
    reask,
    record_steps,
    rerun,
)
from intentusnet.integrations import httpx as via_httpx

from .fakeapi import API_KEY, FakeAPI

TIMEOUT = 10
PRICES = PriceTable.from_json(
    {
        "currency": "USD",
        "models": {
            "model-a": {"input": 1.0, "output": 2.0},
            "model-b": {"input": 10.0, "output": 20.0},
        },
    }
)


@pytest.fixture(scope="module")
def api() -> Iterator[FakeAPI]:
    """The fake API, answering per model."""
    with FakeAPI(by_model=True) as server:
        yield server


def story_router(
    store: FileExecutionStore, url: str, http: httpx.Client
) -> IntentRouter:
    """``story``: ask for a line, then to judge it; a side effect, a tool step."""
    router = IntentRouter(store=store)
    client = openai.OpenAI(
        base_url=f"{url}/v1", api_key=API_KEY, http_client=http, max_retries=0
    )

    def chat(prompt: str) -> str:
        answer = client.chat.completions.create(
            model="model-a", messages=[{"role": "user", "content": prompt}]
        )
        return answer.choices[0].message.content or ""

    @router.agent("story")
    def story(env: Any, ctx: Any) -> dict[str, Any]:
        line = chat(env.payload["prompt"])
        verdict = chat(f"judge {line}")
        ctx.step("notify", {"to": "team"}, lambda to: "sent", side_effect=True)
        ctx.step("count", {"line": line}, lambda line: len(line))
        return {"line": line, "verdict": verdict}

    return router


@pytest.fixture(scope="module")
def recorded(
    api: FakeAPI, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[FileExecutionStore, IntentRouter, str]]:
    """The store, the router and one recorded ``story`` execution."""
    store = FileExecutionStore(tmp_path_factory.mktemp("reask") / "records")
    transport = via_httpx.RecordingTransport(store)
    with httpx.Client(transport=transport, timeout=TIMEOUT) as http:
        router = story_router(store, api.url, http)
        answer = router.route_intent(
            {"intent": {"name": "story"}, "payload": {"prompt": "hi"}}
        )
        assert answer.status == "success", answer.error
        yield store, router, answer.metadata.execution_id
        router.close()
    store.close()


@pytest.fixture
def keyed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake's key in the environment, where re-asks read it."""
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("ANTHROPIC_API_KEY", API_KEY)


def test_reask_another_model_side_by_side(recorded, api: FakeAPI, keyed) -> None:
    """Re-asking another model with an edit shows the answers side by side.

    Asked twice: the new answers beside the recorded one, the changed paths, token
    and cost differences, and a linked record.
    """
    store, _, source = recorded
    before = api.hits
    result = reask(
        store.load(source),
        1,
        store=store,
        edits={"temperature": 0.5},
        model="model-b",
        times=2,
        prices=PRICES,
    )
    assert api.hits == before + 2
    assert result.changed == ("model", "temperature")
    assert result.request["model"] == "model-b"
    assert result.recorded.text == "echo hi t=None by model-a"
    assert [a.text for a in result.answers] == ["echo hi t=0.5 by model-b"] * 2
    first = result.answers[0]
    assert "choices[0].message.content" in result.differences(first)
    assert "model" in result.differences(first)
    assert (result.recorded.usage.input_tokens, first.usage.input_tokens) == (1, 1)
    assert result.token_difference(first) == (0, 0)
    # same tokens, ten times the price
    assert result.recorded.cost(PRICES) == pytest.approx((1 * 1 + 5 * 2) / 1e6)
    assert result.cost_difference(first) == pytest.approx(9 * (1 + 5 * 2) / 1e6)
    # the re-ask is a record linked to the source; each ask a step and a call record
    done = store.load(result.execution_id)
    assert done.header.intent_name == "intentusnet.reask"
    assert done.envelope["payload"]["reaskOf"] == source
    assert done.envelope["payload"]["step"] == 1
    steps = record_steps(done)
    assert [s.child_execution_id for s in steps] == [a.record for a in result.answers]
    assert store.load(first.record).header.parent_execution_id == result.execution_id
    wire = result.to_json()
    assert wire["answers"][0]["costDifference"] == pytest.approx(
        result.cost_difference(first)
    )
    for execution_id in (result.execution_id, first.record):
        assert API_KEY not in str(store.load(execution_id).to_json())


def test_override_forks_a_rerun_from_the_new_answer(recorded, keyed) -> None:
    """An override forks a rerun: the new answer is served as the step's output.

    The judge call that quotes it runs live, the rest is served.
    """
    store, router, source = recorded
    result = reask(store.load(source), 1, store=store, model="model-b")
    forked = rerun(
        ReplayEngine.from_store(store, source),
        router,
        RerunOptions(override=result.override),
    )
    assert forked.ok, forked.response.error
    assert forked.response.payload == {
        "line": "echo hi t=None by model-b",
        "verdict": "echo judge echo hi t=None by model-b t=None by model-a",
    }


def test_a_transport_record_is_reasked_without_a_step(
    api: FakeAPI, tmp_path: Path, keyed
) -> None:
    """An Anthropic call recorded outside any agent: the record itself is the call."""
    store = FileExecutionStore(tmp_path / "records")
    ask("anthropic", api.url, store, "claude-a", "hello")
    (call,) = store.list()
    result = reask(store.load(call.execution_id), store=store, model="claude-b")
    assert result.step is None
    assert result.recorded.text == "echo hello t=None by claude-a"
    assert result.answers[0].text == "echo hello t=None by claude-b"
    assert result.override == {}
    store.close()


@pytest.mark.parametrize(
    ("step", "reason"),
    [
        (3, "is a side effect"),
        (4, "is not an HTTP call"),
        (9, "has no step 9: its steps are 1 to 4"),
        (None, "name the model call by its step"),
    ],
    ids=["side effect", "tool step", "no such step", "no step given"],
)
def test_refused_steps(recorded, api: FakeAPI, keyed, step, reason) -> None:
    """Side effects, steps that are not model calls and missing steps are refused."""
    store, _, source = recorded
    before = api.hits
    with pytest.raises(ReaskRefused, match=reason):
        reask(store.load(source), step, store=store)
    assert api.hits == before


@pytest.mark.parametrize(
    ("edits", "reason"),
    [
        ({"messages[5].content": "x"}, "index 5 is past the array's end"),
        ({"messages[*].content": "x"}, "name one value"),
        ({"model.name": "x"}, "'name' needs an object there"),
        ({"a..b": 1}, "bad path"),
    ],
    ids=["past the end", "wildcard", "through a text", "not a path"],
)
def test_bad_edits_are_refused(recorded, api: FakeAPI, keyed, edits, reason) -> None:
    """An edit naming no single value is refused before anything is sent."""
    store, _, source = recorded
    before = api.hits
    with pytest.raises(ReaskRefused, match=reason):
        reask(store.load(source), 1, store=store, edits=edits)
    assert api.hits == before


def test_a_missing_key_is_refused(recorded, api: FakeAPI, monkeypatch) -> None:
    """Without the vendor's variable, or the one named, nothing is sent."""
    store, _, source = recorded
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    before = api.hits
    with pytest.raises(ReaskRefused, match="set OPENAI_API_KEY"):
        reask(store.load(source), 1, store=store)
    monkeypatch.setenv("MY_KEY", API_KEY)
    result = reask(store.load(source), 1, store=store, key_env="MY_KEY")
    assert result.answers[0].status == 200
    assert api.hits == before + 1


def test_a_wrong_key_is_an_answer_not_a_crash(recorded, monkeypatch) -> None:
    """The API's 401 is shown as the answer, with its status."""
    store, _, source = recorded
    monkeypatch.setenv("OPENAI_API_KEY", "sk-wrong")
    result = reask(store.load(source), 1, store=store)
    assert result.answers[0].status == 401
    assert "bad key" in result.answers[0].text


def test_an_unreachable_host_is_the_asks_error(recorded, keyed) -> None:
    """A call with no response is a failed step and an answer carrying the error."""
    store, _, source = recorded
    refused = httpx.MockTransport(
        lambda request: (_ for _ in ()).throw(
            httpx.ConnectError("connection refused", request=request)
        )
    )
    result = reask(store.load(source), 1, store=store, transport=refused)
    (answer,) = result.answers
    assert answer.status is None
    assert "connection refused" in (answer.error or "")
    assert result.override == {}


def test_a_streamed_answer_is_read_event_by_event(
    api: FakeAPI, tmp_path: Path, keyed
) -> None:
    """A call recorded as an event stream is asked again streamed.

    Its text is the events' deltas put together.
    """
    store = FileExecutionStore(tmp_path / "records")
    transport = via_httpx.RecordingTransport(store)
    ask_body = {
        "model": "model-a",
        "stream": True,
        "messages": [{"role": "user", "content": "hello"}],
    }
    with httpx.Client(transport=transport, timeout=TIMEOUT) as http:
        sent = http.post(
            f"{api.url}/v1/chat/completions",
            json=ask_body,
            headers={"authorization": f"Bearer {API_KEY}"},
        )
        assert sent.status_code == 200
    (call,) = store.list()
    result = reask(store.load(call.execution_id), store=store, model="model-b")
    assert result.recorded.text == "echo hello t=None by model-a"
    assert result.answers[0].text == "echo hello t=None by model-b"
    assert result.differences(result.answers[0]) == ["text"]
    store.close()
