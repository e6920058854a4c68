"""Step retries (``routing/retries.py``): recorded, bounded, honouring Retry-After."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
import pytest

from intentusnet import (
    IntentRouter,
    MemoryExecutionStore,
    RecordStatus,
    Recovery,
    exponential,
    record_steps,
)
from intentusnet.integrations.httpx import RecordingTransport

CALL = {"intent": {"name": "call"}, "payload": {}}
FAST = exponential(base=0.001, cap=0.01)


def _router(fn, **options: object) -> IntentRouter:  # type: ignore[no-untyped-def]
    router = IntentRouter(store=MemoryExecutionStore())

    @router.agent("call")
    def call(envelope, ctx):  # type: ignore[no-untyped-def]
        return {"value": ctx.step("flaky", {"x": 1}, fn, **options)}

    return router


def _failing(times: int, error: type[Exception] = ConnectionError):  # type: ignore[no-untyped-def]
    tries: list[int] = []

    def fn(x: int) -> int:
        tries.append(x)
        if len(tries) <= times:
            raise error(f"try {len(tries)}")
        return len(tries)

    return fn, tries


def test_each_attempt_and_each_decision_is_recorded() -> None:
    """Two failures then a success: five steps, each failure's error in its end."""
    fn, tries = _failing(2)
    router = _router(fn, retries=3, backoff=FAST)
    answer = router.route_intent(CALL)
    assert answer.payload == {"value": 3}
    assert len(tries) == 3
    steps = record_steps(router.store.load(answer.metadata.execution_id))
    assert [s.name for s in steps] == [
        "flaky",
        "retry:flaky",
        "flaky",
        "retry:flaky",
        "flaky",
    ]
    assert [s.error["message"] for s in steps if s.name == "flaky" and s.error] == [
        "try 1",
        "try 2",
    ]
    decisions = [s.output for s in steps if s.name == "retry:flaky"]
    assert [d["error"]["type"] for d in decisions] == ["ConnectionError"] * 2
    assert decisions[1]["delayS"] == pytest.approx(0.002)
    router.close()


def test_retries_stop_after_the_last_attempt_with_its_error() -> None:
    """Always failing: 1 + retries tries, then the step's error is the answer."""
    fn, tries = _failing(99)
    router = _router(fn, retries=2, backoff=FAST)
    answer = router.route_intent(CALL)
    assert len(tries) == 3
    assert answer.error is not None
    assert "try 3" in answer.error.message
    router.close()


def test_an_error_retry_on_does_not_name_is_not_retried() -> None:
    """retry_on=ConnectionError: a ValueError fails at once; a predicate decides too."""
    fn, tries = _failing(1, ValueError)
    _router(fn, retries=3, backoff=FAST, retry_on=ConnectionError).route_intent(CALL)
    assert len(tries) == 1
    fn, tries = _failing(1, ValueError)
    answer = _router(
        fn, retries=3, backoff=FAST, retry_on=lambda e: "try" in str(e)
    ).route_intent(CALL)
    assert answer.payload == {"value": 2}


def test_a_side_effect_retries_only_when_idempotent() -> None:
    """side_effect=True alone refuses retries; idempotent=True retries."""
    fn, tries = _failing(1)
    answer = _router(fn, retries=1, side_effect=True).route_intent(CALL)
    assert answer.error is not None
    assert "idempotent=True" in answer.error.message
    assert tries == []
    answer = _router(
        fn, retries=1, backoff=FAST, side_effect=True, idempotent=True
    ).route_intent(CALL)
    assert answer.payload == {"value": 2}


@pytest.mark.parametrize(
    ("options", "error"),
    [
        ({"retries": -1}, "retries is 0 or more"),
        ({"retries": 1.5}, "retries is an int"),
        ({"retries": 1, "retry_on": "ConnectionError"}, "retry_on is exception"),
    ],
)
def test_bad_retry_options_are_refused_before_anything_runs(
    options: dict[str, object], error: str
) -> None:
    """A ValueError or TypeError naming the option; the step never ran."""
    fn, tries = _failing(0)
    answer = _router(fn, **options).route_intent(CALL)
    assert answer.error is not None
    assert error in answer.error.message
    assert tries == []


def test_bad_backoffs_are_refused() -> None:
    """base <= 0, cap < base, factor < 1: ValueError."""
    for bad in ({"base": 0}, {"base": 2, "cap": 1}, {"factor": 0.5}):
        with pytest.raises(ValueError, match="a backoff needs"):
            exponential(**bad)  # type: ignore[arg-type]


