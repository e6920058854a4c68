"""Waiting executions over HTTP: 202 for a wait, POST .../signals/{name}, refusals."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from livekit import READ_KEY, ROUTE_KEY, serving

from intentusnet import IntentRouter, RecordStatus, Recovery
from intentusnet.server.app import create_app
from intentusnet.server.auth import KeyRing
from intentusnet.store import FileExecutionStore

PROBLEM = "application/problem+json"
FULL = {"Authorization": f"Bearer {ROUTE_KEY}"}
WAIT = {"intent": {"name": "wait"}, "payload": {}}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[tuple[httpx.Client, IntentRouter]]:
    """A service with background recovery, its ``wait`` agent waiting for ``go``."""
    router = IntentRouter(store=FileExecutionStore(tmp_path / "records"))
    router.agent("wait", name="wait")(lambda env, ctx: {"got": ctx.wait_for("go")})
    router.agent("done", name="done")(lambda env, ctx: {})
    keys = KeyRing.parse(f"{ROUTE_KEY}\nro:{READ_KEY}")
    app = create_app(router, keys=keys, recovery=Recovery(router, grace=0))
    with (
        router,
        serving(app) as server,
        httpx.Client(base_url=server.url, trust_env=False, timeout=30) as made,
    ):
        yield made, router


def _problem(answer: httpx.Response, status: int, code: str) -> str:
    assert answer.status_code == status, answer.text
    assert answer.headers["content-type"] == PROBLEM
    body = answer.json()
    assert body["code"] == code
    return str(body["detail"])


def test_a_wait_is_202_and_a_signal_resumes_it_within_a_second(
    client: tuple[httpx.Client, IntentRouter],
) -> None:
    """202 + Location + the WAITING answer; the signal's wait answered by recovery."""
    http, router = client
    routed = http.post("/v1/intents", json=WAIT, headers=FULL)
    assert routed.status_code == 202, routed.text
    body = routed.json()
    assert body["error"]["code"] == "WAITING"
    execution_id = body["metadata"]["executionId"]
    assert routed.headers["location"] == f"/v1/executions/{execution_id}"

    sent = http.post(
        f"/v1/executions/{execution_id}/signals/go", json={"ok": 1}, headers=FULL
    )
    assert sent.status_code == 200, sent.text
    assert sent.json()["signal"].startswith("sig-")
    started = time.monotonic()
    read = http.get(f"/v1/executions/{execution_id}?wait=10", headers=FULL)
    took = time.monotonic() - started
    record = read.json()
    assert record["header"]["status"] == "completed"
    assert record["finalResponse"]["payload"] == {"got": {"ok": 1}}
    assert took < 10  # woken by the service's own recovery, not by this test
    resumed = router.store.load(record["header"]["executionId"])
    assert resumed.header.status is RecordStatus.COMPLETED


def test_bad_signals_are_refused_and_nothing_is_kept(
    client: tuple[httpx.Client, IntentRouter],
) -> None:
    """403 read key; 400 not JSON; 422 blank name or payload over 64 KiB; 409; 404."""
    http, router = client
    waiting = http.post("/v1/intents", json=WAIT, headers=FULL).json()
    execution_id = waiting["metadata"]["executionId"]
    done = http.post(
        "/v1/intents", json={"intent": {"name": "done"}, "payload": {}}, headers=FULL
    ).json()["metadata"]["executionId"]
    url = f"/v1/executions/{execution_id}/signals"
    read_only = {"Authorization": f"Bearer {READ_KEY}"}

    _problem(http.post(f"{url}/go", json=1, headers=read_only), 403, "forbidden")
    _problem(
        http.post(f"{url}/go", content=b"{nope", headers=FULL), 400, "malformed_request"
    )
    _problem(http.post(f"{url}/%20", json=1, headers=FULL), 422, "invalid_signal")
    big = "x" * 70_000
    assert "at most 65536" in _problem(
        http.post(f"{url}/go", json=big, headers=FULL), 422, "invalid_signal"
    )
    assert "(finished)" in _problem(
        http.post(f"/v1/executions/{done}/signals/go", json=1, headers=FULL),
        409,
        "signal_refused",
    )
    _problem(
        http.post(f"/v1/executions/exec-{'0' * 32}/signals/go", json=1, headers=FULL),
        404,
        "record_not_found",
    )
    assert router.store.signals(execution_id) == []  # type: ignore[union-attr]
