"""Durable executions (issue 24): medians of its targets, file store and PostgreSQL.

Run: python benchmarks/bench_durable.py
         [--only kill cancel key repeat patch scan trial wait ...]
         [--grace 2] [--kill-runs 7] [--records 100000] [--kills 100]
         [--patch-runs 200] [--waiting 10000] [--dir PATH]

Starts a throwaway PostgreSQL server (tests/pgkit.py, the server's durable
defaults, reached over its Unix socket); the file store lives in a temporary
directory (--dir to choose where; deleted afterwards). Stores record with
durability "flush". The application is the tests' shop
(tests/routing/shopkit.py: fetch, e-mail (a side effect), charge). Prints, per store:

  * kill: seconds from a router's SIGKILL (after the e-mail, before the charge)
    to its execution completed by another process running
    ``Recovery(router, grace=--grace).run_forever()`` (a scan a second), median
    of --kill-runs; target <= grace + 1 s;
  * cancel: seconds from calling ``router.cancel(ID)`` to the record of a
    running execution (the shop's ``tick``, a step every 20 ms, in another
    process) reading ``cancelled``: its router saw the request and stopped it
    at a step; median of --kill-runs; target <= 1 s;
  * key: route_intent with a new idempotency key minus without one (a new
    envelope each call, no cache), medians of runs taking turns; targets
    <= 30 us (file store), <= 0.5 ms (PostgreSQL);
  * repeat: a repeated key answered from its record, beside a ReplayCache hit
    served from a record (a cache that never saw the envelope) and one from its
    warm memory tier; target: within 1.5x of a cache hit;
  * patch: ``ctx.patched(name)`` on the path that has the marker: a check
    after the first in an execution (its answer is the execution's), median of
    batches; target <= 5 us. Beside it, once per execution, the first check:
    in a new execution (the marker recorded) and in a resume whose record
    holds the marker (served), medians of --patch-runs executions, each
    beside a plain ``ctx.step`` timed the same way (the marker is a step);
  * scan: ``Recovery.scan()`` over --records completed records (seven intents)
    and 100 interrupted ones of the recovered intent, in a fresh process: first
    scan and median of five, records/s, peak RSS before and after (memory
    flat); target (at 1M records) <= 1 s;
  * trial: --kills routers killed at random points, one recovery scan, and what
    became of each order (shopkit.kill_trial): completed, failed,
    needs_attention, lost, side effects twice, steps re-run.
  * wait (issue 38): with the service's own background recovery
    (server/recovery.py: a wake-up scan every 0.25 s) on an idle store,
    seconds from a signal sent to its waiting execution completed, and from a
    durable sleep's due time to its execution completed, medians of
    --kill-runs; target <= 1 s. Then --waiting executions made to wait a day:
    ``Recovery.run_once()`` (interrupted scan and due wake-ups) with none and
    with them all waiting, medians of 21 (flat: target within 2x), and the
    threads of the process before and after (none per waiting execution).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import multiprocessing
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import psycopg

from intentusnet import (
    EventType,
    IntentRouter,
    ListFilters,
    MemoryExecutionStore,
    RecordStatus,
    Recovery,
    open_store,
)
from intentusnet.cache.replay_cache import ReplayCache
from intentusnet.hashing import compute_hash
from intentusnet.store import FileExecutionStore, PostgresExecutionStore

# pgkit and the shop: the tests' own, started the same way here
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).parent))
from _timing import per_call_median, row, side_by_side
from pgkit import postgres_server

HERE = Path(__file__).parent
TESTS = HERE.parent / "tests"

KIT = TESTS / "routing" / "shopkit.py"
Store = FileExecutionStore | PostgresExecutionStore
SECTIONS = ["kill", "cancel", "key", "repeat", "patch", "scan", "trial", "wait"]
INTERRUPTED = 100


def shop(where: str, log: str) -> ModuleType:
    """The tests' shop loaded in this process, recording into ``where``."""
    os.environ.update(SHOP_STORE=where, SHOP_LOG=log)
    os.environ.pop("SHOP_KILL", None)
    spec = importlib.util.spec_from_file_location(f"shop_{abs(hash(where))}", KIT)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_kill(where: str, log: str, grace: float, runs: int) -> None:
    """SIGKILL after the e-mail; time until another process's recovery completes it."""
    env = {**os.environ, "SHOP_STORE": where, "SHOP_LOG": log}
    store = open_store(where)
    recovering = subprocess.Popen(
        [sys.executable, str(KIT), "recover", str(grace)], env=env
    )
    samples = []
    try:
        for _ in range(runs):
            done = len(store.list(ListFilters(status=RecordStatus.COMPLETED)))
            subprocess.run(
                [sys.executable, str(KIT), "route"],
                env={**env, "SHOP_KILL": "before:charge"},
                capture_output=True,
                check=False,
            )
            killed = time.perf_counter()
            while len(store.list(ListFilters(status=RecordStatus.COMPLETED))) == done:
                if time.perf_counter() - killed > grace + 30:
                    raise SystemExit("recovery did not complete the execution")
                time.sleep(0.01)
            samples.append(time.perf_counter() - killed)
    finally:
        recovering.kill()
        recovering.wait()
        store.close()
    row(f"kill -> completed elsewhere (grace {grace:g} s), median of {runs}",
        statistics.median(samples), unit="s ",
        note=f"target <= {grace + 1:g} s; min {min(samples):.2f}, "
        f"max {max(samples):.2f}")  # fmt: skip


