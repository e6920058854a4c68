"""Queues (issue 38): concurrency and rate limits across router processes.

Run: python benchmarks/bench_queues.py [--quick] [--only concurrency rate]
         [--stores file postgres] [--executions 2000] [--seconds 30] [--dir PATH]

Four router processes share one store: a file store in a temporary directory
(--dir to choose where, e.g. /dev/shm; deleted afterwards) or a throwaway
PostgreSQL server (tests/pgkit.py, reached over its Unix socket). Each agent
appends ``start`` and ``end`` lines (with the time) to one ledger file
(``O_APPEND``), from which the figures are read. Prints, per store:

  * concurrency: --executions executions whose agents sleep 50 ms, on a queue
    with ``concurrency=8``, submitted asynchronously by four processes that only
    submit (``run_queued=False``; each is recorded ``queued``; submits per second
    are printed, from the processes' start), then started by four others as
    their turns come; the most running at once (from the ledger: target never
    above 8) and the throughput, from the first start to the last end, beside an
    unlimited run
    of the same executions routed with no queue by 4 x 2 threads (8 at once);
    target >= 90% of it. Beside them, the same queue with synchronous routes
    (4 processes x 8 threads waiting for turns);
  * rate: a queue with ``rate="100/s"`` and no concurrency limit, its agents
    doing nothing, routed by 4 processes x 8 threads for --seconds: starts per
    second over the run (target 100 +- 10%), and the median, lowest and highest
    count of a whole second within it.

``--quick``: 400 executions and 10 s.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

# pgkit: the tests' own PostgreSQL server, started the same way here
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))

from pgkit import postgres_server

from intentusnet import IntentRouter, open_store
from intentusnet.routing.queued import ExecutionQueued
from intentusnet.routing.seams import ExecutionOptions

PROCESSES = 4
CONCURRENCY = 8
SLEEP_S = 0.05


# -- the child processes ------------------------------------------------------------


def _write(ledger: str, kind: str) -> None:
    fd = os.open(ledger, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{kind} {time.time()!r}\n".encode())
    finally:
        os.close(fd)


def _router(where: str, ledger: str, sleep: float) -> IntentRouter:
    router = IntentRouter(store=open_store(where))
    limits = os.environ.get("BENCH_QUEUE")
    if limits == "concurrency":
        run = os.environ.get("BENCH_SUBMIT_ONLY") is None
        router.queue("llm", concurrency=CONCURRENCY, run_queued=run)
    elif limits == "rate":
        router.queue("llm", rate="100/s")
    queue = "llm" if limits else None

    @router.agent("work", queue=queue)
    def work(envelope, ctx):  # type: ignore[no-untyped-def]
        _write(ledger, "start")
        time.sleep(sleep)
        _write(ledger, "end")
        return {}

    return router


def _ended(ledger: str, count: int) -> bool:
    path = Path(ledger)
    return path.exists() and path.read_text().count("end") >= count


def child(mode: str, where: str, ledger: str, count: int, threads: int) -> None:
    """One router process: ``route`` (``count`` executions, or for ``-count`` s),
    ``submit`` (``count`` queued ones, then start them with the others) or
    ``work`` (start queued ones until the ledger has ``count`` ends)."""
    sleep = float(os.environ.get("BENCH_SLEEP", SLEEP_S))
    router = _router(where, ledger, sleep)
    if mode == "submit":
        for n in range(count):
            envelope = {"intent": {"name": "work"}, "payload": {"n": n}}
            with contextlib.suppress(ExecutionQueued):
                router.route_intent(envelope, options=ExecutionOptions(opened=print))
        router.close()
        return
    if mode == "work":
        while not _ended(ledger, count):
            time.sleep(0.02)
        router.close()
        return
    left = list(range(count)) if count > 0 else None
    until = time.monotonic() - count if count < 0 else None
    lock = threading.Lock()

    def loop() -> None:
        while True:
            with lock:
                if left is not None:
                    if not left:
                        return
                    left.pop()
            if until is not None and time.monotonic() >= until:
                return
            router.route_intent({"intent": {"name": "work"}, "payload": {}})

    workers = [threading.Thread(target=loop) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    router.close()


# -- the runs ------------------------------------------------------------------------


def _spawn(
    mode: str,
    where: str,
    ledger: Path,
    count: int,
    threads: int,
    queue: str | None,
    sleep: float,
    **extra: str,
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "BENCH_SLEEP": str(sleep), **extra}
    env.pop("BENCH_QUEUE", None)
    if queue is not None:
        env["BENCH_QUEUE"] = queue
    command = [
        sys.executable,
        __file__,
        "--child",
        mode,
        where,
        str(ledger),
        str(count),
        str(threads),
    ]
    return subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)


def _ledger(ledger: Path) -> list[tuple[str, float]]:
    return [
        (k, float(t))
        for k, t in (line.split() for line in ledger.read_text().splitlines())
    ]


def _run(processes: list[subprocess.Popen[bytes]]) -> None:
    for process in processes:
        process.wait(timeout=1800)
        if process.returncode != 0:
            raise SystemExit(f"a router process failed ({process.returncode})")


def concurrency(where: str, work: Path, executions: int) -> dict[str, float]:
    """Queued, synchronous and unlimited runs: max running and throughput."""
    figures: dict[str, float] = {}
    per = executions // PROCESSES
    for name, queue in (
        ("unlimited", None),
        ("queued", "concurrency"),
        ("sync", "concurrency"),
    ):
        ledger = work / f"ledger-{name}"
        if name == "queued":  # submitted first (4 x 1/4), then started by 4
            began = time.monotonic()
            _run(
                [
                    _spawn(
                        "submit", where, ledger, per, 0, queue, 0, BENCH_SUBMIT_ONLY="1"
                    )
                    for _ in range(PROCESSES)
                ]
            )
            figures["submits per s"] = executions / (time.monotonic() - began)
            procs = [
                _spawn("work", where, ledger, executions, 0, queue, SLEEP_S)
                for _ in range(PROCESSES)
            ]
        else:
            threads = 2 if queue is None else CONCURRENCY
            procs = [
                _spawn("route", where, ledger, per, threads, queue, SLEEP_S)
                for _ in range(PROCESSES)
            ]
        _run(procs)
        lines = _ledger(ledger)
        running = peak = 0
        for kind, _ in lines:
            running += 1 if kind == "start" else -1
            peak = max(peak, running)
        starts = [t for k, t in lines if k == "start"]
        ends = [t for k, t in lines if k == "end"]
        figures[f"{name} max running"] = peak
        figures[f"{name} per s"] = len(ends) / (max(ends) - min(starts))
    return figures


def rate(where: str, work: Path, seconds: float) -> dict[str, float]:
    """Starts per second under rate="100/s" from 4 processes."""
    ledger = work / "ledger-rate"
    _run(
        [
            _spawn("route", where, ledger, -round(seconds), 8, "rate", 0.0)
            for _ in range(PROCESSES)
        ]
    )
    starts = sorted(t for k, t in _ledger(ledger) if k == "start")
    first = starts[0]
    within = [t for t in starts if t < first + seconds]
    per_second = [
        sum(1 for t in within if first + s <= t < first + s + 1)
        for s in range(int(seconds))
    ]
    return {
        "starts per s": len(within) / seconds,
        "median second": statistics.median(per_second),
        "lowest second": min(per_second),
        "highest second": max(per_second),
        "burst (first second)": per_second[0],
        "steady per s (after the first second)": (len(within) - per_second[0])
        / (seconds - 1),
    }


def _stores(names: list[str], base: str | None) -> Iterator[tuple[str, str, Path]]:
    work = Path(tempfile.mkdtemp(prefix="bench-queues-", dir=base))
    try:
        for name in names:
            run = work / name
            run.mkdir()
            if name == "file":
                yield name, str(run / "records"), run
            else:
                with postgres_server(durable=True) as server:
                    yield name, server.socket_dsn(), run
    finally:
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    """Parse the options, run what is asked, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", nargs="+", default=["concurrency", "rate"])
    parser.add_argument("--stores", nargs="+", default=["file", "postgres"])
    parser.add_argument("--executions", type=int, default=2000)
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--dir", default=None)
    args = parser.parse_args()
    executions = 400 if args.quick else args.executions
    seconds = 10.0 if args.quick else args.seconds
    for name, where, work in _stores(args.stores, args.dir):
        if "concurrency" in args.only:
            figures = concurrency(where, work, executions)
            base = figures["unlimited per s"]
            print(
                f"{name}: concurrency=8, {executions} executions of 50 ms, 4 processes"
            )
            for key, value in figures.items():
                print(f"  {key}: {value:.1f}")
            for run in ("queued", "sync"):
                share = figures[f"{run} per s"] / base
                print(f"  {run} throughput: {share:.1%} of unlimited")
        if "rate" in args.only:
            figures = rate(where, work, seconds)
            print(f"{name}: rate=100/s over {seconds:g} s, 4 processes x 8 threads")
            for key, value in figures.items():
                print(f"  {key}: {value:.1f}")
        sys.stdout.flush()


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        mode, where, ledger, count, threads = sys.argv[2:7]
        child(mode, where, ledger, int(count), int(threads))
    else:
        main()
