"""What both drivers share: the payloads, the timers and the command line.

Standard library only: the peer's driver runs in the peer's virtualenv, which
has neither this project nor orjson. The timers and the 1 KB payload are the
other benchmarks' (``benchmarks/_timing.py``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # benchmarks/

from _timing import payload_1kb, turns
from _timing import per_call_median as each_us

__all__ = ["Row", "batch_us", "each_us", "main", "payload_1kb", "payload_small"]

#: Rows each driver answers, by name (bench_peer.py names the same ones).
Row = Callable[[argparse.Namespace], Mapping[str, float | str]]


def payload_small() -> dict[str, object]:
    """The 2-byte payload's object: one short string."""
    return {"text": "hi"}


def batch_us(
    fns: dict[str, Callable[[], object]], number: int, repeat: int
) -> dict[str, float]:
    """Per-call microseconds of each function: its fastest batch, batches taking turns.

    Each of ``repeat`` rounds times ``number`` calls of every function, one
    function after the other. The fastest batch is the one the rest of a busy
    machine disturbed least (other work only ever adds time); the pairing of
    processes in bench_peer.py then takes the median over rounds.
    """
    samples = turns(fns, number=number, repeat=repeat)
    return {label: min(times) for label, times in samples.items()}


def main(rows: dict[str, Row]) -> None:
    """Run the row named on the command line and print its result as JSON."""
    parser = argparse.ArgumentParser(description="One row of bench_peer.py.")
    parser.add_argument("row", choices=sorted(rows))
    parser.add_argument("--dir", help="the store's directory (recording rows)")
    parser.add_argument("--quick", action="store_true", help="few calls: a smoke run")
    args = parser.parse_args()
    print(json.dumps(rows[args.row](args)))