def bench_cancel(where: str, log: str, runs: int) -> None:
    """Cancel a running execution of another process; time until it reads cancelled."""
    env = {**os.environ, "SHOP_STORE": where, "SHOP_LOG": log}
    router = shop(where, log).router
    store = router.store
    assert store is not None
    samples = []
    for _ in range(runs):
        seen = {s.execution_id for s in store.list()}
        ticking = subprocess.Popen(
            [sys.executable, str(KIT), "tick"], env=env, stdout=subprocess.DEVNULL
        )
        while not (running := [s for s in store.list() if s.execution_id not in seen]):
            time.sleep(0.005)
        time.sleep(0.2)  # ticking
        asked = time.perf_counter()
        record, _closed = router.cancel(running[0].execution_id, by="bench")
        while store.load(record).header.status is not RecordStatus.CANCELLED:
            if time.perf_counter() - asked > 30:
                raise SystemExit("the running execution was never cancelled")
            time.sleep(0.002)
        samples.append(time.perf_counter() - asked)
        ticking.wait()
    router.close()
    store.close()
    row(f"cancel -> running execution stopped elsewhere, median of {runs}",
        statistics.median(samples), unit="s ",
        note=f"target <= 1 s; min {min(samples):.2f}, "
        f"max {max(samples):.2f}")  # fmt: skip


def _order(n: int, tag: str) -> dict[str, object]:
    return {"intent": {"name": "echo"}, "payload": {"n": n, "tag": tag}}


def _echo_router(store: Store, cache: ReplayCache | None = None) -> IntentRouter:
    router = IntentRouter(store=store, cache=cache)

    @router.agent("echo")
    def echo(env, ctx):  # type: ignore[no-untyped-def]
        return env.payload

    return router


def bench_key(where: str, target: str, number: int) -> None:
    """Keyed minus unkeyed route_intent of new envelopes, runs taking turns."""
    router = _echo_router(open_store(where))
    counter = iter(range(10**9))

    def keyed() -> object:
        n = next(counter)
        return router.route_intent(_order(n, "k"), idempotency_key=f"key-{n}")

    def plain() -> object:
        return router.route_intent(_order(next(counter), "p"))

    found = side_by_side({"keyed": keyed, "plain": plain}, number=number, repeat=15)
    row("route_intent, new envelope, no key", found["plain"])
    row("route_intent, new envelope, new idempotency key", found["keyed"])
    row("cost of the key", found["keyed"] - found["plain"], note=f"target <= {target}")
    router.close()
    router.store.close()  # type: ignore[union-attr]


