"""Shared timing helper for the benchmark scripts: medians, never means."""

from __future__ import annotations

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


def side_by_side(
    fns: dict[str, Callable[[], object]], *, number: int = 2000, repeat: int = 15
) -> dict[str, float]:
    """``median_us`` of each function, their runs taking turns.

    Each repeat times every function once, one after the other, so that a busy
    moment of the machine slows them alike and their ratios hold.
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
