"""Steps, re-runs and diffs: medians of what the issue sets targets for.

Run: python benchmarks/bench_steps.py [--dir PATH]

  * the overhead of one recorded step: an agent making 100 steps of a trivial
    function, minus the same agent calling the function directly, per step; with
    the in-memory store and with the file store (in a temporary directory unless
    --dir is given; a tmpfs such as /dev/shm shows the cost without the disk);
  * a strict re-run of a 50-step record whose steps sleep 1 ms, against the
    original run;
  * diff_records on two 1,000-step records that differ in one step;
  * an HTTP request through the recording transport (an in-process httpx
    MockTransport as the server, so only our work is timed), in ``record`` mode
    so every call is made and recorded: made inside an agent (a step of its
    record and a record of its own, linked), made outside one (a record of its
    own only), and served by a strict re-run (the re-run's own record, its
    loading and its diff shared out over the requests); per request, with the
    file store.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).parent))
from _timing import row

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
    JSONObject,
    MemoryExecutionStore,
    ReplayEngine,
    diff_records,
    rerun,
)
from intentusnet.integrations.httpx import RecordingTransport
from intentusnet.store import ExecutionStore


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    """Median wall time of ``fn`` in milliseconds, after one warm-up call."""
    fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def step_overhead(store: ExecutionStore, steps: int = 100) -> float:
    """Microseconds a recorded step adds to a direct call, per step."""

    def work(n: int) -> int:
        return n + 1

    def stepping(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        for i in range(steps):
            ctx.step("tools.work", {"n": i}, work)
        return {}

    def direct(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        for i in range(steps):
            work(n=i)
        return {}

    with IntentRouter(store=store) as router:
        router.agent("stepping", name="stepping")(stepping)
        router.agent("direct", name="direct")(direct)
        with_steps: JSONObject = {"intent": {"name": "stepping"}}
        without: JSONObject = {"intent": {"name": "direct"}}
        stepped = median_ms(lambda: router.route_intent(with_steps), 41)
        plain = median_ms(lambda: router.route_intent(without), 41)
    return (stepped - plain) * 1000 / steps


def rerun_vs_original(steps: int = 50) -> tuple[float, float]:
    """Milliseconds of the original run and of its strict re-run."""
    store = MemoryExecutionStore()

    def tool(i: int) -> dict[str, int]:
        time.sleep(0.001)  # a fast model or tool call
        return {"i": i}

    def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        return {
            "n": len([ctx.step("tools.slow", {"i": i}, tool) for i in range(steps)])
        }

    with IntentRouter(store=store) as router:
        router.agent("slow", name="slow")(agent)
        ids: list[str] = []

        def original() -> None:
            response = router.route_intent({"intent": {"name": "slow"}})
            ids.append(str(response.metadata.execution_id))

        original_ms = median_ms(original, 9)
        engine = ReplayEngine(store.load(ids[-1]))
        rerun_ms = median_ms(lambda: rerun(engine, router), 9)
    return original_ms, rerun_ms


def diff_of_large_records(steps: int = 1000) -> float:
    """Milliseconds of diff_records on two records of ``steps`` steps."""
    store = MemoryExecutionStore()
    bump = {"at": -1}

    def agent(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        for i in range(steps):
            ctx.step(f"tools.t{i % 10}", {"i": i}, lambda i: i + (i == bump["at"]))
        return {}

    with IntentRouter(store=store) as router:
        router.agent("big", name="big")(agent)
        first = router.route_intent({"intent": {"name": "big"}}).metadata.execution_id
        bump["at"] = steps // 2
        second = router.route_intent({"intent": {"name": "big"}}).metadata.execution_id
    a, b = store.load(str(first)), store.load(str(second))
    assert len(diff_records(a, b).entries) >= 1
    return median_ms(lambda: diff_records(a, b), 21)


def http_requests(store: ExecutionStore, calls: int = 20) -> tuple[float, ...]:
    """Microseconds per request: in an agent, outside one, served by a re-run."""

    def server(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"answer": 42})

    transport = RecordingTransport(
        store, mode="record", wrapped=httpx.MockTransport(server)
    )
    http = httpx.Client(transport=transport)

    def ask(i: int) -> None:
        http.post("https://api.example.com/v1/ask", json={"q": i})

    def asking(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        for i in range(calls):
            ask(i)
        return {}

    def idle(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        return {}

    with IntentRouter(store=store) as router:
        router.agent("asking", name="asking")(asking)
        router.agent("idle", name="idle")(idle)
        ids: list[str] = []

        def inside() -> None:
            response = router.route_intent({"intent": {"name": "asking"}})
            ids.append(str(response.metadata.execution_id))

        def outside() -> None:
            for i in range(calls):
                ask(i)

        bare = median_ms(lambda: router.route_intent({"intent": {"name": "idle"}}), 21)
        in_agent = median_ms(inside, 21) - bare
        own_record = median_ms(outside, 21)
        engine = ReplayEngine(store.load(ids[-1]))
        served = median_ms(lambda: rerun(engine, router), 21) - bare
    http.close()
    return tuple(ms * 1000 / calls for ms in (in_agent, own_record, served))


def main() -> None:
    """Print the medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--dir", help="where the file store lives (default: a temp dir)"
    )
    args = parser.parse_args()

    print("one recorded step (ctx.step, minus a direct call)")
    row(
        "in-memory store", step_overhead(MemoryExecutionStore()), note="target <= 30 us"
    )
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = FileExecutionStore(Path(tmp) / "store")
        row("file store", step_overhead(store), note="target <= 30 us")
        store.close()

    print("strict re-run of a 50-step record, steps sleeping 1 ms")
    original_ms, rerun_ms = rerun_vs_original()
    row("original run", original_ms, unit="ms")
    row("strict re-run (every step served from the record)", rerun_ms, unit="ms")
    row("re-run / original", rerun_ms / original_ms, unit="x ", note="small fraction")

    print("diff_records, two records of 1,000 steps")
    row("diff_records", diff_of_large_records(), unit="ms", note="target <= 50 ms")

    print("one HTTP request through the recording transport, file store")
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        store = FileExecutionStore(Path(tmp) / "store")
        in_agent, own_record, served = http_requests(store)
        store.close()
    row("inside an agent: a step and a record of its own", in_agent)
    row("outside an agent: a record of its own", own_record)
    row("  inside / outside", in_agent / own_record, unit="x ")
    row("served by a strict re-run (its record, load, diff shared)", served)


if __name__ == "__main__":
    main()