def bench_repeat(where: str, number: int) -> None:
    """A repeated key answered from its record, beside cache hits."""
    store = open_store(where)
    router = _echo_router(store)
    router.route_intent(_order(0, "repeat"), idempotency_key="repeated")
    for n in range(number):
        router.route_intent(_order(n, "hit"))
    directory = tempfile.mkdtemp(prefix="bench-durable-cache-")
    cold = ReplayCache(directory, store=store, record_hits=False)
    hits = _echo_router(store, cold)
    repeated = per_call_median(
        lambda _n: router.route_intent(_order(0, "repeat"), idempotency_key="repeated"),
        number,
    )

    def first_hit(n: int) -> None:
        assert hits.route_intent(_order(n, "hit")).metadata.from_replay

    from_record = per_call_median(first_hit, number)
    warm = per_call_median(lambda _n: hits.route_intent(_order(0, "hit")), number)
    row("repeated key, answered from its record", repeated)
    row("cache hit served from a record (cache never saw it)", from_record,
        note=f"ratio {repeated / from_record:.2f}x (target <= 1.5x)")  # fmt: skip
    row("cache hit from the warm memory tier", warm,
        note=f"ratio {repeated / warm:.2f}x")  # fmt: skip
    router.close()
    hits.close()
    store.close()


class _Stop(BaseException):
    """Ends an execution after its first patch check: its record stays open."""


def bench_patch(where: str, runs: int, number: int = 10_000) -> None:
    """``ctx.patched``: a repeated check, and the first check (new, resumed)."""
    store = open_store(where)
    router = IntentRouter(store=store)
    plan: dict[str, object] = {"stop": True}
    first: list[float] = []
    steps: list[float] = []  # a plain ctx.step beside it, the same way
    batches: list[float] = []

    @router.agent("patch")
    def agent(env, ctx):  # type: ignore[no-untyped-def]
        start = time.perf_counter_ns()
        ctx.patched("c")
        first.append((time.perf_counter_ns() - start) / 1000)
        start = time.perf_counter_ns()
        ctx.step("plain", {}, lambda: 1)
        steps.append((time.perf_counter_ns() - start) / 1000)
        if plan["stop"]:
            raise _Stop
        for _ in range(0 if batches else 15):  # once: the first resume's
            start = time.perf_counter_ns()
            for _ in range(number):
                ctx.patched("c")
            batches.append((time.perf_counter_ns() - start) / 1000 / number)
        return {}

    for n in range(runs):
        with contextlib.suppress(_Stop):
            router.route_intent({"intent": {"name": "patch"}, "payload": {"n": n}})
    interrupted = [s.execution_id for s in store.list()]
    new, step_new = statistics.median(first), statistics.median(steps)
    first.clear()
    steps.clear()
    plan["stop"] = False
    for execution_id in interrupted:
        router.resume(execution_id)
    resumed, step_resumed = statistics.median(first), statistics.median(steps)
    row("patched(), a check after the first (marker held)",
        statistics.median(batches), note="target <= 5 us")  # fmt: skip
    row(f"patched(), first check, new execution (marker recorded), {runs}", new,
        note=f"a plain ctx.step there: {step_new:.2f} us")  # fmt: skip
    row(f"patched(), first check, resume (marker served), {runs}", resumed,
        note=f"a plain ctx.step there: {step_resumed:.2f} us")  # fmt: skip
    router.close()
    store.close()


def _fill_pg(dsn: str, start: int, count: int) -> None:
    """Make ``count`` records (three events, complete) and import them into ``dsn``."""
    sys.path.insert(0, str(HERE))
    from bench_store_scale import _envelope

    memory = MemoryExecutionStore()
    with open_store(dsn) as pg:
        for n in range(start, start + count):
            wire = _envelope(n)
            writer = memory.open(wire, envelope_hash=compute_hash(wire))
            writer.append(EventType.AGENT_ATTEMPT_START, {"agent": "a", "attempt": 1})
            writer.complete({"status": "success", "payload": {"n": n}, "error": None,
                             "metadata": {"agent": "a"}})  # fmt: skip
            pg.import_raw(writer.execution_id, memory.raw(writer.execution_id))  # type: ignore[union-attr]
            memory.delete(writer.execution_id)


