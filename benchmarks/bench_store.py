"""Record store and replay: medians of the operations the issue sets targets for.

Run: python benchmarks/bench_store.py [--records 100000] [--dir PATH]

Measures, on the local disk (the store lives in a temporary directory unless
--dir is given):
  * recording one execution through the store API the router uses: open + 5
    events + complete, durability "flush" and "fsync";
  * load + verify + replay of a stored record;
  * find_by_hash (which loads and verifies the record it finds) and
    list(limit=20) on a store of --records records;
  * bytes on disk per record for a 1 KB payload.

"first load" loads records this process has not loaded before, one each;
"record loaded before" loads one record again and again (a popular cached
answer). Every load reads, verifies and parses the whole file, so the two
differ only by what the store and the operating system keep warm. The "floor"
row times only the steps no load can skip (read, hash every line, parse two
lines, hash the envelope's view), which bounds what any reader could reach on
the machine. Run it once with --dir on a tmpfs (/dev/shm) to see the cost of the
code without the disk.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _timing import per_call_median, row
from bench_routing import payload_1kb

from intentusnet import EventType, ListFilters
from intentusnet.hashing import compute_hash
from intentusnet.replay import ReplayEngine
from intentusnet.store import FileExecutionStore, MemoryExecutionStore


def envelope(payload: dict[str, object], n: int = 0) -> dict[str, object]:
    """A wire-form envelope as the router hands it to the store."""
    return {
        "version": "1.0",
        "intent": {"name": "echo", "version": "1.0"},
        "payload": payload,
        "context": {"caller": None, "tenant": None, "priority": 0, "tags": []},
        "metadata": {
            "requestId": f"req-{n:032x}",
            "traceId": None,
            "createdAt": "2026-11-22T07:20:00.000000Z",
            "source": None,
            "identityChain": [],
        },
        "routing": {
            "strategy": "DIRECT",
            "targetAgent": None,
            "fallbackAgents": [],
            "timeoutMs": None,
            "cache": "default",
        },
    }


#: The fingerprint the router stores for ``record_one``'s execution; ``main``
#: sets it from :func:`path_fingerprint`.
FINGERPRINT: str | None = None


def record_one(
    store: FileExecutionStore | MemoryExecutionStore,
    env: dict[str, object],
    env_hash: str,
) -> str:
    """What the router writes for one DIRECT execution of an echo agent."""
    payload = env["payload"]
    writer = store.open(env, envelope_hash=env_hash)  # type: ignore[arg-type]
    writer.append(
        EventType.INTENT_RECEIVED, {"requestId": "req-1", "envelopeHash": env_hash}
    )
    writer.append(
        EventType.ROUTER_DECISION,
        {"strategy": "DIRECT", "candidates": ["echo"], "skipped": {}, "reason": "x"},
    )
    writer.append(EventType.AGENT_ATTEMPT_START, {"agent": "echo", "attempt": 1})
    writer.append(
        EventType.AGENT_ATTEMPT_END,
        {
            "agent": "echo",
            "attempt": 1,
            "outcome": "success",
            "durationMs": 0.004,
            "output": payload,  # type: ignore[dict-item]
            "error": None,
            "traceback": None,
        },
    )
    writer.complete(
        {
            "status": "success",
            "payload": payload,  # type: ignore[dict-item]
            "error": None,
            "metadata": {
                "executionId": writer.execution_id,
                "agent": "echo",
                "strategy": "DIRECT",
                "durationMs": 0.05,
                "envelopeHash": env_hash,
                "fromReplay": False,
            },
        },
        fingerprint=FINGERPRINT,
    )
    return writer.execution_id


def path_fingerprint() -> str:
    """The fingerprint of ``record_one``'s execution, read from a record without one.

    Public API only, so the script also runs against older checkouts.
    """
    store = MemoryExecutionStore()
    env = envelope({})
    execution_id = record_one(store, env, compute_hash(env))  # type: ignore[arg-type]
    return store.load(execution_id).fingerprint


def bench_recording(base: Path) -> None:
    print("recording: open + 5 events + complete (what the router writes)")
    small = envelope({"text": "hello"})
    big = envelope(payload_1kb())
    for durability, calls in (("flush", 3000), ("fsync", 300)):
        store = FileExecutionStore(base / f"rec-{durability}", durability=durability)
        for label, env in (("small payload", small), ("1 KB payload", big)):
            env_hash = compute_hash(env)  # type: ignore[arg-type]
            record_one(store, env, env_hash)  # create dirs and catalog
            us = per_call_median(
                lambda _i, s=store, e=env, h=env_hash: record_one(s, e, h), calls
            )
            note = "budget: 120 us with routing" if durability == "flush" else ""
            row(f"durability {durability}, {label}", us, note=note)
        store.close()


def bench_replay(base: Path) -> None:
    print("load + verify + replay of one stored record")
    store = FileExecutionStore(base / "replay")
    for label, env in (
        ("small payload", envelope({"text": "hello"})),
        ("1 KB payload", envelope(payload_1kb())),
    ):
        env_hash = compute_hash(env)  # type: ignore[arg-type]
        execution_id = record_one(store, env, env_hash)
        # Records this process has not loaded yet, one per "first load" call.
        fresh = [record_one(store, env, env_hash) for _ in range(5000)]

        def replay(_i: int, execution_id: str = execution_id) -> object:
            return ReplayEngine(store.load(execution_id)).replay()

        def first_replay(i: int, fresh: list[str] = fresh) -> object:
            return ReplayEngine(store.load(fresh[i])).replay()

        per_call_median(replay, 500)  # warm up
        row(
            f"{label}, record loaded before",
            per_call_median(replay, 5000),
            note="target <= 25 us",
        )
        row(f"{label}, first load", per_call_median(first_replay, len(fresh)))
        path = store._path(execution_id)
        row(
            f"{label}, floor: the unavoidable steps alone",
            per_call_median(lambda _i, path=path: floor_load(path), 5000),
        )
    store.close()


def floor_load(path: str) -> str:
    """What any first load must do, and nothing else: read the file, hash and
    compare every line, parse the header and the final line, hash the view.

    No checks of fields, no record objects, no replay result: the floor under
    the "first load" row on this machine, not a way to read records.
    """
    fd = os.open(path, os.O_RDONLY)
    data = os.pread(fd, 65536, 0)
    os.close(fd)
    lines = data.split(b"\n")
    lines.pop()
    for line in lines:  # each ends ,"hash":"sha256:<64 hex>"} (82 bytes)
        if hashlib.sha256(line[:-82]).hexdigest().encode() != line[-66:-2]:
            raise AssertionError("the benchmark wrote a sound record")
    header, final = orjson.loads(lines[0]), orjson.loads(lines[-1])
    wire = header["envelope"]
    view = {
        "version": wire["version"],
        "intent": wire["intent"],
        "payload": wire["payload"],
        "tenant": wire["context"]["tenant"],
        "routing": {
            "strategy": wire["routing"]["strategy"],
            "targetAgent": wire["routing"]["targetAgent"],
            "fallbackAgents": wire["routing"]["fallbackAgents"],
        },
    }
    digest = hashlib.sha256(orjson.dumps(view, option=orjson.OPT_SORT_KEYS))
    assert final["data"]["response"] is not None
    return "sha256:" + digest.hexdigest()


def build(store: FileExecutionStore, count: int) -> list[str]:
    hashes = []
    started = time.perf_counter()
    for n in range(count):
        env = envelope({"text": f"request {n}", "n": n}, n)
        env_hash = compute_hash(env)  # type: ignore[arg-type]
        record_one(store, env, env_hash)
        hashes.append(env_hash)
    took = time.perf_counter() - started
    row(f"built {count} records through the store API", took, "s")
    return hashes


def bench_large(base: Path, count: int) -> None:
    print(f"a store of {count} records")
    store = FileExecutionStore(base / "large")
    hashes = build(store, count)
    picks = random.Random(7).choices(hashes, k=3000)
    per_call_median(lambda i: store.find_by_hash(picks[i]), 300)  # warm up
    row(
        "find_by_hash (query + load + verify)",
        per_call_median(lambda i: store.find_by_hash(picks[i]), 3000),
        note="target <= 100 us",
    )
    row(
        "find_by_hash, no match",
        per_call_median(lambda i: store.find_by_hash(f"sha256:{i:064x}"), 3000),
    )
    row(
        "list(limit=20)",
        per_call_median(lambda _i: store.list(ListFilters(limit=20)), 2000),
    )
    row(
        "list(intent='echo', status='completed', limit=20)",
        per_call_median(
            lambda _i: store.list(
                ListFilters(intent="echo", status="completed", limit=20)
            ),
            2000,
        ),
    )
    started = time.perf_counter()
    os.remove(store.root / "catalog.sqlite3")
    store.close()
    store = FileExecutionStore(base / "large")
    indexed = store.reindex()
    row(f"reindex() of {indexed} records", time.perf_counter() - started, "s")
    store.close()


def bench_size(base: Path) -> None:
    print("bytes on disk per record, 1 KB payload")
    store = FileExecutionStore(base / "size")
    env = envelope(payload_1kb())
    env_hash = compute_hash(env)  # type: ignore[arg-type]
    ids = [record_one(store, env, env_hash) for _ in range(1000)]
    sizes = [os.stat(store._path(i)) for i in ids]
    row("record file, bytes", statistics.median(s.st_size for s in sizes), "B")
    row(
        "record file, allocated blocks",
        statistics.median(s.st_blocks * 512 for s in sizes),
        "B",
    )
    store.close()  # checkpoints the WAL into the catalog file
    catalog = os.stat(store.root / "catalog.sqlite3").st_size
    row("catalog, bytes per record", catalog / len(ids), "B")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--dir", type=Path, default=None)
    args = parser.parse_args()
    global FINGERPRINT
    FINGERPRINT = path_fingerprint()
    base = Path(tempfile.mkdtemp(prefix="bench-store-", dir=args.dir))
    try:
        bench_recording(base)
        bench_replay(base)
        bench_size(base)
        bench_large(base, args.records)
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
