"""The PostgreSQL store's idempotency keys, record holds and resume links.

The rules are the file store's (``store/file/durable.py``), with rows for files and
session advisory locks for ``flock``, so they hold across hosts:

- a key is a row of ``intentusnet_keys`` named by the key's SHA-256. Its
  claimer takes the key's advisory lock and inserts the row in one statement
  (``INSERT ... ON CONFLICT DO NOTHING``, only once the lock is taken), and
  keeps the lock until it lets go of the claim; PostgreSQL drops it with the
  claimer's connection, however its process died, so the next caller to take
  it holds the claim;
- a record is held with its writer's advisory lock (``lock_key``), taken
  without waiting: ``None`` while a writer or another resumer, on any host,
  has it;
- a resume link is a row of ``intentusnet_resumes``, gone with the record.

Session locks are re-entrant within a connection, and a store's threads share
one: the store's own claims and holds are kept in sets, as its writers are,
so a second thread of the same process is refused as another process is.
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections.abc import Iterable
from typing import Final

import orjson

from ..._util.jsonvalue import JSONObject
from ..._util.time import utc_now
from ...errors import RecordNotFound, StoreError
from ..durable import DECISION_ACTIONS, check_action, check_idempotency_key
from ..ids import check_id
from .connection import Connection
from .schema import key_lock, lock_key

#: Claim a key: take its lock, and only then insert the claim if it is new.
#: One row: ``(held, created, execution_id, envelope_hash)``; the id is NULL
#: while another session is between taking the lock and committing its new
#: claim (a row this statement inserts is not in its snapshot, hence ``made``).
_CLAIM: Final = """WITH lock AS MATERIALIZED (
        SELECT pg_try_advisory_lock(%s) AS held),
    made AS (
        INSERT INTO intentusnet_keys
            (key_hash, key, execution_id, envelope_hash, created_us)
        SELECT %s, %s, %s, %s, %s FROM lock WHERE held
        ON CONFLICT DO NOTHING RETURNING execution_id, envelope_hash)
    SELECT lock.held, made.execution_id IS NOT NULL,
        coalesce(made.execution_id, k.execution_id),
        coalesce(made.envelope_hash, k.envelope_hash)
    FROM lock LEFT JOIN made ON true
    LEFT JOIN intentusnet_keys k ON k.key_hash = %s"""
#: Hold a record: its writer's lock, if the record exists.
_HOLD: Final = """SELECT pg_try_advisory_lock(lock_key) FROM intentusnet_records
    WHERE execution_id = %s"""
_LINK: Final = """INSERT INTO intentusnet_resumes (execution_id, resumed_by)
    VALUES (%s, %s)
    ON CONFLICT (execution_id) DO UPDATE SET resumed_by = EXCLUDED.resumed_by"""
#: Seconds to wait for a claim another session is committing.
_CLAIM_WAIT_S: Final = 5.0


def key_hash(key: str) -> str:
    """The key's SHA-256 in hex: its name, as the file store's key file's."""
    return hashlib.sha256(key.encode("ascii")).hexdigest()


class PgKeyClaim:
    """A key's claim as its row says; ``held`` while this store holds its lock."""

    __slots__ = ("_db", "_hash", "_holding", "created", "envelope_hash", "execution_id")

    def __init__(
        self,
        db: Connection,
        holding: set[str] | None,
        claim: tuple[str, str, str],
        *,
        created: bool,
    ) -> None:
        self._db = db
        self._holding = holding
        self._hash, self.execution_id, self.envelope_hash = claim
        self.created = created

    @property
    def held(self) -> bool:
        """This caller holds the claim until ``release``."""
        return self._holding is not None

    def release(self) -> None:
        """Let go of the claim's lock (idempotent)."""
        holding, self._holding = self._holding, None
        if holding is not None:
            with self._db.lock:
                holding.discard(self._hash)
                _unlock(self._db, key_lock(self._hash))


class PgRecordHold:
    """A record's writer lock, held on the store's session by a resumer."""

    __slots__ = ("_db", "_writing", "execution_id")

    def __init__(self, db: Connection, writing: set[str], execution_id: str) -> None:
        self._db = db
        self._writing: set[str] | None = writing
        self.execution_id = execution_id

    def link(self, resumed_by: str) -> None:
        """Write (or replace) the row saying ``resumed_by`` resumes the record."""
        self._db.run(
            _LINK,
            [self.execution_id, resumed_by],
            doing=f"record {self.execution_id}: could not write its resume link",
        )

    def release(self) -> None:
        """Let go of the record's lock (idempotent)."""
        writing, self._writing = self._writing, None
        if writing is not None:
            with self._db.lock:
                writing.discard(self.execution_id)
                _unlock(self._db, lock_key(self.execution_id))


