"""``intentusnet gateway`` in operation: metrics, access log, limits, keys, shutdown.

One gateway process (and one fake upstream whose streams can be held) serves
the module; the shutdown test starts its own.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from integrations.fakeapi import API_KEY, FakeAPI
from livekit import CliProcess

from intentusnet.store import FileExecutionStore

from .test_gateway import ASK, BEARER, TIMEOUT, Gateway

pytestmark = pytest.mark.slow
FULL_KEY = "gateway-full-key-0123456789"
READ_KEY = "gateway-read-key-0123456789"
FULL = {"x-intentusnet-key": FULL_KEY}
READ = {"x-intentusnet-key": READ_KEY}
PRICES = {"currency": "USD", "models": {"m": {"input": 1.0, "output": 2.0}}}


@pytest.fixture(scope="module")
def api() -> Iterator[FakeAPI]:
    """The fake API; its streams wait for ``release`` after their first event."""
    with FakeAPI(held=True) as server:
        server.release.set()
        yield server


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's folder: the store, the keys, the prices, the access log."""
    path = tmp_path_factory.mktemp("gateway-ops")
    (path / "keys").write_text(f"{FULL_KEY}\nro:{READ_KEY}\n", encoding="utf-8")
    (path / "prices.json").write_text(json.dumps(PRICES), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def gateway(api: FakeAPI, folder: Path) -> Iterator[Gateway]:
    """A gateway in cache mode: keys, 3 requests at once, logged, priced, paced."""
    process = Gateway(
        folder / "records",
        api.url,
        "--api-keys-file",
        str(folder / "keys"),
        "--max-concurrency",
        "3",
        "--access-log",
        str(folder / "access.log"),
        "--prices",
        str(folder / "prices.json"),
        "--pace",
        "recorded",
    )
    yield process
    process.stop()


@pytest.fixture(scope="module")
def http() -> Iterator[httpx.Client]:
    """A plain HTTP client."""
    with httpx.Client(trust_env=False, timeout=TIMEOUT) as client:
        yield client


def _ask(text: str, **more: object) -> dict[str, object]:
    return {**ASK, "messages": [{"role": "user", "content": text}], **more}


def _threads(process: CliProcess) -> int:
    status = Path(f"/proc/{process.process.pid}/status").read_text(encoding="utf-8")
    return int(next(ln for ln in status.splitlines() if ln.startswith("Threads:"))[8:])


def _metric(text: str, name: str, **labels: str) -> float:
    """The value of one sample of the Prometheus text ``text``."""
    wanted = ",".join(f'{k}="{v}"' for k, v in labels.items())
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        if head == (f"{name}{{{wanted}}}" if labels else name):
            return float(value)
    raise AssertionError(f"no sample {name}{{{wanted}}} in /metrics")


def test_many_credentials_share_one_client_per_upstream(
    gateway: Gateway, http: httpx.Client, api: FakeAPI
) -> None:
    """Forty credentials cost no thread (nor client) each: the count stays flat."""
    url = f"{gateway.url}/fake/v1/chat/completions"

    def call(n: int) -> None:
        headers = {**FULL, **BEARER, "x-api-key": f"other-{n}"}
        answer = http.post(url, json=_ask("tenancy"), headers=headers)
        assert answer.status_code == 200
        assert answer.headers["x-intentusnet-cache"] == "miss"

    for n in range(3):
        call(n)
    before = _threads(gateway)
    for n in range(3, 43):
        call(n)
    assert _threads(gateway) <= before + 1
    assert api.hits >= 43


def test_metrics_count_hits_misses_errors_and_saved_tokens(
    gateway: Gateway, http: httpx.Client
) -> None:
    """/metrics needs a key and counts requests by cache state, errors and savings."""
    assert http.get(f"{gateway.url}/metrics").status_code == 401
    url = f"{gateway.url}/fake/v1/chat/completions"
    for _ in range(3):
        assert http.post(
            url, json=_ask("metered"), headers={**FULL, **BEARER}
        ).is_success
    assert (
        http.post(url, json=_ask("fail 500"), headers={**FULL, **BEARER}).status_code
        == 500
    )
    assert http.get(f"{gateway.url}/nowhere/x", headers=FULL).status_code == 404
    answer = http.get(f"{gateway.url}/metrics", headers=READ)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain; version=0.0.4")
    text = answer.text
    count = "intentusnet_gateway_requests_total"
    assert _metric(text, count, cache="hit", status="2xx", upstream="fake") >= 2
    assert _metric(text, count, cache="miss", status="2xx", upstream="fake") >= 1
    assert _metric(text, count, cache="miss", status="5xx", upstream="fake") == 1
    upstream_errors = "intentusnet_gateway_upstream_errors_total"
    assert _metric(text, upstream_errors, kind="status_5xx", upstream="fake") == 1
    assert (
        _metric(text, "intentusnet_gateway_errors_total", type="unknown_upstream") == 1
    )
    assert (
        _metric(text, "intentusnet_gateway_response_head_seconds_count", cache="hit")
        >= 2
    )
    saved = "intentusnet_llm_tokens_total"
    assert (
        _metric(
            text, saved, direction="input", model="m", outcome="hit", provider="openai"
        )
        > 0
    )
    assert "intentusnet_llm_cost_total" in text


def test_access_log_has_a_json_line_per_request_and_no_credential(
    gateway: Gateway, http: httpx.Client, folder: Path
) -> None:
    """Each request is one JSON line naming its record; no key reaches the file."""
    url = f"{gateway.url}/fake/v1/chat/completions?key=query-SECRET-1"
    answer = http.post(url, json=_ask("logged"), headers={**FULL, **BEARER})
    record = answer.headers["x-intentusnet-record"]
    text = (folder / "access.log").read_text(encoding="utf-8")
    lines = [json.loads(line) for line in text.splitlines()]
    mine = [line for line in lines if line["record"] == record]
    assert len(mine) == 1
    line = mine[0]
    assert line["path"] == "/fake/v1/chat/completions"
    assert (line["status"], line["cache"], line["upstream"]) == (200, "miss", "fake")
    assert line["complete"] is True
    assert {"time", "client", "method", "bytes", "headMs", "ms"} <= set(line)
    for secret in (API_KEY, FULL_KEY, READ_KEY, "query-SECRET-1", "other-3"):
        assert secret not in text


def test_beyond_the_concurrency_limit_a_request_gets_503_with_retry_after(
    gateway: Gateway, api: FakeAPI
) -> None:
    """Three streams held in flight: a fourth request is refused, then served."""
    url = f"{gateway.url}/fake/v1/chat/completions"
    api.release.clear()
    with httpx.Client(trust_env=False, timeout=TIMEOUT) as client:
        streams = [
            client.stream(
                "POST",
                url,
                json=_ask(f"held {n}", stream=True),
                headers={**FULL, **BEARER},
            )
            for n in range(3)
        ]
        try:
            # Kept: an iterator dropped closes its response (the client leaves).
            readers = [stream.__enter__().iter_raw() for stream in streams]
            for reader in readers:
                next(reader)  # the first event came
            refused = client.post(
                url, json=_ask("one more"), headers={**FULL, **BEARER}
            )
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["type"] == "overloaded"
        finally:
            api.release.set()
            for reader, stream in zip(readers, streams, strict=True):
                assert b"".join(reader).endswith(b"data: [DONE]\n\n")
                stream.__exit__(None, None, None)
        assert client.post(
            url, json=_ask("one more"), headers={**FULL, **BEARER}
        ).is_success


def test_a_read_only_key_is_answered_from_records_only(
    gateway: Gateway, http: httpx.Client, api: FakeAPI, folder: Path
) -> None:
    """A read-only key gets hits; an unrecorded request is a 404, never forwarded."""
    url = f"{gateway.url}/fake/v1/chat/completions"
    body = _ask("read only")
    assert http.post(url, json=body, headers={**FULL, **BEARER}).status_code == 200
    records = folder / "records"
    hits, files = api.hits, len([*records.glob("??/*.jsonl")])  # records, not hits
    served = http.post(url, json=body, headers={**READ, **BEARER})
    assert served.status_code == 200
    assert served.headers["x-intentusnet-cache"] == "hit"
    missed = http.post(url, json=_ask("never recorded"), headers={**READ, **BEARER})
    assert missed.status_code == 404
    error = missed.json()["error"]
    assert error["type"] == "intentusnet_cache_miss"
    assert error["mode"] == "read-only"
    assert "your gateway key is read-only" in error["message"]
    assert "replay mode" not in error["message"]
    assert str(folder) not in missed.text
    assert "mode=" not in missed.text
    bypass = {**READ, **BEARER, "x-intentusnet-cache": "bypass"}
    assert (
        http.post(url, json=body, headers=bypass).headers["x-intentusnet-cache"]
        == "hit"
    )
    assert api.hits == hits
    assert len([*records.glob("??/*.jsonl")]) == files
    assert (
        http.post(
            url, json=body, headers={"x-intentusnet-key": "wrong-key-0123456789"}
        ).status_code
        == 401
    )


def test_sigterm_finishes_a_stream_in_flight(api: FakeAPI, tmp_path: Path) -> None:
    """A stream in flight when SIGTERM comes reaches its end and is recorded whole."""
    root = tmp_path / "records"
    process = Gateway(root, api.url)
    api.release.clear()
    try:
        with httpx.Client(trust_env=False, timeout=TIMEOUT) as client:
            url = f"{process.url}/fake/v1/chat/completions"
            with client.stream(
                "POST", url, json=_ask("drain me", stream=True), headers=BEARER
            ) as stream:
                chunks = stream.iter_raw()
                first = next(chunks)
                process.process.send_signal(signal.SIGTERM)
                threading.Timer(0.5, api.release.set).start()
                rest = b"".join(chunks)
                record = stream.headers["x-intentusnet-record"]
    finally:
        api.release.set()
        code = process.stop()
    assert code in (0, -signal.SIGTERM)  # uvicorn raises the signal again once done
    assert (first + rest).rstrip().endswith(b"data: [DONE]")
    with FileExecutionStore(root) as store:
        assert store.load(record).header.status == "completed"


def test_a_client_leaving_mid_stream_is_recorded_as_cut_by_the_client(
    gateway: Gateway, api: FakeAPI, folder: Path
) -> None:
    """A client that reads one event and closes leaves a failed record saying so."""
    url = f"{gateway.url}/fake/v1/chat/completions"
    api.release.clear()
    try:
        with (
            httpx.Client(trust_env=False, timeout=TIMEOUT) as client,
            client.stream(
                "POST",
                url,
                json=_ask("left early", stream=True),
                headers={**FULL, **BEARER},
            ) as stream,
        ):
            next(stream.iter_raw())
            record = stream.headers["x-intentusnet-record"]
        # Still held upstream: only the client's leaving can end the record.
        deadline = time.monotonic() + TIMEOUT
        with FileExecutionStore(folder / "records") as store:
            while store.load(record).header.status == "in_progress":
                assert time.monotonic() < deadline, "the cut stream was never recorded"
                time.sleep(0.05)
            loaded = store.load(record)
    finally:
        api.release.set()
    assert loaded.header.status == "failed"
    message = loaded.final_response["error"]["message"]
    assert "was closed by the client before its end" in message


def test_a_recorded_stream_is_replayed_at_its_recorded_pace(
    gateway: Gateway, api: FakeAPI, folder: Path
) -> None:
    """The record keeps when each event came; a hit waits as long between them."""
    url = f"{gateway.url}/fake/v1/chat/completions"
    body, headers = _ask("paced", stream=True), {**FULL, **BEARER}
    api.release.clear()
    with (
        httpx.Client(trust_env=False, timeout=TIMEOUT) as client,
        client.stream("POST", url, json=body, headers=headers) as live,
    ):
        chunks = live.iter_raw()
        recorded = next(chunks)
        time.sleep(0.4)  # the rest comes 0.4 s after the first event
        api.release.set()
        recorded += b"".join(chunks)
        record = live.headers["x-intentusnet-record"]
    with FileExecutionStore(folder / "records") as store:
        answer = store.load(record).final_response["payload"]["response"]
    times = answer["eventMs"]
    assert len(times) == recorded.count(b"\n\n")
    assert times[-1] - times[0] >= 400
    with (
        httpx.Client(trust_env=False, timeout=TIMEOUT) as client,
        client.stream("POST", url, json=body, headers=headers) as hit,
    ):
        chunks = hit.iter_raw()
        first = next(chunks)
        waited = time.monotonic()
        replayed = first + b"".join(chunks)
        waited = time.monotonic() - waited
        assert hit.headers["x-intentusnet-cache"] == "hit"
    assert replayed == recorded
    assert waited >= 0.3  # paced as recorded, not sent at once


def test_an_upstream_breaking_a_stream_off_ends_it_cleanly(
    gateway: Gateway, api: FakeAPI, folder: Path
) -> None:
    """The SDKs get an API error event, not a broken body; a cut record, a log line."""
    seen = len(gateway.lines)
    hits = api.hits
    said = []
    with (
        openai.OpenAI(
            base_url=f"{gateway.url}/fake/v1",
            api_key=API_KEY,
            max_retries=0,
            timeout=TIMEOUT,
            default_headers=FULL,
        ) as oa,
        anthropic.Anthropic(
            base_url=f"{gateway.url}/fake",
            api_key=API_KEY,
            max_retries=0,
            timeout=TIMEOUT,
            default_headers=FULL,
        ) as an,
    ):
        for _ in range(2):  # a cut stream is never served: both reach the upstream
            with pytest.raises(openai.APIError) as openai_error:
                for _event in oa.chat.completions.create(
                    model="m",
                    messages=[{"role": "user", "content": "cut for openai"}],
                    stream=True,
                ):
                    pass
            with (
                pytest.raises(anthropic.APIError) as anthropic_error,
                an.messages.stream(
                    model="c",
                    max_tokens=16,
                    messages=[{"role": "user", "content": "cut for anthropic"}],
                ) as events,
            ):
                "".join(events.text_stream)
            said += [openai_error.value, anthropic_error.value]
    assert api.hits == hits + 4
    for error in said:
        assert "broke the stream off" in str(error)
        assert not isinstance(error, openai.APIConnectionError)
        assert not isinstance(error, anthropic.APIConnectionError)
    time.sleep(0.2)  # the last access-log line is written as the body ends
    logged = gateway.lines[seen:]
    cuts = [json.loads(line) for line in logged if '"upstream_cut"' in line]
    assert [c["upstream"] for c in cuts] == ["fake"] * 4
    assert not any("Traceback" in line or "Exception in" in line for line in logged)
    access = [
        json.loads(line)
        for line in (folder / "access.log").read_text().splitlines()
        if json.loads(line)["record"] in {c["record"] for c in cuts}
    ]
    assert [a["complete"] for a in access] == [False] * 4
    with FileExecutionStore(folder / "records") as store:
        for cut in cuts:
            record = store.load(cut["record"])
            assert record.header.status == "failed"
            message = record.final_response["error"]["message"]
            assert "the upstream broke off" in message
