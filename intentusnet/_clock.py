"""Durations as responses and records carry them: milliseconds, 3 decimals."""

from __future__ import annotations

from time import perf_counter


def ms_since(start: float) -> float:
    """Milliseconds since the ``perf_counter()`` value ``start``, to the microsecond."""
    # round(x, 3) formats through decimal digits; rounding whole microseconds is
    # the same value for a fraction of the cost.
    return round((perf_counter() - start) * 1_000_000.0) / 1000
