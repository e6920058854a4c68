"""The memory store, for tests: the same sealed lines as the others, kept in a dict.

``store.py`` is :class:`MemoryExecutionStore`; ``durable`` holds its idempotency
keys and resume claims.
"""

from .store import MemoryExecutionStore

__all__ = ["MemoryExecutionStore"]