class PgDurable:
    """The durable-execution half of ``PostgresExecutionStore``, one of its bases.

    The store supplies ``_db``, its session, and the sets of what that session
    holds: ``_holding`` (key hashes) and ``_writing`` (record ids, its
    writers' and holds').
    """

    _db: Connection
    _holding: set[str]
    _writing: set[str]

    def claim_key(self, key: str, envelope_hash: str, execution_id: str) -> PgKeyClaim:
        """Claim ``key`` for ``execution_id``, or read (and maybe hold) its claim.

        One statement takes the key's advisory lock and inserts its row if new,
        committed before this returns; the lock is held until ``release``.

        Raises:
            StoreError: the database could not be reached, or a claim another
                session is making did not appear in time.
        """
        db, holding = self._db, self._holding
        digest = key_hash(key)
        lock = key_lock(digest)
        params = [lock, digest, key, execution_id, envelope_hash, utc_now()[1], digest]
        deadline = time.monotonic() + _CLAIM_WAIT_S
        while True:
            with db.lock:
                ((held, created, found_id, found_hash),) = db.run(
                    _CLAIM, params, doing=f"idempotency key {key!r}: cannot claim"
                )
                if held and (digest in holding or found_id is None):
                    # ours already (session locks count up), or no claim to hold
                    _unlock(db, lock)
                    held = False
                if held:
                    holding.add(digest)
            if found_id is not None:
                return PgKeyClaim(
                    db,
                    holding if held else None,
                    (digest, str(found_id), str(found_hash)),
                    created=bool(created),
                )
            if time.monotonic() >= deadline:
                raise StoreError(
                    f"idempotency key {key!r}: another session took its lock but its "
                    f"claim did not appear within {_CLAIM_WAIT_S:g} s"
                )
            time.sleep(0.001)  # another session is committing its new claim

    def hold_record(self, execution_id: str) -> PgRecordHold | None:
        """Take the record's writer lock; None while any session holds it."""
        db, writing = self._db, self._writing
        check_id(execution_id)
        with db.lock:
            rows = db.run(
                _HOLD, [execution_id], doing=f"record {execution_id}: cannot hold"
            )
            if not rows:
                raise RecordNotFound(f"no record {execution_id}")
            if not rows[0][0]:
                return None
            if execution_id in writing:
                _unlock(db, lock_key(execution_id))  # ours already: undo the count
                return None
            writing.add(execution_id)
        return PgRecordHold(db, writing, execution_id)

    def resumed_by(self, execution_id: str) -> str | None:
        """The id in ``execution_id``'s resume link, if it has one."""
        rows = self._db.read(
            "SELECT resumed_by FROM intentusnet_resumes WHERE execution_id = %s",
            [check_id(execution_id)],
            doing=f"record {execution_id}: cannot read its resume link",
        )
        return str(rows[0][0]) if rows else None

    def request_cancel(self, origin: str, data: JSONObject) -> JSONObject | None:
        """Insert the chain's cancel request, once (StoreError: its origin is gone)."""
        rows = self._db.run(
            "INSERT INTO intentusnet_cancels (origin, data) VALUES (%s, %s) "
            "ON CONFLICT DO NOTHING RETURNING origin",
            [check_id(origin), orjson.dumps(data).decode()],
            doing=f"execution {origin}: cannot write its cancel request",
        )
        if rows:
            return None
        return self.cancel_requests([origin]).get(origin, {})

    def cancel_requests(self, origins: Iterable[str]) -> dict[str, JSONObject]:
        """The cancel requests of these chains, by first execution, in one query."""
        wanted = list(origins)
        if not wanted:
            return {}
        rows = self._db.read(
            "SELECT origin, data FROM intentusnet_cancels WHERE origin = ANY(%s)",
            [wanted],
            doing="cannot read cancel requests",
        )
        found: dict[str, JSONObject] = {}
        for origin, data in rows:
            parsed = orjson.loads(data)
            found[str(origin)] = parsed if isinstance(parsed, dict) else {}
        return found

    def note_decision(self, action: str, record: str) -> None:
        """Count an operator's decision, once per record."""
        self._db.run(
            "INSERT INTO intentusnet_decisions (action, execution_id) VALUES (%s, %s) "
            "ON CONFLICT DO NOTHING",
            [check_action(action), check_id(record)],
            doing=f"record {record}: cannot count its decision",
        )

    def decision_counts(self) -> dict[str, int]:
        """The decisions counted, by action, in one query (``DecisionTally``)."""
        rows = self._db.read(
            "SELECT action, count(*) FROM intentusnet_decisions GROUP BY action",
            [],
            doing="cannot count operators' decisions",
        )
        found = {str(action): int(count) for action, count in rows}
        return {action: found.get(action, 0) for action in DECISION_ACTIONS}

    def find_by_idempotency_key(self, key: str) -> str | None:
        """The execution ``key`` names, if it was claimed (its row)."""
        rows = self._db.read(
            "SELECT execution_id FROM intentusnet_keys WHERE key_hash = %s",
            [key_hash(check_idempotency_key(key))],
            doing=f"idempotency key {key!r}: cannot read",
        )
        return str(rows[0][0]) if rows else None


def _unlock(db: Connection, key: int) -> None:
    """Release one count of an advisory lock (gone anyway with the connection)."""
    with contextlib.suppress(StoreError):
        db.run("SELECT pg_advisory_unlock(%s)", [key])
