"""The explorer's re-ask page: a form for one model call, sent with a write key."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from fastapi.testclient import TestClient
from integrations.fakeapi import API_KEY, FakeAPI
from livekit import READ_KEY, ROUTE_KEY, keyed_app

from intentusnet import IntentRouter
from intentusnet.integrations.httpx import RecordingTransport
from intentusnet.server.ui import create_ui_app
from intentusnet.store import FileExecutionStore


@pytest.fixture(scope="module")
def recorded(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[IntentRouter, FakeAPI, str]]:
    """A router whose ``line`` agent asked the fake API once (step 1), then counted."""
    store = FileExecutionStore(tmp_path_factory.mktemp("ui-reask") / "records")
    router = IntentRouter(store=store)

    @router.agent("line")
    def line(env: Any, ctx: Any) -> dict[str, Any]:
        with httpx.Client(transport=RecordingTransport(store), timeout=10) as http:
            client = openai.OpenAI(
                base_url=f"{api.url}/v1", api_key=API_KEY, http_client=http
            )
            answer = client.chat.completions.create(
                model="model-a", messages=[{"role": "user", "content": "<b>hi</b>"}]
            )
        text = answer.choices[0].message.content
        return {"n": ctx.step("count", {"text": text}, lambda text: len(text))}

    with FakeAPI(by_model=True) as api:
        answer = router.route_intent({"intent": {"name": "line"}})
        assert answer.status == "success", answer.error
        yield router, api, answer.metadata.execution_id
    router.close()
    store.close()


def _page(execution_id: str, step: int = 1) -> str:
    return f"/ui/executions/{execution_id}/steps/{step}/reask"


def test_read_only_explorer_shows_the_form_and_refuses_to_send(recorded) -> None:
    """``intentusnet ui`` shows the call and the command, and refuses a POST."""
    router, api, execution_id = recorded
    app = create_ui_app(router.store)
    with TestClient(app, base_url="http://127.0.0.1") as client:
        page = client.get(_page(execution_id))
        assert page.status_code == 200
        assert "&lt;b&gt;hi&lt;/b&gt;" in page.text  # the body, escaped
        assert 'id="read-only"' in page.text
        assert f"intentusnet reask {execution_id} --step 1" in page.text
        before = api.hits
        refused = client.post(_page(execution_id), data={"model": "model-b"})
        assert refused.status_code == 403
        assert "this explorer is read-only" in refused.text
        assert api.hits == before
        not_a_call = client.get(_page(execution_id, 2))
        assert not_a_call.status_code == 422
        assert "is not an HTTP call" in not_a_call.text
        assert client.get(_page("exec-nope")).status_code == 404


def test_a_route_key_sends_and_sees_the_answers(
    recorded, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Signed in with a key that may route, a re-ask shows the answers side by side.

    A read key is refused; a bad edit shows the form again with the reason.
    """
    router, _, execution_id = recorded
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    with TestClient(keyed_app(router), base_url="https://testserver") as client:
        client.post("/ui/login", data={"key": READ_KEY})
        assert client.post(_page(execution_id), data={}).status_code == 403
        client.post("/ui/login", data={"key": ROUTE_KEY})
        form = client.get(_page(execution_id)).text
        assert 'id="read-only"' not in form
        assert 'value="model-a"' in form
        sent = client.post(
            _page(execution_id),
            data={"model": "model-b", "times": "2", "set": "temperature=0.5\n"},
        )
        assert sent.status_code == 200, sent.text
        assert sent.text.count("echo &lt;b&gt;hi&lt;/b&gt; t=0.5 by model-b") == 2
        assert "echo &lt;b&gt;hi&lt;/b&gt; t=None by model-a" in sent.text
        assert "model, temperature" in sent.text
        bad = client.post(_page(execution_id), data={"set": "temperature=warm"})
        assert bad.status_code == 422
        assert "the value is not JSON" in bad.text
        assert 'id="reask"' in bad.text
