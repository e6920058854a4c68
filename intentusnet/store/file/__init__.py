"""The file store: one JSON Lines file per record and a SQLite catalog (docs/store.md).

``store.py`` is :class:`FileExecutionStore`; ``files`` and ``layout`` are the
record files and where they sit; ``writer`` appends to one; ``catalog*``,
``index``, ``opened`` and ``scan`` keep the derived SQLite catalog (rows written
behind, the log of opened records, ``reindex``); ``sqlite`` opens its database;
``hits`` is the cache-hit journal; ``loaded`` keeps settled records for loading
again; ``durable`` holds idempotency keys and resume claims beside the records.
"""

from .layout import CATALOG_NAME
from .store import DEFAULT_ROOT, Durability, FileExecutionStore

__all__ = ["CATALOG_NAME", "DEFAULT_ROOT", "Durability", "FileExecutionStore"]
