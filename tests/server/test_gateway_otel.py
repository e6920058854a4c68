"""The gateway's OpenTelemetry spans and its JSON log: the real gateway in a subprocess.

Spans go over the real OTLP/HTTP exporter to a receiver the test starts on
127.0.0.1 (``integrations/otlp.py``); the caller's trace context is a W3C
``traceparent`` header.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from integrations.fakeapi import API_KEY, FakeAPI
from integrations.otlp import Receiver, received
from livekit import free_port

from intentusnet.cache.prices import price_table

from .test_gateway import Gateway

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 10
#: The caller's trace and its span, as its traceparent names them.
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPANS = ("00f067aa0ba902b7", "00f067aa0ba902b8")
#: Secrets and a body the caller sends, none of which may reach a span.
QUERY_SECRET = "qs-PLANTED-4242424242"
BODY_TEXT = "PLANTED-BODY-prompt words"
MODEL = "gpt-4o-mini"


@pytest.fixture
def api() -> Iterator[FakeAPI]:
    """The fake OpenAI-compatible API, running."""
    with FakeAPI() as server:
        yield server


def _traceparent(span_id: str) -> str:
    return f"00-{TRACE_ID}-{span_id}-01"


@pytest.fixture(autouse=True)
def no_otel_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OTEL_* variable of the test's environment reaches the gateway."""
    for name in list(os.environ):
        if name.startswith("OTEL_"):
            monkeypatch.delenv(name)


def _otel_env(receiver: Receiver) -> dict[str, str]:
    """The standard variables pointing the gateway's exporter at ``receiver``.

    Batches wait a minute: the spans arrive only if the gateway sends them as
    it shuts down.
    """
    return {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": receiver.url,
        "OTEL_BSP_SCHEDULE_DELAY": "60000",
    }


def test_spans_arrive_under_the_callers_trace_a_hit_priced_zero(
    api: FakeAPI, tmp_path: Path
) -> None:
    """A miss, then a hit priced $0: server and chat spans under the caller's trace."""
    ask = {"model": MODEL, "messages": [{"role": "user", "content": BODY_TEXT}]}
    with Receiver() as receiver:
        gateway = Gateway(
            tmp_path / "records", api.url, "--otel", env=_otel_env(receiver)
        )
        try:
            with httpx.Client(trust_env=False, timeout=TIMEOUT) as http:
                answers = [
                    http.post(
                        f"{gateway.url}/fake/v1/chat/completions",
                        params={"key": QUERY_SECRET},
                        json=ask,
                        headers={
                            "authorization": f"Bearer {API_KEY}",
                            "traceparent": _traceparent(caller),
                        },
                    )
                    for caller in CALLER_SPANS
                ]
        finally:
            gateway.stop()  # what is batched is sent as it shuts down
    assert [a.status_code for a in answers] == [200, 200]
    assert [a.headers["x-intentusnet-cache"] for a in answers] == ["miss", "hit"]
    assert api.hits == 1
    spans = received(receiver)
    assert sorted(spans) == ["POST /fake/{path}", f"chat {MODEL}"]
    servers = sorted(
        spans["POST /fake/{path}"], key=lambda s: s[0].start_time_unix_nano
    )
    calls = sorted(spans[f"chat {MODEL}"], key=lambda s: s[0].start_time_unix_nano)
    assert len(servers) == len(calls) == 2
    for (server, serving), (call, llm), caller, answer in zip(
        servers, calls, CALLER_SPANS, answers, strict=True
    ):
        # the caller's trace, the caller's span the parent; the call inside
        assert server.trace_id.hex() == call.trace_id.hex() == TRACE_ID
        assert server.parent_span_id.hex() == caller
        assert call.parent_span_id == server.span_id
        assert server.kind == server.SPAN_KIND_SERVER
        assert call.kind == call.SPAN_KIND_CLIENT
        assert serving["http.request.method"] == "POST"
        assert serving["url.path"] == "/fake/v1/chat/completions"
        assert serving["http.route"] == "/fake/{path}"
        assert serving["http.response.status_code"] == 200
        assert serving["intentusnet.upstream"] == "fake"
        assert serving["intentusnet.complete"] is True
        record = answer.headers["x-intentusnet-record"]
        assert serving["intentusnet.execution_id"] == record
        assert llm["intentusnet.execution_id"] == record
        assert llm["openinference.span.kind"] == "LLM"
        assert llm["gen_ai.provider.name"] == "openai"
        assert llm["gen_ai.operation.name"] == "chat"
        assert llm["gen_ai.request.model"] == MODEL
        assert llm["gen_ai.response.model"] == MODEL
        assert llm["intentusnet.cost.currency"] == "USD"
    (_, miss_server), (_, hit_server) = servers
    (_, miss), (_, hit) = calls
    assert miss_server["intentusnet.cache"] == miss["intentusnet.cache"] == "miss"
    assert hit_server["intentusnet.cache"] == hit["intentusnet.cache"] == "hit"
    assert hit["intentusnet.cache.hit"] is True
    used = answers[0].json()["usage"]
    assert miss["gen_ai.usage.input_tokens"] == used["prompt_tokens"]
    assert miss["gen_ai.usage.output_tokens"] == used["completion_tokens"]
    prices = price_table(None)
    assert prices is not None
    cost = prices.cost(MODEL, used["prompt_tokens"], used["completion_tokens"])
    assert cost is not None
    assert cost > 0
    assert miss["llm.cost.total"] == pytest.approx(cost)
    assert miss["intentusnet.cost"] == pytest.approx(cost)
    # the hit spent nothing: $0, no usage, what it saved on its own attribute
    assert hit["llm.cost.total"] == 0.0
    assert hit["intentusnet.cost"] == 0.0
    assert hit["intentusnet.cache.saved_cost"] == pytest.approx(cost)
    assert not [k for k in hit if k.startswith(("gen_ai.usage.", "llm.token_count."))]
    # the resource names the gateway
    (resource,) = {
        next(
            a.value.string_value
            for a in part.resource.attributes
            if a.key == "service.name"
        )
        for request in receiver.requests
        for part in request.resource_spans
    }
    assert resource == "intentusnet-gateway"
    # no credential, no query and no body in any span, attribute or resource
    sent = b"".join(r.SerializeToString() for r in receiver.requests)
    for planted in (API_KEY, QUERY_SECRET, "PLANTED-BODY"):
        assert planted.encode() not in sent


