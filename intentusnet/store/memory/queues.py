"""The memory store's queue slots and token buckets: one process, a lock.

Also what a router without a store that shares queues limits itself with.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable

__all__ = ["MemoryQueues", "MemorySlot"]


class MemorySlot:
    """A slot of a memory queue."""

    __slots__ = ("_queues", "_scope", "held")

    def __init__(self, queues: MemoryQueues, scope: str) -> None:
        self._queues = queues
        self._scope = scope
        self.held = True

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        with self._queues.lock:
            if self.held:
                self.held = False
                self._queues.taken[self._scope] -= 1


class MemoryQueues:
    """Slots counted per scope, buckets as (tokens, when), queued executions.

    Args:
        held: whether a live holder has a record (left out of the queued).
    """

    def __init__(self, held: Callable[[str], bool] = lambda _: False) -> None:
        self.lock = threading.Lock()
        self.taken: dict[str, int] = {}
        self._buckets: dict[str, tuple[float, float]] = {}
        self._queued: dict[str, dict[str, tuple[int, int]]] = {}
        self._seq = itertools.count()
        self._held = held

    def enqueue_execution(self, queue: str, execution_id: str, priority: int) -> None:
        """Note that ``execution_id`` waits for a turn of ``queue``."""
        with self.lock:
            entries = self._queued.setdefault(queue, {})
            entries.setdefault(execution_id, (priority, next(self._seq)))

    def queued_executions(self, queue: str, limit: int) -> list[str]:
        """The first ``limit`` waiting for ``queue`` that no one holds, in order."""
        with self.lock:
            entries = sorted(self._queued.get(queue, {}).items(), key=lambda e: e[1])
        found = [i for i, _ in entries if not self._held(i)]
        return found[:limit]

    def dequeue_execution(self, queue: str, execution_id: str) -> None:
        """Forget that ``execution_id`` waits."""
        with self.lock:
            self._queued.get(queue, {}).pop(execution_id, None)

    def try_queue_slot(self, scope: str, count: int) -> MemorySlot | None:
        """Take one of ``count`` slots of ``scope``; ``None`` if none is free."""
        with self.lock:
            taken = self.taken.get(scope, 0)
            if taken >= count:
                return None
            self.taken[scope] = taken + 1
        return MemorySlot(self, scope)

    def take_queue_token(self, scope: str, rate: float, burst: int) -> float:
        """Take a token of ``scope``'s bucket: ``0.0``, or the seconds to wait."""
        now = time.monotonic()
        with self.lock:
            tokens, then = self._buckets.get(scope, (float(burst), now))
            tokens = min(float(burst), tokens + max(0.0, now - then) * rate)
            if tokens >= 1:
                self._buckets[scope] = (tokens - 1, now)
                return 0.0
            self._buckets[scope] = (tokens, now)
        return (1 - tokens) / rate
