"""What both drivers share: the payloads, the timers and the command line.

Standard library only: the peer's driver runs in the peer's virtualenv, which
has neither this project nor orjson.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable, Mapping

#: Rows each driver answers, by name (bench_peer.py names the same ones).
Row = Callable[[argparse.Namespace], Mapping[str, float | str]]


def payload_small() -> dict[str, object]:
    """The 2-byte payload's object: one short string."""
    return {"text": "hi"}


def payload_1kb() -> dict[str, object]:
    """A 1 KB payload shaped like an LLM request (as bench_routing.py's)."""
    payload: dict[str, object] = {
        "model": "small-model-1",
        "temperature": 0.7,
        "max_tokens": 256,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Summarise: " + "lorem ipsum " * 50},
        ],
        "tags": ["bench", "routing", "hash"],
    }
    tags = payload["tags"]
    assert isinstance(tags, list)
    while len(json.dumps(payload, separators=(",", ":"))) < 1024:
        tags.append("pad")
    return payload


def batch_us(
    fns: dict[str, Callable[[], object]], number: int, repeat: int
) -> dict[str, float]:
    """Per-call microseconds of each function: its fastest batch, batches taking turns.

    Each of ``repeat`` rounds times ``number`` calls of every function, one
    function after the other. The fastest batch is the one the rest of a busy
    machine disturbed least (other work only ever adds time); the pairing of
    processes in bench_peer.py then takes the median over rounds.
    """
    for fn in fns.values():
        for _ in range(min(number, 200)):  # warm caches and lazy imports
            fn()
    samples: dict[str, list[float]] = {label: [] for label in fns}
    for _ in range(repeat):
        for label, fn in fns.items():
            start = time.perf_counter()
            for _ in range(number):
                fn()
            samples[label].append((time.perf_counter() - start) / number * 1e6)
    return {label: min(times) for label, times in samples.items()}


def each_us(fn: Callable[[int], object], calls: int) -> float:
    """Median of ``calls`` individually timed calls ``fn(0)`` ... ``fn(calls - 1)``."""
    samples = []
    for i in range(calls):
        start = time.perf_counter_ns()
        fn(i)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def main(rows: dict[str, Row]) -> None:
    """Run the row named on the command line and print its result as JSON."""
    parser = argparse.ArgumentParser(description="One row of bench_peer.py.")
    parser.add_argument("row", choices=sorted(rows))
    parser.add_argument("--dir", help="the store's directory (recording rows)")
    parser.add_argument("--quick", action="store_true", help="few calls: a smoke run")
    args = parser.parse_args()
    print(json.dumps(rows[args.row](args)))
