"""The explorer's page of a waiting execution: what it waits for, and a signal form."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from livekit import READ_KEY, ROUTE_KEY, keyed_app

from intentusnet import IntentRouter, RecordStatus, Recovery
from intentusnet.store import FileExecutionStore


@pytest.fixture
def waiting(tmp_path: Path) -> Iterator[tuple[TestClient, IntentRouter, str]]:
    """The service, keyed, with one execution waiting for the signal ``go``."""
    router = IntentRouter(store=FileExecutionStore(tmp_path / "records"))
    router.agent("wait", name="wait")(lambda env, ctx: {"got": ctx.wait_for("go")})
    answer = router.route_intent({"intent": {"name": "wait"}, "payload": {}})
    with (
        router,
        TestClient(keyed_app(router), base_url="https://testserver") as client,
    ):
        yield client, router, str(answer.metadata.execution_id)


def _login(client: TestClient, key: str) -> None:
    answer = client.post(
        "/ui/login", data={"key": key, "next": "/ui"}, follow_redirects=False
    )
    assert answer.status_code == 303


def test_a_read_key_sees_the_wait_but_no_form(
    waiting: tuple[TestClient, IntentRouter, str],
) -> None:
    """The page says what it waits for; a read key gets no form, a post is 403."""
    client, router, execution_id = waiting
    _login(client, READ_KEY)
    page = client.get(f"/ui/executions/{execution_id}").text
    assert "<dt>Waiting</dt>" in page
    assert f"intentusnet signal {execution_id} go JSON" in page
    assert 'id="signal"' not in page
    refused = client.post(
        f"/ui/executions/{execution_id}/signal", data={"name": "go", "payload": "1"}
    )
    assert refused.status_code == 403
    assert router.store.signals(execution_id) == []  # type: ignore[union-attr]


def test_a_route_key_sends_the_signal_from_the_page(
    waiting: tuple[TestClient, IntentRouter, str],
) -> None:
    """The form keeps the signal by the key's name (not JSON: 422); recovery resumes."""
    client, router, execution_id = waiting
    _login(client, ROUTE_KEY)
    page = client.get(f"/ui/executions/{execution_id}").text
    assert 'id="signal"' in page
    url = f"/ui/executions/{execution_id}/signal"
    bad = client.post(url, data={"name": "go", "payload": "{nope"})
    assert bad.status_code == 422
    assert router.store.signals(execution_id) == []  # type: ignore[union-attr]
    sent = client.post(
        url, data={"name": "go", "payload": '{"ok": true}'}, follow_redirects=False
    )
    assert sent.status_code == 303
    [signal] = router.store.signals(execution_id)  # type: ignore[union-attr]
    assert (signal["payload"], signal["via"]) == ({"ok": True}, "ui")
    key_name = hashlib.sha256(ROUTE_KEY.encode()).hexdigest()[:12]
    assert key_name in str(signal["by"])
    [woken] = Recovery(router, grace=0).run_once().resumed
    final = router.store.load(woken.resumed_as)
    assert final.header.status is RecordStatus.COMPLETED
    assert final.final_response["payload"] == {"got": {"ok": True}}
