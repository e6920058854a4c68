"""The PostgreSQL store: every sealed line a row (docs/store.md).

``store.py`` is :class:`PostgresExecutionStore`; ``connection`` holds the
session connection and the pool; ``schema`` creates tables and names advisory
locks; ``writer`` appends a record's lines; ``catalog``, ``steps`` and ``hits``
answer lists, step look-ups and the cache-hit journal; ``durable`` holds
idempotency keys and resume claims.
"""

from .store import PostgresExecutionStore

__all__ = ["PostgresExecutionStore"]
