"""Time as records keep it: UTC timestamps and durations in milliseconds."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Final

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_MICRO: Final = timedelta(microseconds=1)
#: Formatted seconds, a few: a record's own time and its envelope's (made
#: earlier, or replayed) often fall in different seconds.
_seconds: dict[int, str] = {}
_SECONDS_KEPT: Final = 16


def utc_text(micros: int) -> str:
    """Format epoch microseconds as ``2026-11-22T07:20:00.123456Z``."""
    seconds, fraction = divmod(micros, 1_000_000)
    text = _seconds.get(seconds)
    if text is None:  # formatting a date costs; once a second will do
        if len(_seconds) >= _SECONDS_KEPT:
            _seconds.clear()
        text = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds))
        _seconds[seconds] = text
    return f"{text}.{fraction:06d}Z"


def utc_now() -> tuple[str, int]:
    """Return now as :func:`utc_text` and as epoch microseconds."""
    micros = time.time_ns() // 1000
    return utc_text(micros), micros


def wire_utc(moment: datetime) -> str:
    """Format an aware datetime as pydantic writes it: ``...T07:20:00.123456Z``.

    The fraction is left out when it is zero, and an offset other than UTC's is
    kept (``+02:00``), as ``isoformat`` gives them.
    """
    if moment.tzinfo is UTC:
        micros = (moment - _EPOCH) // _ONE_MICRO
        # Half the cost of isoformat(), through utc_text's cache; strftime pads
        # no year before 1000, so earlier ones go the long way.
        if micros >= 0:
            text = utc_text(micros)
            return text if micros % 1_000_000 else text[:-8] + "Z"
    text = moment.isoformat()
    return text[:-6] + "Z" if text[-6:] == "+00:00" else text


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
