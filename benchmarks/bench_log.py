"""The transparency log (docs/log.md): appending leaves, checking inclusion proofs.

Run: python benchmarks/bench_log.py [--dir PATH] [--leaves 20000] [--postgres]

Measures, on the local disk (a temporary directory unless --dir is given), with
the log's default durability (every file and directory flushed):
  * leaves appended a second, in batches of 1, 16, 256 and 1,024 leaves (each
    batch: its tiles and bundles, then a signed checkpoint); the issue's
    target is at least 2,000 leaves a second;
  * the time to check one inclusion proof against a checkpoint
    (``LogCheckpoint.proves_inclusion``) in a log of --leaves leaves, and to
    make one from the tiles (``TileLog.prove_inclusion``); target: at most 1 ms
    to check;
  * a signed FileExecutionStore with the log at its default cadence: the time
    from a record's close to a published checkpoint holding its leaf, for
    single closes spaced out and for each close of a burst (target: at most
    1.2 s);
  * ``log verify``'s audit of a log of --audit-leaves leaves (its checkpoint,
    every tile and bundle, every leaf parsed), in leaves a second (target: at
    least 50,000), and of a store's records against the leaves, in records a
    second;
  * with --postgres, appending to the log as rows of a PostgreSQL store (a
    throwaway server started as the tests start one, durable: fsync on, over
    its Unix socket), in batches of 1, 16 and 256: each batch one transaction
    under the log's advisory lock.
Figures are medians of several runs, never means.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import per_call_median, row

from intentusnet import FileExecutionStore, LogLeaf, SigningKey, TileLog
from intentusnet.store.file.translog import record_states, store_log
from intentusnet.tlog.audit import audit_log

ENVELOPE = {"intent": {"name": "echo", "version": "1.0"}, "payload": {"text": "hi"}}
ANSWER = {"status": "success", "payload": {"text": "hi"}, "metadata": {}}

ORIGIN = "bench.example/log"


def leaves(first: int, count: int, key_id: str) -> list[bytes]:
    """Leaves as closed records make them."""
    return [
        LogLeaf(f"exec-{i:012d}", "sha256:" + f"{i:064x}", key_id).to_bytes()
        for i in range(first, first + count)
    ]


def append_rate(folder: Path, key: SigningKey, batch: int, total: int) -> float:
    """Median leaves per second over runs of appending ``total`` leaves in batches."""
    rates = []
    for run in range(5):
        path = folder / f"append-{batch}-{run}"
        log = TileLog(path, origin=ORIGIN, signing_key=key)
        data = leaves(0, total, key.key_id)
        start = time.perf_counter()
        for at in range(0, total, batch):
            log.append(data[at : at + batch])
        rates.append(total / (time.perf_counter() - start))
        shutil.rmtree(path)
    return statistics.median(rates)


def close_one(store: FileExecutionStore) -> str:
    """Open and complete one record, as the router does in short; its id."""
    writer = store.open(ENVELOPE, envelope_hash="sha256:" + "0" * 64)
    writer.complete(ANSWER)
    return writer.execution_id


def publish_latency(folder: Path, key: SigningKey) -> tuple[list[float], list[float]]:
    """Seconds from close to published, for 15 spaced closes and a burst of 2,000."""
    root = folder / "latency"
    store = FileExecutionStore(root, signing_key=key)
    log = store_log(root, key.key_id)
    close_one(store)  # the sequencer's start (and its first scan) out of the way
    store.close()
    singles = []
    for _ in range(15):
        time.sleep(0.3)
        size = log.size + 1
        start = time.perf_counter()
        close_one(store)
        while log.size < size:
            time.sleep(0.001)
        singles.append(time.perf_counter() - start)
    seen: list[tuple[int, float]] = []  # (size, when first seen)
    done = threading.Event()

    def watch() -> None:
        last = log.size
        while not done.is_set():
            size = log.size
            if size != last:
                seen.append((size, time.perf_counter()))
                last = size
            time.sleep(0.001)

    watcher = threading.Thread(target=watch)
    base = log.size
    watcher.start()
    closed = []
    for _ in range(2_000):
        close_one(store)
        closed.append(time.perf_counter())
    while not seen or seen[-1][0] < base + 2_000:
        time.sleep(0.01)
    done.set()
    watcher.join()
    burst = [
        next(when for size, when in seen if size >= base + n + 1) - closed[n]
        for n in range(2_000)
    ]
    store.close()
    shutil.rmtree(root)
    return singles, burst


def audit_rate(folder: Path, key: SigningKey, count: int) -> tuple[float, float]:
    """Leaves a second auditing a log of ``count``; records a second walking 1,000."""
    log = TileLog(folder / "audit", origin=f"intentusnet/{key.key_id}", signing_key=key)
    data = leaves(0, count, key.key_id)
    for at in range(0, count, 8192):
        log.append(data[at : at + 8192])
    rates = []
    for _ in range(3):
        start = time.perf_counter()
        assert not audit_log(log, key.public_key).findings
        rates.append(count / (time.perf_counter() - start))
    root = folder / "walk"
    store = FileExecutionStore(root, signing_key=key)
    for _ in range(1_000):
        close_one(store)
    store.close()
    walks = []
    for _ in range(3):
        start = time.perf_counter()
        states = record_states(str(root), key.public_key)
        log = store_log(root, key.key_id)
        assert not audit_log(log, key.public_key, records=states).findings
        walks.append(1_000 / (time.perf_counter() - start))
    return statistics.median(rates), statistics.median(walks)


def postgres_rates(key: SigningKey) -> None:
    """Append rates of a log kept as rows of a throwaway PostgreSQL server."""
    sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
    from pgkit import postgres_server

    from intentusnet.store.postgres.connection import Connection
    from intentusnet.store.postgres.translog import PostgresTileLog

    with postgres_server(durable=True) as server:
        print("appending to a log in PostgreSQL (durable, Unix socket):")
        for batch, total in [(1, 300), (16, 2_000), (256, 10_240)]:
            rates = []
            for run in range(5):
                db = Connection(server.socket_dsn(), "fsync", 1)
                log = PostgresTileLog(db, f"{ORIGIN}/{batch}/{run}", key)
                data = leaves(0, total, key.key_id)
                start = time.perf_counter()
                for at in range(0, total, batch):
                    log.append(data[at : at + batch])
                rates.append(total / (time.perf_counter() - start))
                db.close()
            row(f"batches of {batch:,} leaves", statistics.median(rates), "leaves/s")


def main() -> None:
    """Print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, help="where the logs go (default: a temp dir)"
    )
    parser.add_argument("--leaves", type=int, default=20_000)
    parser.add_argument("--audit-leaves", type=int, default=200_000)
    parser.add_argument(
        "--postgres", action="store_true", help="also append to a PostgreSQL log"
    )
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(dir=args.dir))
    key = SigningKey.generate()
    try:
        print(f"appending, durable (in {folder}):")
        for batch, total in [(1, 300), (16, 2_000), (256, 10_240), (1024, 20_480)]:
            rate = append_rate(folder, key, batch, total)
            row(f"batches of {batch:,} leaves", rate, "leaves/s", "target >= 2,000")

        log = TileLog(folder / "proofs", origin=ORIGIN, signing_key=key)
        data = leaves(0, args.leaves, key.key_id)
        for at in range(0, len(data), 4096):
            log.append(data[at : at + 4096])
        head = log.tree_head(key.public_key)
        size = head.size
        proofs = [log.prove_inclusion(i * 7919 % size) for i in range(1000)]
        print(f"inclusion proofs, a log of {size:,} leaves:")

        def check(i: int) -> None:
            index = i * 7919 % size
            assert head.proves_inclusion(data[index], index, proofs[i])

        row(
            "check one (LogCheckpoint.proves_inclusion)",
            per_call_median(check, 1000),
            "us",
            "target <= 1,000 us",
        )
        row(
            "make one from the tiles (TileLog.prove_inclusion)",
            per_call_median(lambda i: log.prove_inclusion(i * 7919 % size), 300),
            "us",
        )
        print("a signed store's log, default cadence (0.5 s or 256 leaves):")
        singles, burst = publish_latency(folder, key)
        row(
            "close -> published, single closes (median)",
            statistics.median(singles),
            "s ",
            f"max {max(singles):.3f} s; target <= 1.2 s",
        )
        row(
            "close -> published, a burst of 2,000 (median)",
            statistics.median(burst),
            "s ",
            f"max {max(burst):.3f} s",
        )
        print("log verify:")
        leaf_rate, record_rate = audit_rate(folder, key, args.audit_leaves)
        row(
            f"audit a log of {args.audit_leaves:,} leaves",
            leaf_rate,
            "leaves/s",
            "target >= 50,000",
        )
        row("walk a store's records against the leaves", record_rate, "records/s")
        if args.postgres:
            postgres_rates(key)
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
