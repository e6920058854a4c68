"""Queues: limits on how many executions run at once and how often they start.

In one process (the memory store, or no store) for the rules, and with several
real router processes on one file store and on one PostgreSQL database
(tests/routing/queuekit.py) for the limits every router shares. How many ran
at once is counted from a ledger the agents append to, in order, never timed.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from intentusnet import (
    ErrorCode,
    IntentRef,
    IntentRouter,
    InvalidQueue,
    MemoryExecutionStore,
    RecordStatus,
    UnknownQueue,
)
from intentusnet.routing.queues import parse_rate

sys.path.insert(0, str(Path(__file__).parent))
import queuekit  # the application the processes run, importable beside this file


def peaks(ledger: Path, skip: int = 0) -> tuple[int, dict[str, int]]:
    """The most executions running at once, in all and per tenant, by the ledger
    (its lines after the first ``skip``)."""
    now, top = 0, 0
    per: Counter[str] = Counter()
    per_top: dict[str, int] = {}
    for line in ledger.read_text().splitlines()[skip:]:
        kind, tenant = line.split()[:2]
        step = 1 if kind == "start" else -1
        now += step
        per[tenant] += step
        top = max(top, now)
        per_top[tenant] = max(per_top.get(tenant, 0), per[tenant])
    return top, per_top


def starts(ledger: Path) -> list[float]:
    """When each execution started, in ledger order."""
    return [
        float(line.split()[3])
        for line in ledger.read_text().splitlines()
        if line.startswith("start ")
    ]


# -- declaring queues: bad input -------------------------------------------------


@pytest.mark.parametrize(
    ("text", "count", "period"),
    [
        ("60/min", 60, 60.0),
        ("100/s", 100, 1.0),
        ("5/2h", 5, 7200.0),
        ("1000/day", 1000, 86400.0),
        (" 3 / 10 sec ", 3, 10.0),
        ("2/hours", 2, 3600.0),
        ("7/Minute", 7, 60.0),
    ],
)
def test_rates_that_parse(text: str, count: int, period: float) -> None:
    """A rate reads as COUNT/PERIOD with a unit, a multiple and spaces allowed."""
    rate = parse_rate(text)
    assert (rate.count, rate.period) == (count, period)
    assert rate.per_second == count / period


@pytest.mark.parametrize(
    "text",
    [
        "",
        "60",
        "60/",
        "/min",
        "0/s",
        "5/0s",
        "x/min",
        "5/fortnight",
        "-1/s",
        "1.5/s",
        5,
    ],
)
def test_rates_that_do_not_parse(text: object) -> None:
    """A rate that does not read, or counts 0, is InvalidQueue naming it."""
    with pytest.raises(InvalidQueue, match="rate"):
        parse_rate(text)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "arguments",
    [
        {"concurrency": 0},
        {"concurrency": -1},
        {"concurrency": 1.5},
        {"concurrency": True},
        {"concurrency": "2"},
        {"per_tenant": 0},
        {"per_worker": -3},
        {"rate": "often"},
        {"rate": "0/min"},
    ],
)
def test_bad_limits_declare_nothing(arguments: dict[str, object]) -> None:
    """A limit of 0 or below (or not whole), or a bad rate, declares nothing."""
    with IntentRouter() as router:
        with pytest.raises(InvalidQueue) as raised:
            router.queue("llm", **arguments)  # type: ignore[arg-type]
        assert next(iter(arguments)).split("_")[0] in str(raised.value)
        assert router.queues == {}
        assert raised.value.code == "invalid_queue"
        assert raised.value.exit_code == 2


@pytest.mark.parametrize("name", ["", "a b", "x" * 65, "llm/1", None])
def test_bad_names_declare_nothing(name: object) -> None:
    """A queue's name is 1 to 64 of A-Z a-z 0-9 _ . -; another declares nothing."""
    with IntentRouter() as router:
        with pytest.raises(InvalidQueue, match="name"):
            router.queue(name, concurrency=1)  # type: ignore[arg-type]
        assert router.queues == {}


def test_a_queue_is_declared_once_and_an_intent_is_on_one_queue() -> None:
    """A second queue of one name, or an intent on two queues, is InvalidQueue."""
    with IntentRouter() as router:
        first = router.queue("llm", concurrency=2, intents=["summarize"])
        router.queue("tools", concurrency=1)
        with pytest.raises(InvalidQueue, match="declared already"):
            router.queue("llm", concurrency=3)
        assert router.queues == {"llm": first, "tools": router.queues["tools"]}
        with pytest.raises(InvalidQueue, match="on queue 'llm'"):

            @router.agent("summarize", queue="tools")
            def other(envelope, ctx):  # type: ignore[no-untyped-def]
                return {}

        assert router.registry.candidates(IntentRef(name="summarize")) == ()


