"""Shared helpers of the benchmark scripts: timers (medians, never means), payloads.

Standard library only: bench_peer.py's driver of IntentusNet 1.3.0 imports it in
that package's virtualenv, which has neither this project nor orjson.
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable


def median_us(
    fn: Callable[[], object], *, number: int = 2000, repeat: int = 15
) -> float:
    """Median over ``repeat`` runs of the per-call time of ``fn``, in microseconds."""
    for _ in range(min(number, 200)):  # warm caches and lazy imports
        fn()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        samples.append((time.perf_counter() - start) / number * 1e6)
    return statistics.median(samples)


def turns(
    fns: dict[str, Callable[[], object]], *, number: int = 2000, repeat: int = 15
) -> dict[str, list[float]]:
    """Per-call microseconds of each function in each of ``repeat`` batches.

    Each repeat times ``number`` calls of every function, one after the other,
    so that a busy moment of the machine slows them alike and their ratios hold.
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
    return samples


def side_by_side(
    fns: dict[str, Callable[[], object]], *, number: int = 2000, repeat: int = 15
) -> dict[str, float]:
    """The median of each function's batches, the batches taking turns (``turns``)."""
    samples = turns(fns, number=number, repeat=repeat)
    return {label: statistics.median(times) for label, times in samples.items()}


def per_call_median(fn: Callable[[int], object], calls: int) -> float:
    """Median of individually timed calls, in microseconds."""
    samples = []
    for i in range(calls):
        start = time.perf_counter_ns()
        fn(i)
        samples.append(time.perf_counter_ns() - start)
    return statistics.median(samples) / 1000


def row(label: str, value: float, unit: str = "us", note: str = "") -> None:
    """Print one result line."""
    print(f"  {label:<58} {value:>10.2f} {unit}  {note}")


def payload_1kb() -> dict[str, object]:
    """A 1 KB payload shaped like an LLM request: strings, ints, a float, a list."""
    tags = ["bench", "routing", "hash"]
    payload: dict[str, object] = {
        "model": "small-model-1",
        "temperature": 0.7,
        "max_tokens": 256,
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Summarise: " + "lorem ipsum " * 50},
        ],
        "tags": tags,
    }
    while len(json.dumps(payload, separators=(",", ":"))) < 1024:
        tags.append("pad")
    return payload