class _Provider(BaseHTTPRequestHandler):
    """Answers with the server's next status (429/503 with Retry-After), then 200."""

    def do_GET(self) -> None:  # the http.server name
        server = self.server
        status = server.answers.pop(0) if server.answers else 200  # type: ignore[attr-defined]
        body = json.dumps({"ok": status == 200}).encode()
        self.send_response(status)
        if status != 200:
            self.send_header("Retry-After", server.retry_after)  # type: ignore[attr-defined]
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def provider() -> Iterator[ThreadingHTTPServer]:
    """A model provider on 127.0.0.1 that rate-limits first."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Provider)
    server.answers = []  # type: ignore[attr-defined]
    server.retry_after = "0"  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def _rate_limited(  # type: ignore[no-untyped-def]
    router: IntentRouter, server: ThreadingHTTPServer, answers: list[int], after: str
):
    """A call through the recording transport whose first answers are ``answers``."""
    server.answers = answers  # type: ignore[attr-defined]
    server.retry_after = after  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{server.server_address[1]}/v1/answer"
    client = httpx.Client(
        transport=RecordingTransport(router.store, mode="record", intent="provider")  # type: ignore[arg-type]
    )
    tries: list[float] = []

    def fn(x: int) -> object:
        tries.append(time.monotonic())
        response = client.get(url)
        response.raise_for_status()
        return response.json()

    return fn, tries, client


def _router_calling(options: dict[str, object]) -> tuple[IntentRouter, list[object]]:
    router = IntentRouter(store=MemoryExecutionStore())
    call: list[object] = []

    @router.agent("call")
    def agent(envelope, ctx):  # type: ignore[no-untyped-def]
        return {"value": ctx.step("flaky", {"x": 1}, call[0], **options)}

    return router, call


def test_retry_after_of_a_429_and_a_503_is_honoured(
    provider: ThreadingHTTPServer,
) -> None:
    """Retry-After: 0 waits the backoff; the 429 and 503 answers are recorded steps."""
    router, call = _router_calling(
        {"retries": 2, "backoff": exponential(base=0.2, cap=0.2)}
    )
    fn, tries, client = _rate_limited(router, provider, [429, 503], "0")
    call.append(fn)
    answer = router.route_intent(CALL)
    assert answer.payload == {"value": {"ok": True}}
    assert tries[1] - tries[0] >= 0.2
    assert tries[2] - tries[1] >= 0.2
    steps = record_steps(router.store.load(answer.metadata.execution_id))
    decisions = [s.output for s in steps if s.name == "retry:flaky"]
    assert [d["error"]["type"] for d in decisions] == ["HTTPStatusError"] * 2
    assert [d["retryAfterS"] for d in decisions] == [0.0, 0.0]
    client.close()
    router.close()


def test_a_long_retry_after_is_a_durable_wait_resumed_by_recovery(
    provider: ThreadingHTTPServer,
) -> None:
    """Retry-After: 1 s: the execution waits (retry); recovery runs the next attempt."""
    router, call = _router_calling({"retries": 1, "backoff": FAST})
    fn, tries, client = _rate_limited(router, provider, [429], "1")
    call.append(fn)
    waiting = router.route_intent(CALL)
    assert waiting.error is not None
    assert waiting.error.code.value == "WAITING"
    assert waiting.error.details["waitingFor"] == "retry"
    first = router.store.load(waiting.metadata.execution_id)
    assert first.header.status is RecordStatus.WAITING
    [decision] = [s.output for s in record_steps(first) if s.name == "retry:flaky"]
    assert decision["retryAfterS"] == 1.0
    assert decision["delayS"] == 1.0
    recovery = Recovery(router, grace=0)
    deadline = time.monotonic() + 5
    while not (report := recovery.run_once()).resumed and time.monotonic() < deadline:
        time.sleep(0.05)
    [done] = report.resumed
    final = router.store.load(done.resumed_as)
    assert final.final_response["payload"] == {"value": {"ok": True}}
    assert len(tries) == 2
    assert tries[1] - tries[0] >= 1.0
    client.close()
    router.close()


def test_an_async_step_is_retried_and_an_async_sleep_is_recorded() -> None:
    """astep(retries=...) in an async agent: attempts recorded; asleep's timer too."""
    router = IntentRouter(store=MemoryExecutionStore())
    tries: list[int] = []

    async def flaky(x: int) -> int:
        tries.append(x)
        if len(tries) < 2:
            raise ConnectionError("try 1")
        return x

    @router.agent("call")
    async def call(envelope, ctx):  # type: ignore[no-untyped-def]
        await ctx.asleep(0.05)
        value = await ctx.astep("flaky", {"x": 5}, flaky, retries=1, backoff=FAST)
        return {"value": value}

    answer = router.route_intent(CALL)
    assert answer.payload == {"value": 5}
    steps = record_steps(router.store.load(answer.metadata.execution_id))
    assert [s.name for s in steps] == [
        "intentusnet.sleep",
        "flaky",
        "retry:flaky",
        "flaky",
    ]
    router.close()
