"""What a store gives queues: slots and a token bucket, shared by every router.

A queue (``routing/queues.py``) limits how many executions of its intents run
at once and how often they start, across every router that shares the store.
The store keeps the two shared parts (docs/flow-control.md):

- ``try_queue_slot(scope, count)``: one of ``count`` numbered slots of a scope
  (a queue, or a queue's tenant), taken without waiting, or ``None`` when all
  are taken. A slot is an exclusive lock that dies with the process holding it
  (the file store's ``flock``, PostgreSQL's session advisory lock), so a router
  killed while running an execution gives its slot back.
- ``take_queue_token(scope, rate, burst)``: a token of a token bucket that
  holds at most ``burst`` tokens and gains ``rate`` a second: ``0.0`` when one
  was taken, else the seconds until one will be there.
- ``enqueue_execution(queue, execution_id, priority)``, ``queued_executions(
  queue, limit)``, ``dequeue_execution(queue, execution_id)``: the executions
  submitted asynchronously that wait for a turn (their records read
  ``queued``), in the order they start: by priority, lower first, then oldest
  first. Those whose record a live process holds (a router starting it) are
  left out of ``queued_executions``; an entry stays until the execution that
  started from it finished, so a router killed while starting it loses nothing.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .ids import check_id

__all__ = ["KeepsQueues", "QueueSlot", "QueueStore"]


class QueueSlot(Protocol):
    """A slot of a queue, held until released (or its process dies)."""

    def release(self) -> None:
        """Give the slot back (idempotent)."""
        ...


@runtime_checkable
class QueueStore(Protocol):
    """A store whose routers share queue slots and rate limits (added in 0.1.0)."""

    def try_queue_slot(self, scope: str, count: int) -> QueueSlot | None:
        """Take one of ``count`` slots of ``scope`` if one is free; never waits.

        Raises:
            StoreError: a slot could not be asked for.
        """
        ...

    def take_queue_token(self, scope: str, rate: float, burst: int) -> float:
        """Take a token of ``scope``'s bucket: ``0.0``, or the seconds to wait.

        The bucket starts full (``burst`` tokens) and gains ``rate`` a second.

        Raises:
            StoreError: the bucket could not be read or written.
        """
        ...

    def enqueue_execution(self, queue: str, execution_id: str, priority: int) -> None:
        """Note, durably, that ``execution_id`` waits for a turn of ``queue``."""
        ...

    def queued_executions(self, queue: str, limit: int) -> list[str]:
        """The first ``limit`` executions waiting for ``queue``, in starting order.

        Those whose record a live process holds are left out.
        """
        ...

    def dequeue_execution(self, queue: str, execution_id: str) -> None:
        """Forget that ``execution_id`` waits (it started and ended); idempotent."""
        ...


class KeepsQueues:
    """The :class:`QueueStore` methods of a store, over the queues it keeps.

    A base of every store here: each sets ``_queues`` to its backend's queues,
    which take the ids checked here.
    """

    _queues: QueueStore

    def try_queue_slot(self, scope: str, count: int) -> QueueSlot | None:
        """Take one of ``count`` slots of ``scope`` if one is free; never waits."""
        return self._queues.try_queue_slot(scope, count)

    def take_queue_token(self, scope: str, rate: float, burst: int) -> float:
        """Take a token of ``scope``'s bucket: ``0.0``, or the seconds to wait."""
        return self._queues.take_queue_token(scope, rate, burst)

    def enqueue_execution(self, queue: str, execution_id: str, priority: int) -> None:
        """Note, durably, that ``execution_id`` waits for a turn of ``queue``."""
        self._queues.enqueue_execution(queue, check_id(execution_id), priority)

    def queued_executions(self, queue: str, limit: int) -> list[str]:
        """The first ``limit`` executions waiting for ``queue``, in starting order."""
        return self._queues.queued_executions(queue, limit)

    def dequeue_execution(self, queue: str, execution_id: str) -> None:
        """Forget that ``execution_id`` waits (it started and ended); idempotent."""
        self._queues.dequeue_execution(queue, check_id(execution_id))