def test_spans_of_errors_and_of_the_gateways_own_paths(
    api: FakeAPI, tmp_path: Path
) -> None:
    """An unknown upstream and a 5xx are spans (a 5xx in error); /healthz has none."""
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "fail 500"}]}
    with Receiver() as receiver:
        gateway = Gateway(
            tmp_path / "records", api.url, "--otel", env=_otel_env(receiver)
        )
        try:
            with httpx.Client(trust_env=False, timeout=TIMEOUT) as http:
                assert http.get(f"{gateway.url}/healthz").status_code == 200
                assert http.get(f"{gateway.url}/nowhere/v1").status_code == 404
                assert http.get(f"{gateway.url}/metrics").status_code == 200
                failed = http.post(
                    f"{gateway.url}/fake/v1/chat/completions",
                    json=ask,
                    headers={"authorization": f"Bearer {API_KEY}"},
                )
                assert failed.status_code == 500
                cut = http.post(
                    f"{gateway.url}/fake/v1/chat/completions",
                    json={
                        **ask,
                        "stream": True,
                        "messages": [{"role": "user", "content": "cut short"}],
                    },
                    headers={"authorization": f"Bearer {API_KEY}"},
                )
                assert b"upstream_cut" in cut.content
        finally:
            gateway.stop()
    spans = received(receiver)
    assert sorted(spans) == ["GET", "POST /fake/{path}", f"chat {MODEL}"]
    ((unknown, unknown_attributes),) = spans["GET"]  # none for /healthz, /metrics
    assert unknown_attributes["http.response.status_code"] == 404
    assert "intentusnet.upstream" not in unknown_attributes
    assert unknown.status.code == unknown.status.STATUS_CODE_UNSET  # a 4xx is theirs
    (server, serving), (broken, streaming) = sorted(
        spans["POST /fake/{path}"], key=lambda s: s[0].start_time_unix_nano
    )
    calls = sorted(spans[f"chat {MODEL}"], key=lambda s: s[0].start_time_unix_nano)
    assert server.parent_span_id == b""  # no traceparent: a root
    assert [c.parent_span_id for c, _ in calls] == [server.span_id, broken.span_id]
    assert serving["http.response.status_code"] == 500
    assert server.status.code == server.status.STATUS_CODE_ERROR
    assert calls[0][0].status.code == server.status.STATUS_CODE_ERROR
    # a stream the upstream broke off: answered 200, the request's span in error
    assert streaming["http.response.status_code"] == 200
    assert streaming["intentusnet.complete"] is False
    assert broken.status.code == broken.status.STATUS_CODE_ERROR
    assert "broke the stream off" in broken.status.message


def test_stderr_is_json_from_its_first_line(api: FakeAPI, tmp_path: Path) -> None:
    """Every stderr line is one JSON object; OTEL_* variables alone send no span."""
    with Receiver() as receiver:
        gateway = Gateway(
            tmp_path / "records",
            api.url,
            "--log-level",
            "info",
            env={**_otel_env(receiver), "OTEL_BSP_SCHEDULE_DELAY": "10"},
        )
        try:
            ready = _ask_once(gateway)
        finally:
            gateway.stop()
    assert receiver.requests == []  # not asked for with --otel
    lines = [json.loads(line) for line in gateway.lines]  # each one JSON
    assert all(isinstance(line, dict) for line in lines)
    started, *_ = lines
    assert started["event"] == "started"
    assert started["level"] == "info"
    assert started["upstreams"] == {"fake": api.url}
    assert started["otel"] is False
    messages = [line.get("message") for line in lines]
    assert messages.index("Application startup complete.") < ready
    assert "Finished server process" in messages[-1]
    access = [line for line in lines if line.get("path") == "/fake/v1/chat/completions"]
    assert [a["cache"] for a in access] == ["miss"]
    assert API_KEY not in "".join(gateway.lines)


def _ask_once(gateway: Gateway) -> int:
    """One chat completion through ``gateway``: how many lines it wrote before."""
    with httpx.Client(trust_env=False, timeout=TIMEOUT) as http:
        before = len(gateway.lines)
        answer = http.post(
            f"{gateway.url}/fake/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "hi"}]},
            headers={"authorization": f"Bearer {API_KEY}"},
        )
    assert answer.status_code == 200
    return before


BLOCKER = """
import importlib.abc
import sys


class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "opentelemetry" or name.startswith("opentelemetry."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Blocked())
"""


def test_otel_without_the_extra_is_a_usage_error(tmp_path: Path) -> None:
    """--otel without OpenTelemetry installed: exit 2 and the extra to install."""
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "intentusnet.cli",
            "gateway",
            "--otel",
            "--store",
            str(tmp_path / "records"),
            "--upstream",
            "a=http://127.0.0.1:9",
            "--listen",
            f"127.0.0.1:{free_port()}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip().splitlines() == [
        "Error: --otel needs the OpenTelemetry SDK and its OTLP/HTTP exporter: "
        "pip install 'intentusnet[otel]'"
    ]