def test_an_unknown_queue_registers_nothing() -> None:
    """An agent naming an undeclared queue is UnknownQueue; nothing is registered."""
    with IntentRouter() as router:
        router.queue("llm", concurrency=1)
        with pytest.raises(UnknownQueue, match="'llm'") as raised:

            @router.agent("echo", queue="lml")
            def echo(envelope, ctx):  # type: ignore[no-untyped-def]
                return {}

        assert raised.value.queue == "lml"
        assert raised.value.exit_code == 2
        assert router.registry.candidates(IntentRef(name="echo")) == ()


# -- one process -----------------------------------------------------------------


class Gate:
    """An agent's body: note who started, hold until let go."""

    def __init__(self) -> None:
        self.started: list[object] = []
        self.go = threading.Event()
        self.lock = threading.Lock()
        self.running = 0
        self.peak = 0

    def __call__(self, envelope, ctx):  # type: ignore[no-untyped-def]
        with self.lock:
            self.started.append(envelope.payload.get("n"))
            self.running += 1
            self.peak = max(self.peak, self.running)
        self.go.wait(10)
        with self.lock:
            self.running -= 1
        return {"n": envelope.payload.get("n")}


def _route(router: IntentRouter, n: object, **routing: object) -> threading.Thread:
    envelope = {"intent": {"name": "work"}, "payload": {"n": n}, "routing": routing}
    thread = threading.Thread(target=router.route_intent, args=(envelope,))
    thread.start()
    return thread


def _until(check, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 10
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.002)


def test_a_full_queue_answers_queue_timeout_and_runs_nothing() -> None:
    """Every slot taken: a route waits its timeoutMs, then QUEUE_TIMEOUT; none ran."""
    gate = Gate()
    with IntentRouter(store=MemoryExecutionStore()) as router:
        router.queue("llm", concurrency=1)
        router.agent("work", queue="llm")(gate)
        holder = _route(router, 1)
        _until(lambda: gate.started == [1], "the first execution starts")
        answer = router.route_intent(
            {
                "intent": {"name": "work"},
                "payload": {"n": 2},
                "routing": {"timeoutMs": 50},
            }
        )
        assert answer.error is not None
        assert answer.error.code is ErrorCode.QUEUE_TIMEOUT
        assert answer.error.retryable
        assert answer.error.details["queue"] == "llm"
        assert answer.error.details["waitedMs"] >= 50
        record = router.store.load(answer.metadata.execution_id)
        assert record.header.status is RecordStatus.FAILED
        assert gate.started == [1]
        assert answer.metadata.attempts == []
        gate.go.set()
        holder.join()
        after = router.route_intent({"intent": {"name": "work"}, "payload": {"n": 3}})
        assert after.payload == {"n": 3}


def test_priority_orders_the_waiting() -> None:
    """With priority=True the waiting start by context.priority, lower first."""
    gate = Gate()
    with IntentRouter() as router:
        router.queue("llm", concurrency=1, priority=True)
        router.agent("work", queue="llm")(gate)
        threads = [_route(router, 0)]
        _until(lambda: gate.started == [0], "the first execution starts")
        for n, priority in [(1, 5), (2, 1), (3, 3), (4, 1)]:
            envelope = {
                "intent": {"name": "work"},
                "payload": {"n": n},
                "context": {"priority": priority},
            }
            threads.append(
                threading.Thread(target=router.route_intent, args=(envelope,))
            )
            threads[-1].start()
            _until(lambda n=n: router._queues.waiting("llm") == n, "waiting")
        gate.go.set()
        for thread in threads:
            thread.join()
        assert gate.started == [0, 2, 4, 3, 1]  # priority 1, 1 (in order), 3, 5


def test_without_priority_the_waiting_start_in_order() -> None:
    """A queue without priority starts the waiting in the order they came."""
    gate = Gate()
    with IntentRouter() as router:
        router.queue("llm", concurrency=1)
        router.agent("work", queue="llm")(gate)
        threads = [_route(router, 0)]
        _until(lambda: gate.started == [0], "the first execution starts")
        for n, priority in [(1, 5), (2, 1), (3, 3)]:
            envelope = {
                "intent": {"name": "work"},
                "payload": {"n": n},
                "context": {"priority": priority},
            }
            threads.append(
                threading.Thread(target=router.route_intent, args=(envelope,))
            )
            threads[-1].start()
            _until(lambda n=n: router._queues.waiting("llm") == n, "waiting")
        gate.go.set()
        for thread in threads:
            thread.join()
        assert gate.started == [0, 1, 2, 3]


