"""The memory store's queue slots and token buckets: one process, a lock.

Also what a router without a store that shares queues limits itself with.
"""

from __future__ import annotations

import threading
import time

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
    """Slots counted per scope, buckets as (tokens, when) per scope."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.taken: dict[str, int] = {}
        self._buckets: dict[str, tuple[float, float]] = {}

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
