"""The transparency log (docs/log.md): appending leaves, checking inclusion proofs.

Run: python benchmarks/bench_log.py [--dir PATH] [--leaves 20000]

Measures, on the local disk (a temporary directory unless --dir is given), with
the log's default durability (every file and directory flushed):
  * leaves appended a second, in batches of 1, 16, 256 and 1,024 leaves (each
    batch: its tiles and bundles, then a signed checkpoint); the issue's
    target is at least 2,000 leaves a second;
  * the time to check one inclusion proof against a checkpoint
    (``LogCheckpoint.proves_inclusion``) in a log of --leaves leaves, and to
    make one from the tiles (``TileLog.prove_inclusion``); target: at most 1 ms
    to check.
Figures are medians of several runs, never means.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import per_call_median, row

from intentusnet import LogLeaf, SigningKey, TileLog

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


def main() -> None:
    """Print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dir", type=Path, help="where the logs go (default: a temp dir)"
    )
    parser.add_argument("--leaves", type=int, default=20_000)
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
    finally:
        shutil.rmtree(folder)


if __name__ == "__main__":
    main()
