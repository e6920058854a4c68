"""The PostgreSQL store's queue slots and token buckets, shared by every host.

A slot is a session advisory lock of the two-key form, ``(scope key, n)`` (a
key space apart from the one-key locks of records, flights and idempotency
keys), taken with ``pg_try_advisory_lock`` on the store's queue connection (its
own, so waiting routers asking for slots hold up no record's write): the
server drops it the moment that connection ends, so a router killed while
it runs an execution gives its slot back. One statement tries the free slots
in order and stops at the first it gets. A session takes a lock it holds
again without waiting (counting it twice), so the slots this process holds are
left out of the numbers it tries.

An execution submitted asynchronously that waits for its turn is a row of
``intentusnet_queued``; those whose record a session holds (its writer, or a
router starting it) are left out of the list, by the record's lock key.

A bucket is a row of ``intentusnet_queue_buckets`` (tokens, and when they were
counted, by the server's clock), read ``FOR UPDATE`` and written back in one
statement, so buckets agree across hosts whatever their clocks say.
"""

from __future__ import annotations

import threading
from hashlib import sha256
from typing import Final

from .connection import Connection
from .schema import HELD

__all__ = [
    "PostgresQueues",
    "PostgresSlot",
    "scope_key",
]

# The numbers this process does not hold, in order, tried until one is got. A
# lock the session holds already would be taken again (counted twice), so the
# numbers it holds are left out of the list, never filtered beside the lock
# call: the planner may order a filter's conditions as it likes.
# (No ORDER BY: a sort would read, so lock, every row; a function scan gives the
# array's elements in order, and LIMIT stops at the first lock got.)
_TRY: Final = """SELECT n FROM unnest(%s::int[]) AS n
    WHERE pg_try_advisory_lock(%s::int, n) LIMIT 1"""
_UNLOCK: Final = "SELECT pg_advisory_unlock(%s::int, %s::int)"
_CREATE: Final = """INSERT INTO intentusnet_queue_buckets (scope, tokens, counted)
    VALUES (%s, %s, clock_timestamp()) ON CONFLICT DO NOTHING"""
# The row is locked first (FOR UPDATE gives its newest version), then
# refilled by the time since it was counted and written back, less a token
# when there is one. ``available`` is what there was before taking.
_TAKE: Final = """WITH b AS MATERIALIZED (
        SELECT tokens, counted, clock_timestamp() AS now
        FROM intentusnet_queue_buckets WHERE scope = %s FOR UPDATE),
    f AS (SELECT least(%s::float8, tokens + greatest(0,
        extract(epoch FROM now - counted)::float8) * %s::float8) AS available,
        greatest(counted, now) AS counted FROM b)
    UPDATE intentusnet_queue_buckets q
    SET tokens = f.available - CASE WHEN f.available >= 1 THEN 1 ELSE 0 END,
        counted = f.counted
    FROM f WHERE q.scope = %s RETURNING f.available"""


_ENQUEUE: Final = """INSERT INTO intentusnet_queued
    (execution_id, queue, priority, created_us) VALUES (%s, %s, %s,
    (extract(epoch FROM clock_timestamp()) * 1000000)::bigint)
    ON CONFLICT DO NOTHING"""
_QUEUED: Final = f"""WITH held(k) AS ({HELD})
    SELECT q.execution_id FROM intentusnet_queued q
    JOIN intentusnet_records r ON r.execution_id = q.execution_id
    WHERE q.queue = %s AND r.lock_key NOT IN (SELECT k FROM held)
    ORDER BY q.priority, q.created_us, q.execution_id LIMIT %s"""
_DEQUEUE: Final = "DELETE FROM intentusnet_queued WHERE execution_id = %s"


class PostgresSlot:
    """A held slot: its advisory lock on the store's queue connection."""

    __slots__ = ("_queues", "key", "n")

    def __init__(self, queues: PostgresQueues, key: int, n: int) -> None:
        self._queues = queues
        self.key = key
        self.n = n

    def release(self) -> None:
        """Unlock the slot (idempotent; gone anyway with the session)."""
        with self._queues.lock:  # no try between the two: the count stays one
            held = self._queues.held.get(self.key)
            if held is None or self.n not in held:
                return
            held.discard(self.n)
            self._queues.db.run(_UNLOCK, [self.key, self.n], doing="queue slot")


class PostgresQueues:
    """The queue slots this process holds, and the bucket rows it made sure of.

    Slots and buckets go through ``db``, a connection of their own; queued
    executions through ``session``, the store's.
    """

    def __init__(self, db: Connection, session: Connection) -> None:
        self.db = db
        self._session = session
        self.lock = threading.Lock()
        #: slot numbers held by this process, by scope key
        self.held: dict[int, set[int]] = {}
        self._buckets: set[str] = set()

    def try_queue_slot(self, scope: str, count: int) -> PostgresSlot | None:
        """Take one of ``count`` slot locks of ``scope``; ``None`` if all are taken."""
        key = scope_key(scope)
        with self.lock:  # one taker at a time: the exclusions stay true
            held = self.held.setdefault(key, set())
            if len(held) >= count:
                return None
            free = [n for n in range(count) if n not in held]
            rows = self.db.run(_TRY, [free, key], doing="queue slot")
            if not rows:
                return None
            n = int(rows[0][0])
            held.add(n)
        return PostgresSlot(self, key, n)

    def take_queue_token(self, scope: str, rate: float, burst: int) -> float:
        """Take a token of ``scope``'s bucket row: ``0.0``, or the seconds to wait."""
        if scope not in self._buckets:
            self.db.run(_CREATE, [scope, float(burst)], doing="queue bucket")
            self._buckets.add(scope)
        rows = self.db.run(_TAKE, [scope, burst, rate, scope], doing="queue bucket")
        available = float(rows[0][0]) if rows else float(burst)
        return 0.0 if available >= 1 else (1 - available) / rate

    def enqueue_execution(self, queue: str, execution_id: str, priority: int) -> None:
        """Note that ``execution_id`` waits for a turn of ``queue``."""
        self._session.run(
            _ENQUEUE, [execution_id, queue, priority], doing="queue an execution"
        )

    def queued_executions(self, queue: str, limit: int) -> list[str]:
        """The first ``limit`` waiting for ``queue`` whose record no session holds."""
        rows = self._session.read(
            _QUEUED, [queue, limit], doing="list queued executions"
        )
        return [str(row[0]) for row in rows]

    def dequeue_execution(self, queue: str, execution_id: str) -> None:
        """Forget that ``execution_id`` waits."""
        self._session.run(_DEQUEUE, [execution_id], doing="dequeue an execution")


def scope_key(scope: str) -> int:
    """The first key of a scope's slot locks: 32 bits of a SHA-256, signed."""
    digest = sha256(b"intentusnet-queue:" + scope.encode()).digest()
    return int.from_bytes(digest[:4], "big", signed=True)
