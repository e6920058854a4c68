"""The PostgreSQL store's cache-hit journal: one row per hit, its sealed line kept.

:class:`PostgresHitJournal` is the :class:`CacheHitJournal` half of
``PostgresExecutionStore``, over the ``intentusnet_cache_hits`` table; lines are
those of the file store's journal (``store/hits.py``), read by the same parser.
"""

from __future__ import annotations

from datetime import datetime

from ..._util.time import micros_of, parse_utc
from ..hits import CacheHit, Hit, hit_line, parse_hits
from .connection import Connection


class PostgresHitJournal:
    """Cache hits in ``intentusnet_cache_hits``; the store supplies ``_db``."""

    _db: Connection

    def record_cache_hit(self, hit: Hit) -> str:
        """Note that a cached answer was served (one row, no record); its id."""
        line, hit_id, created = hit_line(hit)
        self._db.run(
            "INSERT INTO intentusnet_cache_hits (hit_id, created_us, intent, line) "
            "VALUES (%s, %s, %s, %s)",
            [hit_id, parse_utc(created) or 0, hit.intent_name, line],
        )
        return hit_id

    def cache_hits(
        self,
        *,
        intent: str | None = None,
        since: datetime | None = None,
        limit: int | None = None,
    ) -> list[CacheHit]:
        """Cache hits matching every filter given, newest first.

        A line whose bytes were edited is logged and left out.
        """
        since_us = None if since is None else micros_of(since)
        rows = self._db.read(
            """SELECT line FROM intentusnet_cache_hits
            WHERE (%s::text IS NULL OR intent = %s)
            AND (%s::bigint IS NULL OR created_us >= %s)
            ORDER BY created_us DESC, hit_id DESC LIMIT %s""",
            [intent, intent, since_us, since_us, limit],
        )
        data = b"".join(bytes(row[0]) for row in rows)
        return list(parse_hits(data, "cache-hit table"))

    def cache_hit_count(self) -> int:
        """How many cache hits are recorded."""
        ((count,),) = self._db.read("SELECT count(*) FROM intentusnet_cache_hits")
        return int(count)
