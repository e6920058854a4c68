"""``ListFilters``: what ``store.list()`` selects, checked where it is made.

Every store answers the same filters (the file store from its SQLite catalog,
PostgreSQL with one query, the memory store in memory); the CLI, the HTTP
service and the explorer build the same value, so a bad filter is refused with
the same message wherever it comes from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from .._util.ids import ID_PART_PATTERN
from .._util.time import micros_of
from ..hashing import HASH_PATTERN
from ..record.model import status_filter

__all__ = ["ListFilters", "check_envelope_hash", "check_id_prefix"]

_ID_PART: Final = re.compile(ID_PART_PATTERN)
_HASH: Final = re.compile(HASH_PATTERN)


def check_id_prefix(text: str) -> str:
    """Return ``text`` if an execution id can start with it.

    Raises:
        ValueError: ``text`` is empty, too long, or holds a character no
            execution id holds.
    """
    if _ID_PART.fullmatch(text) is None:
        raise ValueError(
            f"{text[:40]!r} cannot start an execution id: use 1-128 "
            "characters of A-Z a-z 0-9 _ . -"
        )
    return text


def check_envelope_hash(text: str) -> str:
    """Return ``text`` if it is a whole envelope hash, as records hold it.

    Raises:
        ValueError: not ``sha256:`` and 64 lowercase hex digits.
    """
    if _HASH.fullmatch(text) is None:
        raise ValueError(
            f"{text[:80]!r} is not an envelope hash: sha256: and 64 lowercase "
            "hex digits, whole"
        )
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class ListFilters:
    """The records ``store.list()`` returns: those matching every filter given.

    Added in 0.1.0. ``ListFilters()`` selects every record.

    Attributes:
        intent: only records of this intent name.
        status: only records in this state (a ``RecordStatus``, or its value).
        since: only records created at or after this moment (naive = UTC).
        until: only records created before this moment (naive = UTC).
        replayable: only records that are (True) or are not (False) replayable.
        id_prefix: only records whose execution id starts with this.
        envelope_hash: only records of this envelope hash (a whole one).
        limit: at most this many, newest first.

    Raises:
        ValueError: an unknown status, a negative limit, an id prefix with a
            character no execution id holds, or a partial envelope hash.
    """

    intent: str | None = None
    status: str | None = None
    since: datetime | None = None
    until: datetime | None = None
    replayable: bool | None = None
    id_prefix: str | None = None
    envelope_hash: str | None = None
    limit: int | None = None

    def __post_init__(self) -> None:
        status_filter(self.status)
        if self.limit is not None and self.limit < 0:
            raise ValueError(f"limit must be >= 0, not {self.limit}")
        if self.id_prefix is not None:
            check_id_prefix(self.id_prefix)
        if self.envelope_hash is not None:
            check_envelope_hash(self.envelope_hash)

    @property
    def since_us(self) -> int | None:
        """``since`` as epoch microseconds."""
        return None if self.since is None else micros_of(self.since)

    @property
    def until_us(self) -> int | None:
        """``until`` as epoch microseconds."""
        return None if self.until is None else micros_of(self.until)

    @property
    def record_only(self) -> bool:
        """Whether a filter is set that only records have (not cache hits).

        The hit journal is asked by intent, since and limit alone.
        """
        return any(
            value is not None
            for value in (
                self.status,
                self.until,
                self.replayable,
                self.id_prefix,
                self.envelope_hash,
            )
        )

    def fixed_match(
        self, execution_id: str, intent: str, created_us: int, envelope_hash: str
    ) -> bool:
        """Whether a record passes the filters on what never changes in it.

        Status and replayability change as a record completes or is
        invalidated; each store checks them on the record's current state.
        """
        since_us, until_us = self.since_us, self.until_us
        return (
            (self.intent is None or intent == self.intent)
            and (since_us is None or created_us >= since_us)
            and (until_us is None or created_us < until_us)
            and (self.id_prefix is None or execution_id.startswith(self.id_prefix))
            and (self.envelope_hash is None or envelope_hash == self.envelope_hash)
        )

    def state_match(self, status: str, replayable: bool) -> bool:
        """Whether a record in this state passes the status and replayable filters."""
        return (self.status is None or status == self.status) and (
            self.replayable is None or replayable is self.replayable
        )
