"""The filters of ``store.list()``, checked once for every store.

Each store turns them into its own indexed query (the file store's SQLite
catalog, PostgreSQL) or applies them in memory; :func:`list_filters` checks
the arguments so that every store refuses the same bad ones with the same
message.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from .._util.ids import ID_PART_PATTERN
from .._util.time import micros_of
from ..record.model import RecordStatus, status_filter

_ID_PART: Final = re.compile(ID_PART_PATTERN)


@dataclass(frozen=True, slots=True)
class ListFilters:
    """The filters of one listing, checked; times as epoch microseconds."""

    intent: str | None = None
    status: RecordStatus | None = None
    since_us: int | None = None
    until_us: int | None = None
    replayable: bool | None = None
    id_prefix: str | None = None
    envelope_hash: str | None = None
    limit: int | None = None

    def fixed_match(
        self, execution_id: str, intent: str, created_us: int, envelope_hash: str
    ) -> bool:
        """Whether a record passes the filters on what never changes in it.

        Status and replayability change as a record completes or is
        invalidated; each store checks them on the record's current state.
        """
        return (
            (self.intent is None or intent == self.intent)
            and (self.since_us is None or created_us >= self.since_us)
            and (self.until_us is None or created_us < self.until_us)
            and (self.id_prefix is None or execution_id.startswith(self.id_prefix))
            and (self.envelope_hash is None or envelope_hash == self.envelope_hash)
        )

    def state_match(self, status: RecordStatus, replayable: bool) -> bool:
        """Whether a record in this state passes the status and replayable filters."""
        return (self.status is None or status is self.status) and (
            self.replayable is None or replayable is self.replayable
        )


def list_filters(
    *,
    intent: str | None = None,
    status: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    replayable: bool | None = None,
    id_prefix: str | None = None,
    envelope_hash: str | None = None,
    limit: int | None = None,
) -> ListFilters:
    """Check ``store.list()``'s arguments (naive datetimes are UTC).

    Raises:
        ValueError: an unknown status, a negative limit, or an id prefix with a
            character no execution id holds.
    """
    if limit is not None and limit < 0:
        raise ValueError(f"limit must be >= 0, not {limit}")
    if id_prefix is not None and _ID_PART.fullmatch(id_prefix) is None:
        raise ValueError(
            f"id_prefix {id_prefix[:40]!r} cannot start an execution id: use 1-128 "
            "characters of A-Z a-z 0-9 _ . -"
        )
    return ListFilters(
        intent=intent,
        status=status_filter(status),
        since_us=None if since is None else micros_of(since),
        until_us=None if until is None else micros_of(until),
        replayable=replayable,
        id_prefix=id_prefix,
        envelope_hash=envelope_hash,
        limit=limit,
    )