def build(where: str, records: int) -> float:
    """``records`` completed records (bench_store_scale's), two processes."""
    from bench_store_scale import build as build_files

    if not where.startswith("postgresql://"):
        return build_files(where, records)
    started = time.perf_counter()
    half = records // 2
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(target=_fill_pg, args=(where, 0, half)),
        context.Process(target=_fill_pg, args=(where, half, records - half)),
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
        assert worker.exitcode == 0
    return time.perf_counter() - started


def _scan(where: str, queue: multiprocessing.Queue[tuple[float, ...]]) -> None:
    """In a fresh process: five scans; their times and peak RSS before and after."""
    router = IntentRouter(store=open_store(where))
    router.agent("intent-0", name="zero")(lambda env, ctx: {})
    recovery = Recovery(router, grace=0)
    router.store.list(ListFilters(limit=1))  # type: ignore[union-attr]  # connect
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    times, found = [], 0
    for _ in range(5):
        started = time.perf_counter()
        found = len(recovery.scan())
        times.append(time.perf_counter() - started)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    queue.put((times[0], statistics.median(times), found, before, after))


def bench_scan(where: str, records: int) -> None:
    """Recovery's scan over ``records`` records and 100 interrupted ones."""
    took = build(where, records)
    with open_store(where) as store:
        wire = {"intent": {"name": "intent-0", "version": "1.0"}, "payload": {}}
        for _ in range(INTERRUPTED):
            writer = store.open(wire, envelope_hash=compute_hash(wire))
            writer.append(EventType.INTENT_RECEIVED, {"requestId": "r"})
            writer.close()  # its owner is gone: incomplete
    context = multiprocessing.get_context("spawn")
    queue: multiprocessing.Queue[tuple[float, ...]] = context.Queue()
    child = context.Process(target=_scan, args=(where, queue))
    child.start()
    first, median, found, before, after = queue.get(timeout=600)
    child.join()
    total = records + INTERRUPTED
    row(f"build {records} records", took, unit="s ", note=f"{records / took:.0f}/s")
    row(f"scan over {total} records, first (found {found:.0f})", first * 1000,
        unit="ms", note=f"{total / first:,.0f} records/s")  # fmt: skip
    row("scan, median of five", median * 1000, unit="ms",
        note=f"{total / median:,.0f} records/s; target (1M) <= 1000 ms")  # fmt: skip
    row("peak RSS before the scans / after them", before / 1024, unit="MB",
        note=f"after: {after / 1024:.1f} MB")  # fmt: skip


def bench_trial(where: str, log: str, kills: int) -> None:
    """``kills`` random kills, one recovery scan, the counts."""
    kit = shop(where, log)
    started = time.perf_counter()
    counts = kit.kill_trial(kills, seed=24)
    took = time.perf_counter() - started
    kit.router.close()
    kit.router.store.close()
    print(f"  {kills} random kills ({took:.0f} s): "
          + ", ".join(f"{name} {value}" for name, value in counts.items()))  # fmt: skip


def _waiter(where: str) -> IntentRouter:
    router = IntentRouter(store=open_store(where))
    router.agent("wait", name="wait")(lambda env, ctx: {"got": ctx.wait_for("go")})
    router.agent("nap", name="nap")(lambda env, ctx: ctx.sleep(env.payload["s"]) or {})
    return router


def _completed_after(router: IntentRouter, execution_id: str, start: float) -> float:
    """Seconds from ``start`` (epoch) until the execution's chain completed."""
    store = router.store
    assert store is not None
    deadline = time.time() + 30
    while time.time() < deadline:
        head = execution_id
        while (following := store.resumed_by(head)) is not None:  # type: ignore[union-attr]
            head = following
        with contextlib.suppress(Exception):
            if store.load(head).header.status is RecordStatus.COMPLETED:
                return time.time() - start
        time.sleep(0.005)
    raise TimeoutError(f"{execution_id} was not resumed in 30 s")