def _tenant_route(router: IntentRouter, n: int, tenant: str) -> threading.Thread:
    envelope = {
        "intent": {"name": "work"},
        "payload": {"n": n},
        "context": {"tenant": tenant},
    }
    thread = threading.Thread(target=router.route_intent, args=(envelope,))
    thread.start()
    return thread


def test_per_tenant_caps_a_tenant_and_others_go_past() -> None:
    """per_tenant=2 of concurrency=3: a tenant's third waits, another tenant's goes."""
    gate = Gate()
    with IntentRouter(store=MemoryExecutionStore()) as router:
        router.queue("llm", concurrency=3, per_tenant=2)
        router.agent("work", queue="llm")(gate)
        threads = [_tenant_route(router, n, "a") for n in range(4)]
        threads += [_tenant_route(router, n, "b") for n in (4, 5)]
        _until(lambda: len(gate.started) == 3, "three start")
        _until(lambda: router._queues.waiting("llm") == 3, "three wait")
        assert len(gate.started) == 3  # b's second waits for the queue, a's for a
        assert sum(n < 4 for n in gate.started) == 2  # type: ignore[operator]
        gate.go.set()
        for thread in threads:
            thread.join()
        assert sorted(gate.started) == list(range(6))  # type: ignore[type-var]


def test_per_worker_caps_each_router() -> None:
    """per_worker=2: two routers on one store run two each, four in all."""
    gates = Gate(), Gate()
    store = MemoryExecutionStore()
    with IntentRouter(store=store) as one, IntentRouter(store=store) as two:
        threads = []
        for router, gate in zip((one, two), gates, strict=True):
            router.queue("llm", concurrency=10, per_worker=2)
            router.agent("work", queue="llm")(gate)
            threads += [_route(router, n) for n in range(4)]
        for router, gate in zip((one, two), gates, strict=True):
            _until(lambda gate=gate: len(gate.started) == 2, "two start")
            _until(lambda r=router: r._queues.waiting("llm") == 2, "two wait")
        assert [len(gate.started) for gate in gates] == [2, 2]
        for gate in gates:
            gate.go.set()
        for thread in threads:
            thread.join()
        assert [gate.peak for gate in gates] == [2, 2]


def test_async_routes_wait_without_a_thread_and_time_out() -> None:
    """``await route`` waits on the loop; a cancelled wait holds nothing."""
    gate = Gate()
    with IntentRouter() as router:
        router.queue("llm", concurrency=1)
        router.agent("work", queue="llm")(gate)

        async def main() -> None:
            holder = asyncio.ensure_future(
                router.route({"intent": {"name": "work"}, "payload": {"n": 1}})
            )
            while gate.started != [1]:
                await asyncio.sleep(0.002)
            timed = await router.route(
                {
                    "intent": {"name": "work"},
                    "payload": {"n": 2},
                    "routing": {"timeoutMs": 30},
                }
            )
            assert timed.error is not None
            assert timed.error.code is ErrorCode.QUEUE_TIMEOUT
            cancelled = asyncio.ensure_future(
                router.route({"intent": {"name": "work"}, "payload": {"n": 3}})
            )
            while router._queues.waiting("llm") != 1:
                await asyncio.sleep(0.002)
            cancelled.cancel()
            with pytest.raises(asyncio.CancelledError):
                await cancelled
            assert router._queues.waiting("llm") == 0
            gate.go.set()
            assert (await holder).payload == {"n": 1}
            again = await router.route(
                {"intent": {"name": "work"}, "payload": {"n": 4}}
            )
            assert again.payload == {"n": 4}

        asyncio.run(main())
        assert gate.started == [1, 4]


def test_a_child_runs_in_its_parents_turn() -> None:
    """A child intent on its parent's queue runs in the parent's turn: no deadlock."""
    with IntentRouter(store=MemoryExecutionStore()) as router:
        router.queue("llm", concurrency=1)

        @router.agent("outer", queue="llm")
        def outer(envelope, ctx):  # type: ignore[no-untyped-def]
            inner = ctx.route({"intent": {"name": "inner"}, "payload": {}})
            return {"inner": inner.payload}

        @router.agent("inner", queue="llm")
        def inner(envelope, ctx):  # type: ignore[no-untyped-def]
            return {"ok": True}

        answer = router.route_intent(
            {"intent": {"name": "outer"}, "payload": {}, "routing": {"timeoutMs": 5000}}
        )
        assert answer.payload == {"inner": {"ok": True}}


