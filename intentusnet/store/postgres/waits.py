"""The PostgreSQL store's signals and wake-ups (see ``store.durable.WaitStore``).

A signal is a row of ``intentusnet_signals`` (by the chain's first execution,
numbered in the order they were inserted); the cap is checked in the statement
that inserts it. A wake-up is a row of ``intentusnet_wakeups``; recovery reads
the due ones through the index on ``due_us``, so its scan follows the
wake-ups due, not the executions waiting. Both go with their record.
"""

from __future__ import annotations

from typing import Final

import orjson

from ..._util.jsonvalue import JSONObject
from ..ids import check_id
from .connection import Connection

_ADD_SIGNAL: Final = """INSERT INTO intentusnet_signals (origin, data)
    SELECT %s, %s WHERE (SELECT count(*) FROM intentusnet_signals
        WHERE origin = %s) < %s
    RETURNING seq"""


class PgWaits:
    """The signals and wake-ups of ``PostgresExecutionStore``, one of its bases.

    The store supplies ``_db``, its session.
    """

    _db: Connection

    def add_signal(self, origin: str, signal: JSONObject, *, cap: int) -> bool:
        """Insert ``signal`` unless the chain holds ``cap`` (StoreError: no origin)."""
        check_id(origin)
        rows = self._db.run(
            _ADD_SIGNAL,
            [origin, orjson.dumps(signal).decode(), origin, cap],
            doing=f"execution {origin}: cannot keep its signal",
        )
        return bool(rows)

    def signals(self, origin: str) -> list[JSONObject]:
        """The chain's signals, oldest first."""
        rows = self._db.read(
            "SELECT data FROM intentusnet_signals WHERE origin = %s ORDER BY seq",
            [check_id(origin)],
            doing=f"execution {origin}: cannot read its signals",
        )
        found = [orjson.loads(data) for (data,) in rows]
        return [signal for signal in found if isinstance(signal, dict)]

    def add_wakeup(self, execution_id: str, due_us: int) -> None:
        """Insert the wake-up (nothing if it is there)."""
        self._db.run(
            "INSERT INTO intentusnet_wakeups (execution_id, due_us) VALUES (%s, %s) "
            "ON CONFLICT DO NOTHING",
            [check_id(execution_id), due_us],
            doing=f"execution {execution_id}: cannot write its wake-up",
        )

    def due_wakeups(self, until_us: int, limit: int) -> list[tuple[str, int]]:
        """The wake-ups due by ``until_us``, soonest first, in one indexed query."""
        rows = self._db.read(
            "SELECT execution_id, due_us FROM intentusnet_wakeups WHERE due_us <= %s "
            "ORDER BY due_us LIMIT %s",
            [until_us, limit],
            doing="cannot read wake-ups",
        )
        return [(str(e), int(d)) for e, d in rows]

    def clear_wakeup(self, execution_id: str, due_us: int) -> None:
        """Delete the wake-up (nothing if it is gone)."""
        self._db.run(
            "DELETE FROM intentusnet_wakeups WHERE execution_id = %s AND due_us = %s",
            [check_id(execution_id), due_us],
            doing=f"execution {execution_id}: cannot delete its wake-up",
        )
