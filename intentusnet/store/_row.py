"""A catalog row: one record as the store's catalog knows it.

Its own module, so that the record writer (and with it every store that writes)
builds rows without loading the catalog's queries and upkeep.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["CatalogRow"]


class CatalogRow(NamedTuple):
    """One record as the catalog knows it (columns in table order).

    ``status`` is ``in_progress`` for a record that was open when last seen;
    readers decide whether its owner is still there. ``lines`` counts the
    record's complete lines, header included, and ``chain_head`` is the hash of
    the last of them. ``usage`` is the LLM token usage its answer carries (the
    JSON text of ``store.usage.RecordedUsage``), or None.
    """

    id: str
    created_us: int
    created_utc: str
    intent: str
    intent_version: str
    envelope_hash: str
    status: str
    replayable: int
    reason: str | None
    agent: str | None
    duration_ms: float | None
    parent_id: str | None
    owner: str | None
    lines: int
    size: int
    chain_head: str
    usage: str | None = None
