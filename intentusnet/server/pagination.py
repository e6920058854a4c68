"""Cursor pagination over ``store.list()``: stable pages, newest first.

A cursor names the last record of the page it ends, by ``(createdUtc,
executionId)``, the store's own sort key, so a page never repeats or skips a
record when new records arrive meanwhile (they are newer, and sort before the
cursor). Cursors are opaque to clients: base64url of a small JSON object.

``ExecutionStore.list`` has no "older than" bound, so the next page is found by
asking for the newest ``offset + limit + 1`` records and keeping those past the
cursor; the window doubles in the rare case that records arrived meanwhile.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Final

import orjson

from .problems import invalid_request

if TYPE_CHECKING:
    from ..record.model import RecordSummary
    from ..store import ExecutionStore

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
        ):
            return cls(data["c"], data["i"], data["n"])
        message = (
            "not a cursor from this service; pass nextCursor from the previous "
            "page unchanged"
        )
        where = "query.cursor"
        raise invalid_request(
            [{"location": where, "message": message, "type": "cursor"}],
            [f"{where}: {message}"],
        )

    def precedes(self, summary: RecordSummary) -> bool:
        """Whether ``summary`` comes after this cursor (is older, newest first)."""
        return (summary.created_utc, summary.execution_id) < (
            self.created_utc,
            self.execution_id,
        )


def page(
    store: ExecutionStore,
    *,
    limit: int,
    cursor: Cursor | None = None,
    intent: str | None = None,
    status: str | None = None,
    since: datetime | None = None,
    keep: Callable[[RecordSummary], bool] | None = None,
) -> tuple[list[RecordSummary], Cursor | None]:
    """Return one page of summaries and the cursor of the next page, if any.

    ``keep`` filters further than the store can (the explorer's replayable,
    time-range and search filters); the window grows until a page is full.
    """
    offset = 0 if cursor is None else cursor.offset
    window = offset + limit + 1
    while True:
        rows = store.list(intent=intent, status=status, since=since, limit=window)
        after = [
            r
            for r in rows
            if (cursor is None or cursor.precedes(r)) and (keep is None or keep(r))
        ]
        if len(after) > limit or len(rows) < window:
            break
        window *= 2
    items = after[:limit]
    if len(after) <= limit or not items:
        return items, None
    last = items[-1]
    return items, Cursor(last.created_utc, last.execution_id, offset + len(items))
