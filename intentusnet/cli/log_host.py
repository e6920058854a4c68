"""Where ``intentusnet log`` finds a store's transparency logs: files or rows.

A file store keeps its logs in ``<root>/log/<key id>/`` (``store.file.translog``),
a PostgreSQL store as rows of ``intentusnet_log_tiles``
(``store.postgres.translog``); both are :class:`~intentusnet.tlog.log.TileLog`
objects, so every command past this point is the same for both.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..record.keys import PublicKey, SigningKey
    from ..store import FileExecutionStore, PostgresExecutionStore
    from ..tlog.audit import RecordState
    from ..tlog.index import LeafLookup
    from ..tlog.leaf import LogLeaf
    from ..tlog.log import TileLog

__all__ = ["LogHost"]


class LogHost:
    """The transparency logs of one store, and the records they are checked against."""

    def __init__(self, store: FileExecutionStore | PostgresExecutionStore) -> None:
        self.store = store
        #: where the logs are, for messages
        self.where = store.where

    def _pg(self) -> PostgresExecutionStore | None:
        from ..store import FileExecutionStore

        if isinstance(self.store, FileExecutionStore):
            return None
        return self.store

    def log(self, key_id: str, signing_key: SigningKey | None = None) -> TileLog:
        """The log of key ``key_id``: read only, or appendable with its key."""
        pg = self._pg()
        if pg is None:
            from ..store.file.translog import store_log

            return store_log(self.store.where, key_id, signing_key)
        from ..store.postgres.translog import store_log as pg_store_log

        return pg_store_log(pg.log_connection(), key_id, signing_key)

    def logs(self) -> list[TileLog]:
        """Every log the store keeps (one per signing key it has had)."""
        pg = self._pg()
        if pg is None:
            from ..store.file.translog import store_logs

            return list(store_logs(self.store.where))
        from ..store.postgres.translog import store_logs as pg_store_logs

        return list(pg_store_logs(pg.log_connection()))

    def index(self, log: TileLog) -> LeafLookup:
        """The log's leaves by execution id."""
        from ..tlog.index import LeafIndex

        if self._pg() is None:
            return LeafIndex(log)
        from ..store.postgres.translog import PostgresLeafIndex, PostgresTileLog

        assert isinstance(log, PostgresTileLog)
        return PostgresLeafIndex(log)

    def records(self, key: PublicKey) -> Iterator[RecordState]:
        """Every record, as the audit judges it against the log of ``key``."""
        pg = self._pg()
        if pg is None:
            from ..store.file.translog import record_states

            return record_states(os.fspath(self.store.where), key)
        from ..store.postgres.translog import record_states as pg_record_states

        return pg_record_states(pg.log_connection(), pg.load, key)

    def unlogged(self, key_id: str) -> tuple[list[LogLeaf], float]:
        """The leaves of every closed record not yet in the log of ``key_id``.

        Also the time a later pending scan may start from (file stores).
        """
        pg = self._pg()
        if pg is None:
            from ..store.file.translog import pending_leaves

            return pending_leaves(os.fspath(self.store.where), 0.0, key_id=key_id)
        import time

        from ..store.postgres.translog import pending_leaves as pg_pending_leaves

        return pg_pending_leaves(pg.log_connection(), pg.load, key_id), time.time()
