"""Whole-store work at scale: reindex, verify --all and stats over N records.

Run: python benchmarks/bench_store_scale.py [--records 1000000] [--dir /dev/shm]

Builds a store of --records records (default 20,000) with the real writer
(FileExecutionStore.open, three events, complete), in one process per CPU, in a
temporary directory under --dir (deleted afterwards unless --keep). Then, each
in a fresh process:

  * ``intentusnet reindex`` after the catalog was deleted;
  * ``intentusnet verify --all`` with its output piped (bytes printed);
  * ``FileExecutionStore.stats()``: the first call and the median of five;
  * ``intentusnet stats`` (counts, sizes and what caching saved), the whole
    command in a fresh process: the median of five, beside ``--help``'s.

For the two commands it prints the time, records/s and peak memory: the largest
sum of resident memory of the command and its worker processes, sampled every
50 ms, and the largest single process (``getrusage`` of the children). Also the
catalog's bytes per record.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from bench_store import envelope

from intentusnet import EventType
from intentusnet.hashing import compute_hash
from intentusnet.store import FileExecutionStore


def _envelope(n: int) -> dict[str, object]:
    """Envelope ``n``: bench_store's wire form, with one of seven intents."""
    wire = envelope({"text": f"request {n} " + "lorem ipsum " * 12}, n)
    wire["intent"] = {"name": f"intent-{n % 7}", "version": "1.0"}
    return wire


def _wall(command: list[str]) -> float:
    """Seconds ``command`` takes, its output discarded."""
    started = time.perf_counter()
    subprocess.run(command, stdout=subprocess.DEVNULL, check=True)
    return time.perf_counter() - started


def _write(root: str, start: int, count: int) -> None:
    """Record ``count`` executions as the router would (one process's share)."""
    with FileExecutionStore(root) as store:
        for n in range(start, start + count):
            wire = _envelope(n)
            env_hash = compute_hash(wire)
            writer = store.open(wire, envelope_hash=env_hash)
            writer.append(
                EventType.INTENT_RECEIVED,
                {"requestId": f"r{n}", "envelopeHash": env_hash},
            )
            writer.append(
                EventType.AGENT_ATTEMPT_START, {"agent": "echo", "attempt": 1}
            )
            writer.append(
                EventType.AGENT_ATTEMPT_END,
                {
                    "agent": "echo",
                    "attempt": 1,
                    "outcome": "success",
                    "output": {"n": n},
                },
            )
            writer.complete(
                {
                    "status": "success",
                    "payload": {"n": n},
                    "error": None,
                    "metadata": {"agent": "echo", "durationMs": 0.5},
                }
            )


def build(root: str, records: int) -> float:
    """Write ``records`` records in one process per CPU; return seconds taken."""
    processes = len(os.sched_getaffinity(0))
    share = -(-records // processes)
    started = time.perf_counter()
    context = multiprocessing.get_context("spawn")
    workers = [
        context.Process(
            target=_write, args=(root, p * share, min(share, records - p * share))
        )
        for p in range(processes)
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
        if worker.exitcode != 0:
            raise SystemExit(f"a writer failed with exit code {worker.exitcode}")
    return time.perf_counter() - started


def _tree_rss_kib(pid: int) -> int:
    """Resident memory of ``pid`` and all its descendants, in KiB."""
    total, todo = 0, [pid]
    while todo:
        current = todo.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            total += next(
                int(line.split()[1])
                for line in status.splitlines()
                if line.startswith("VmRSS:")
            )
            for task in os.listdir(f"/proc/{current}/task"):
                children = Path(f"/proc/{current}/task/{task}/children").read_text()
                todo += [int(child) for child in children.split()]
        except (OSError, StopIteration, ValueError):
            continue
    return total


def measure(command: list[str]) -> tuple[float, int, int, int]:
    """Run ``command`` piped.

    Returns seconds, bytes printed, and the peak RSS (KiB) of its process tree
    and of its largest process.
    """
    peak = 0
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, _tree_rss_kib(child.pid))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    out, err = child.communicate()
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    if child.returncode not in (0, 6):
        raise SystemExit(
            f"{command} failed ({child.returncode}): {err.decode()[-2000:]}"
        )
    largest = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return seconds, len(out), peak, largest


def main() -> None:
    """Build the store, time the whole-store commands, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--dir", default=None, help="where the store goes")
    parser.add_argument("--keep", action="store_true", help="keep the store")
    options = parser.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench-scale-", dir=options.dir)
    root = f"{tmp}/records"
    try:
        n = options.records
        seconds = build(root, n)
        print(f"built {n:,} records in {seconds:.1f} s ({n / seconds:,.0f} records/s)")
        for path in Path(root).glob("catalog.sqlite3*"):
            path.unlink()
        cli = [sys.executable, "-m", "intentusnet.cli", "--store", root]
        for name, args in (
            ("reindex", ["reindex"]),
            ("verify --all", ["verify", "--all"]),
        ):
            seconds, printed, tree, largest = measure([*cli, *args])
            print(
                f"{name:<13} {seconds:7.1f} s  {n / seconds:9,.0f} records/s  "
                f"peak RSS {tree / 1024:6.1f} MiB (all processes), "
                f"{largest / 1024:6.1f} MiB (largest)  printed {printed:,} bytes"
            )
        timing = (
            "import statistics, sys, time\n"
            "from intentusnet.store import FileExecutionStore\n"
            "store = FileExecutionStore(sys.argv[1])\n"
            "started = time.perf_counter(); store.stats()\n"
            "first = time.perf_counter() - started\n"
            "runs = []\n"
            "for _ in range(5):\n"
            "    started = time.perf_counter(); found = store.stats()\n"
            "    runs.append(time.perf_counter() - started)\n"
            "print(first * 1000, statistics.median(runs) * 1000, found.records)\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", timing, root],
            capture_output=True,
            text=True,
            check=True,
        )
        first, median, counted = done.stdout.split()
        print(
            f"stats()       first {float(first):.1f} ms, "
            f"then median {float(median):.1f} ms ({int(counted):,} records)"
        )
        command = {
            name: statistics.median(
                _wall([*cli, *args, "--help"] if name == "help" else [*cli, *args])
                for _ in range(5)
            )
            for name, args in (("help", ["stats"]), ("stats", ["stats"]))
        }
        print(
            f"stats command {command['stats'] * 1000:.1f} ms "
            f"(its --help {command['help'] * 1000:.1f} ms: the start-up floor)"
        )
        catalog = f"{root}/catalog.sqlite3"
        with sqlite3.connect(catalog) as db:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        size = sum(p.stat().st_size for p in Path(root).glob("catalog.sqlite3*"))
        print(f"catalog       {size / n:.0f} bytes/record")
    finally:
        if options.keep:
            print(f"kept {root}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
