"""The records list's search by value: ``payload.PATH=VALUE`` within one intent.

No index holds payload or metadata values, so this search reads records: the
records of one intent that the other filters select, newest first, each loaded
with the one reader (``store.load``), at most :data:`SCAN_LIMIT` per page. The
page says how many it read and offers the next, older stretch.

``PATH`` is a dotted path into the envelope as recorded, starting at
``payload``, ``metadata`` or ``context`` (``payload.customer.email``,
``payload.items.0.sku``, ``context.tags``); a number indexes a list. A text
value matches the text after ``=`` exactly; any other value matches its JSON
form (``3``, ``true``, ``null``); a list matches when one of its items does.
A redacted value is recorded as its marker, and only the marker matches.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Final, NamedTuple

import orjson

from ...errors import RecordIntegrityError, RecordNotFound, RequestInvalid
from ..pagination import Cursor, page

if TYPE_CHECKING:
    from ..._util.jsonvalue import JSONValue
    from ...record.model import ExecutionRecord, RecordSummary
    from ...store import ExecutionStore
    from ...store.filters import ListFilters

__all__ = ["SCAN_LIMIT", "Scan", "ValueQuery", "scan", "value_query"]

#: The most records one page of a search by value reads.
SCAN_LIMIT: Final = 2000
_ROOTS: Final = ("payload", "metadata", "context")


class ValueQuery(NamedTuple):
    """A parsed ``PATH=VALUE``: the path's parts and the text to match."""

    path: tuple[str, ...]
    value: str

    @property
    def text(self) -> str:
        """The query as typed (normalised)."""
        return ".".join(self.path) + "=" + self.value


class Scan(NamedTuple):
    """One page of a search by value: what matched, how much was read.

    ``records`` holds the matching records, loaded, by id.
    """

    matches: list[RecordSummary]
    records: dict[str, ExecutionRecord]
    scanned: int
    next_cursor: Cursor | None


def value_query(text: str) -> ValueQuery | None:
    """The search box's text as a value query, or None if it holds no ``=``.

    No execution id or hash holds ``=``, so text with one is a value query.

    Raises:
        RequestInvalid: its path is empty, malformed, or not below payload,
            metadata or context.
    """
    name, equals, value = text.partition("=")
    if not equals:
        return None
    root = name.split(".", 1)[0]
    if root not in _ROOTS:
        raise RequestInvalid(
            f"{name!r}: a search by value names a path below payload, metadata "
            "or context, e.g. payload.customer.email=a@example.com"
        )
    path = tuple(name.split("."))
    if len(path) < 2 or not all(path):
        raise RequestInvalid(
            f"{name!r}: a search by value needs a path below {root}, "
            f"e.g. {root}.customer.email=a@example.com"
        )
    return ValueQuery(path, value)


def _at(value: JSONValue, path: tuple[str, ...]) -> list[JSONValue]:
    """The value at ``path`` as a list of one, or an empty list if none is there."""
    for part in path:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return []
    return [value]


def _matches(found: JSONValue, text: str) -> bool:
    if isinstance(found, list):
        return any(_matches(item, text) for item in found)
    if isinstance(found, str):
        return found == text
    return orjson.dumps(found).decode() == text


def _matching(
    store: ExecutionStore, summary: RecordSummary, query: ValueQuery
) -> ExecutionRecord | None:
    """The record of ``summary`` if its envelope holds the value, else None."""
    try:
        record = store.load(summary.execution_id)
    except (RecordNotFound, RecordIntegrityError):
        return None  # gone meanwhile, or damaged: nothing to read
    root, *rest = query.path
    found = _at(record.envelope.get(root), tuple(rest))
    return record if found and _matches(found[0], query.value) else None


def scan(
    store: ExecutionStore,
    filters: ListFilters,
    cursor: Cursor | None,
    query: ValueQuery,
    wanted: int,
) -> Scan:
    """Read records ``filters`` selects, newest first, after ``cursor``.

    Stops at ``wanted`` matches or after :data:`SCAN_LIMIT` records; the next
    cursor continues after the last record read.

    Raises:
        RequestInvalid: ``filters`` names no intent.
    """
    if filters.intent is None:
        raise RequestInvalid(
            "a search by value reads records one by one: choose the intent to "
            "search in (e.g. intent=summarize)"
        )
    read, following = page(store, replace(filters, limit=SCAN_LIMIT), cursor)
    matches: list[RecordSummary] = []
    records: dict[str, ExecutionRecord] = {}
    scanned = 0
    for summary in read:
        scanned += 1
        record = _matching(store, summary, query)
        if record is not None:
            matches.append(summary)
            records[summary.execution_id] = record
            if len(matches) == wanted:
                break
    if scanned < len(read):
        last = read[scanned - 1]
        offset = (0 if cursor is None else cursor.offset) + scanned
        following = Cursor(last.created_utc, last.execution_id, offset)
    return Scan(matches, records, scanned, following)