def bench_wait(where: str, runs: int, waiting: int) -> None:
    """Wake-up latency with the service's recovery; a scan beside many waiting."""
    from intentusnet.server.metrics import Metrics
    from intentusnet.server.recovery import BackgroundRecovery

    router = _waiter(where)
    background = BackgroundRecovery(Recovery(router, grace=0), Metrics())
    background.start()
    signalled, slept = [], []
    for _ in range(runs):
        answer = router.route_intent({"intent": {"name": "wait"}, "payload": {}})
        execution_id = str(answer.metadata.execution_id)
        time.sleep(0.3)  # idle: the service is between two looks
        sent = time.time()
        router.signal(execution_id, "go", 1)
        signalled.append(_completed_after(router, execution_id, sent))
        answer = router.route_intent({"intent": {"name": "nap"}, "payload": {"s": 1.0}})
        assert answer.error is not None
        due = int(answer.error.details["dueUs"]) / 1e6  # type: ignore[arg-type]
        slept.append(_completed_after(router, str(answer.metadata.execution_id), due))
    background.stop(5)
    row("signal sent -> its waiting execution completed", statistics.median(signalled),
        unit="s ", note=f"max {max(signalled):.2f} s; target <= 1 s")  # fmt: skip
    row("sleep due -> its execution completed", statistics.median(slept), unit="s ",
        note=f"max {max(slept):.2f} s; target <= 1 s")  # fmt: skip

    recovery = Recovery(router, grace=0)

    def scans() -> float:
        recovery.run_once()  # warm: connections, caches
        times = []
        for _ in range(21):
            started = time.perf_counter()
            recovery.run_once()
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    idle = scans()
    threads = threading.active_count()
    started = time.perf_counter()
    for _ in range(waiting):
        router.route_intent({"intent": {"name": "nap"}, "payload": {"s": 86_400}})
    made = time.perf_counter() - started
    busy = scans()
    row(f"make {waiting} executions wait a day", made, unit="s ",
        note=f"{waiting / made:.0f}/s")  # fmt: skip
    row("Recovery.run_once(), none waiting", idle * 1000, unit="ms")
    row(f"Recovery.run_once(), {waiting} waiting", busy * 1000, unit="ms",
        note=f"{busy / idle:.2f}x; target flat (<= 2x)")  # fmt: skip
    row("threads before / after they wait", threads, unit="  ",
        note=f"after: {threading.active_count()}; processes: this one")  # fmt: skip
    router.close()
    router.store.close()  # type: ignore[union-attr]


def main() -> None:
    """Start the server, print the medians per store, stop it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="+", choices=SECTIONS, default=SECTIONS)
    parser.add_argument("--grace", type=float, default=2.0)
    parser.add_argument("--kill-runs", type=int, default=7)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--patch-runs", type=int, default=200)
    parser.add_argument("--waiting", type=int, default=10_000)
    parser.add_argument("--dir", default=None, help="where the file store goes")
    args = parser.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # stop the server too
    base = Path(tempfile.mkdtemp(prefix="bench-durable-", dir=args.dir))
    try:
        run(args, base)
    finally:
        shutil.rmtree(base, ignore_errors=True)


def run(args: argparse.Namespace, base: Path) -> None:
    """Every section asked for, per store, with the server up."""
    with postgres_server(durable=True) as server:
        names: dict[str, Callable[[str], str]] = {
            "file store": lambda part: str(base / part),
            "PostgreSQL": server.socket_dsn,
        }
        with psycopg.connect(server.socket_dsn(), autocommit=True) as conn:
            for part in SECTIONS:
                conn.execute(f"CREATE DATABASE {part}")
        for label, at in names.items():
            print(f"{label}")
            log = str(base / f"log-{label[0]}")
            if "kill" in args.only:
                bench_kill(at("kill"), log, args.grace, args.kill_runs)
            if "cancel" in args.only:
                bench_cancel(at("cancel"), log + "-cancel", args.kill_runs)
            if "key" in args.only:
                target = "30 us" if label == "file store" else "500 us"
                bench_key(at("key"), target, 300 if label == "file store" else 100)
            if "repeat" in args.only:
                bench_repeat(at("repeat"), 500)
            if "patch" in args.only:
                bench_patch(at("patch"), args.patch_runs)
            if "scan" in args.only:
                bench_scan(at("scan"), args.records)
            if "trial" in args.only:
                bench_trial(at("trial"), log + "-trial", args.kills)
            if "wait" in args.only:
                bench_wait(at("wait"), args.kill_runs, args.waiting)


if __name__ == "__main__":
    main()