def test_a_queue_by_intent_and_an_intent_on_no_queue() -> None:
    """``intents=`` puts an intent on a queue; an intent on none never waits."""
    gate = Gate()
    with IntentRouter() as router:
        router.queue("llm", concurrency=1, intents=["work"])
        router.agent("work")(gate)

        @router.agent("free")
        def free(envelope, ctx):  # type: ignore[no-untyped-def]
            return {"free": True}

        holder = _route(router, 1)
        _until(lambda: gate.started == [1], "the first execution starts")
        timed = router.route_intent(
            {
                "intent": {"name": "work"},
                "payload": {"n": 2},
                "routing": {"timeoutMs": 20},
            }
        )
        assert timed.error is not None
        assert timed.error.code is ErrorCode.QUEUE_TIMEOUT
        free_answer = router.route_intent({"intent": {"name": "free"}, "payload": {}})
        assert free_answer.payload == {"free": True}
        gate.go.set()
        holder.join()


def test_rate_limits_starts_in_one_process() -> None:
    """At most COUNT start at once, then COUNT per period: the bucket's bound holds."""
    times: list[float] = []
    with IntentRouter() as router:
        router.queue("llm", rate="50/s")

        @router.agent("work", queue="llm")
        def work(envelope, ctx):  # type: ignore[no-untyped-def]
            times.append(time.monotonic())
            return {}

        for _ in range(80):
            router.route_intent({"intent": {"name": "work"}, "payload": {}})
    _within_bucket(times, count=50, per_second=50.0)
    assert times[-1] - times[0] >= (80 - 50) / 50 * 0.95


def _within_bucket(times: list[float], *, count: int, per_second: float) -> None:
    """No span of starts holds more than a full bucket plus what it gained."""
    times = sorted(times)
    for i in range(len(times)):
        for j in range(i + count, len(times)):
            allowed = count + (times[j] - times[i]) * per_second + 1
            assert j - i + 1 <= allowed, (i, j, times[j] - times[i])


# -- several processes -------------------------------------------------------------


@pytest.fixture(params=["file", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The store the processes share: a directory, or a new PostgreSQL database."""
    if request.param == "file":
        yield str(tmp_path / "records")
    else:
        yield request.getfixturevalue("pg_dsn")


def _start(
    where: str, ledger: Path, count: int, threads: int, tenant: str, **env: object
) -> subprocess.Popen[str]:
    return queuekit.spawn("route", where, ledger, count, threads, tenant, **env)


def _codes(process: subprocess.Popen[str]) -> list[str]:
    out, _ = process.communicate(timeout=120)
    assert process.returncode == 0
    return out.split()


@pytest.mark.slow
def test_processes_share_concurrency_and_tenant_limits(
    where: str, tmp_path: Path
) -> None:
    """Four routers on one store: never more than 3 run at once, nor 2 per tenant."""
    ledger = tmp_path / "ledger"
    limits = {
        "queue_concurrency": 3,
        "queue_per_tenant": 2,
        "queue_fill": 3,
        "queue_total": 24,
    }
    processes = [
        _start(where, ledger, 6, 3, tenant, **limits) for tenant in ("a", "a", "b", "b")
    ]
    codes = [code for process in processes for code in _codes(process)]
    assert codes == ["ok"] * 24
    top, per_tenant = peaks(ledger)
    assert top == 3  # reached (so a tenant ran 2 at once), never passed
    assert max(per_tenant.values()) == 2


@pytest.mark.slow
def test_a_killed_router_gives_its_slot_back(where: str, tmp_path: Path) -> None:
    """A router SIGKILLed while it holds the only slot: others wait, then get it."""
    ledger = tmp_path / "ledger"
    stalled = _start(where, ledger, 1, 1, "-", queue_concurrency=1, queue_stall=1)
    deadline = time.monotonic() + 60
    while not Path(f"{ledger}.stalled").exists():
        assert time.monotonic() < deadline
        assert stalled.poll() is None
        time.sleep(0.01)
    # another process finds the slot taken: its route times out
    blocked = _start(
        where, ledger, 1, 1, "-", queue_concurrency=1, queue_timeout_ms=300
    )
    assert _codes(blocked) == ["QUEUE_TIMEOUT"]
    stalled.send_signal(signal.SIGKILL)
    stalled.communicate(timeout=30)
    assert ledger.read_text().count("\n") == 1  # its start; it never ended
    after = _start(
        where, ledger, 2, 1, "-", queue_concurrency=1, queue_timeout_ms=30000
    )
    assert _codes(after) == ["ok", "ok"]
    assert peaks(ledger, skip=1)[0] == 1


@pytest.mark.slow
def test_processes_share_a_rate_limit(where: str, tmp_path: Path) -> None:
    """Two routers on one store: starts never pass one bucket of 10 and 10 a second."""
    ledger = tmp_path / "ledger"
    processes = [_start(where, ledger, 10, 2, "-", queue_rate="10/s") for _ in range(2)]
    assert [code for p in processes for code in _codes(p)] == ["ok"] * 20
    times = starts(ledger)
    _within_bucket(times, count=10, per_second=10.0)
    assert max(times) - min(times) >= (20 - 10) / 10 * 0.9
