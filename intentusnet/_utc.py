"""UTC timestamps as records write them: ISO 8601 with microseconds and ``Z``."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Final

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICRO: Final = timedelta(microseconds=1)
_second_cache: tuple[int, str] = (-1, "")


def utc_text(micros: int) -> str:
    """Format epoch microseconds as ``2026-11-22T07:20:00.123456Z``."""
    global _second_cache
    seconds, fraction = divmod(micros, 1_000_000)
    cached_second, text = _second_cache
    if cached_second != seconds:  # formatting a date costs; once a second will do
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _second_cache = (seconds, text)
    return f"{text}.{fraction:06d}Z"


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
