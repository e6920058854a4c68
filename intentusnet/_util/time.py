"""Time as records keep it: UTC timestamps and durations in milliseconds."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Final

__all__ = [
    "micros_of",
    "ms_since",
    "parse_utc",
    "utc_now",
    "utc_text",
]

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_NAIVE_EPOCH: Final = datetime(1970, 1, 1)
_ONE_MICRO: Final = timedelta(microseconds=1)


def utc_text(micros: int) -> str:
    """Format epoch microseconds as ``2026-11-22T07:20:00.123456Z``."""
    moment = _NAIVE_EPOCH + timedelta(microseconds=micros)
    return moment.isoformat(timespec="microseconds") + "Z"


def utc_now() -> tuple[str, int]:
    """Return now as :func:`utc_text` and as epoch microseconds."""
    micros = time.time_ns() // 1000
    return utc_text(micros), micros


def micros_of(moment: datetime) -> int:
    """Epoch microseconds of ``moment``; a naive datetime is taken as UTC."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _ONE_MICRO


def parse_utc(text: str) -> int | None:
    """Epoch microseconds of an ISO 8601 string (naive = UTC), None if invalid."""
    try:
        return micros_of(datetime.fromisoformat(text))
    except (TypeError, ValueError):
        return None


def ms_since(start: float) -> float:
    """Milliseconds since the ``perf_counter()`` value ``start``, to the microsecond."""
    return round((time.perf_counter() - start) * 1000.0, 3)
