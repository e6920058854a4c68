"""Cursor pagination over ``store.list()``: stable pages, newest first.

A cursor names the last record of the page it ends, by ``(createdUtc,
executionId)``, the store's own sort key, so a page never repeats or skips a
record when new records arrive meanwhile (they are newer, and sort before the
cursor). Cursors are opaque to clients: base64url of a small JSON object.

The next page is asked of the store as records created up to the cursor's
microsecond (``until``), so a page costs the same however deep it is; records
of that same microsecond up to the cursor's id are skipped, the window growing
in the rare case that more of them share it.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

import orjson

from .problems import invalid_request

if TYPE_CHECKING:
    from ..record.model import RecordSummary
    from ..store import ExecutionStore
    from ..store.filters import ListFilters

__all__ = ["MAX_LIMIT", "Cursor", "page"]

#: The largest page a client may ask for.
MAX_LIMIT: Final = 1000


@dataclass(frozen=True, slots=True)
class Cursor:
    """Where a page ended: the last record's sort key and how many came before."""

    created_utc: str
    execution_id: str
    offset: int

    def encode(self) -> str:
        """Return the opaque text form."""
        raw = orjson.dumps(
            {"c": self.created_utc, "i": self.execution_id, "n": self.offset}
        )
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")

    @classmethod
    def decode(cls, text: str) -> Cursor:
        """Parse a cursor this service made.

        Raises:
            RequestInvalid: ``text`` is not such a cursor.
        """
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            data = orjson.loads(raw)
        except (binascii.Error, ValueError):
            data = None
        if (
            isinstance(data, dict)
            and isinstance(data.get("c"), str)
            and isinstance(data.get("i"), str)
            and type(data.get("n")) is int
            and data["n"] >= 0
            and _is_time(data["c"])
        ):
            return cls(data["c"], data["i"], data["n"])
        message = (
            "not a cursor from this service; pass nextCursor from the previous "
            "page unchanged"
        )
        raise invalid_request(
            [{"loc": ("query", "cursor"), "msg": message, "type": "cursor"}]
        )

    def moment(self) -> datetime:
        """When the cursor's record was created (checked by :meth:`decode`)."""
        return _aware(datetime.fromisoformat(self.created_utc))

    def precedes(self, summary: RecordSummary) -> bool:
        """Whether ``summary`` comes after this cursor (is older, newest first)."""
        return (summary.created_utc, summary.execution_id) < (
            self.created_utc,
            self.execution_id,
        )


def page(
    store: ExecutionStore, filters: ListFilters, cursor: Cursor | None = None
) -> tuple[list[RecordSummary], Cursor | None]:
    """Return one page of summaries and the cursor of the next page, if any.

    Every filter is the store's own (``store.list``); ``filters.limit`` is the
    page's size (required).
    """
    limit = filters.limit
    if limit is None:
        raise ValueError("a page needs filters.limit")
    offset = 0 if cursor is None else cursor.offset
    bound = filters.until
    if cursor is not None:
        # Just past the cursor's microsecond: its ties are skipped below.
        ended = cursor.moment() + timedelta(microseconds=1)
        bound = ended if bound is None or ended < _aware(bound) else bound
    window = limit + 1
    while True:
        rows = store.list(replace(filters, until=bound, limit=window))
        after = [r for r in rows if cursor is None or cursor.precedes(r)]
        if len(after) > limit or len(rows) < window:
            break
        window *= 2
    items = after[:limit]
    if len(after) <= limit or not items:
        return items, None
    last = items[-1]
    return items, Cursor(last.created_utc, last.execution_id, offset + len(items))


def _aware(moment: datetime) -> datetime:
    """A naive datetime read as UTC (as ``store.list`` reads it)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _is_time(text: str) -> bool:
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True
