"""The PostgreSQL store's tables: their schema, its version, and lock keys.

The tables are created on first use, in one transaction under an advisory lock
(docs/store.md, "PostgreSQL"). A release meeting a newer schema version than
its own refuses the tables.
"""

from __future__ import annotations

from hashlib import sha256
from typing import Any, Final

import psycopg

from ...errors import StoreError

#: The schema version this release writes and reads (the ``intentusnet_schema`` row).
SCHEMA_VERSION: Final = 1
# Serialises schema creation among processes starting at once (any fixed key).
_SCHEMA_LOCK: Final = 0x1E7E_0005_C4E3_A001

SCHEMA: Final = (
    """CREATE TABLE IF NOT EXISTS intentusnet_schema (
        singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
        version integer NOT NULL)""",
    # Derived data, rebuilt by reindex() from intentusnet_lines; the columns
    # are the file store's catalog row, plus the record's advisory-lock key.
    """CREATE TABLE IF NOT EXISTS intentusnet_records (
        execution_id text PRIMARY KEY,
        created_us bigint NOT NULL,
        created_utc text NOT NULL,
        intent text NOT NULL,
        intent_version text NOT NULL,
        envelope_hash text NOT NULL,
        status text NOT NULL,
        replayable boolean NOT NULL,
        reason text,
        agent text,
        duration_ms double precision,
        parent_id text,
        owner text,
        lines integer NOT NULL,
        size bigint NOT NULL,
        chain_head text NOT NULL,
        lock_key bigint NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_records_hash
        ON intentusnet_records (envelope_hash, created_us DESC, execution_id DESC)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_records_created
        ON intentusnet_records (created_us DESC, execution_id DESC)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_records_intent
        ON intentusnet_records (intent, created_us DESC)""",
    # Listing by replayability, and by the start of an id: a range in byte
    # order, whatever the database's collation.
    """CREATE INDEX IF NOT EXISTS intentusnet_records_replayable
        ON intentusnet_records (replayable, created_us DESC, execution_id DESC)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_records_id_bytes
        ON intentusnet_records (execution_id COLLATE "C")""",
    # The records themselves: each sealed line, newline included, byte for byte.
    """CREATE TABLE IF NOT EXISTS intentusnet_lines (
        execution_id text NOT NULL
            REFERENCES intentusnet_records ON DELETE CASCADE,
        seq integer NOT NULL,
        line bytea NOT NULL,
        PRIMARY KEY (execution_id, seq))""",
    # The step index (store/postgres/steps.py): derived from the lines, rebuilt
    # by reindex() (records written before it existed need one).
    """CREATE TABLE IF NOT EXISTS intentusnet_steps (
        execution_id text NOT NULL
            REFERENCES intentusnet_records ON DELETE CASCADE,
        step integer NOT NULL,
        envelope_hash text NOT NULL,
        name text NOT NULL,
        args_hash text NOT NULL,
        created_us bigint NOT NULL,
        PRIMARY KEY (execution_id, step))""",
    """CREATE INDEX IF NOT EXISTS intentusnet_steps_call
        ON intentusnet_steps (envelope_hash, name, args_hash,
            created_us DESC, execution_id DESC, step)""",
    """CREATE TABLE IF NOT EXISTS intentusnet_cache_hits (
        hit_id text PRIMARY KEY,
        created_us bigint NOT NULL,
        intent text NOT NULL,
        line bytea NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_cache_hits_created
        ON intentusnet_cache_hits (created_us DESC, hit_id DESC)""",
    # Unfinished records (in_progress or incomplete: their lock tells), by
    # intent: recovery's scan reads these rows, not the store's.
    """CREATE INDEX IF NOT EXISTS intentusnet_records_unfinished
        ON intentusnet_records (intent, created_us DESC)
        WHERE status = 'in_progress'""",
    # Idempotency keys (store/postgres/durable.py): by the key's SHA-256, as the
    # file store names its key files; the key itself is kept, as there.
    """CREATE TABLE IF NOT EXISTS intentusnet_keys (
        key_hash text PRIMARY KEY,
        key text NOT NULL,
        execution_id text NOT NULL,
        envelope_hash text NOT NULL,
        created_us bigint NOT NULL)""",
    # Resume links: the execution that resumed a record (records are never
    # rewritten); gone with the record.
    """CREATE TABLE IF NOT EXISTS intentusnet_resumes (
        execution_id text PRIMARY KEY
            REFERENCES intentusnet_records ON DELETE CASCADE,
        resumed_by text NOT NULL)""",
    # Cancel requests, one per resume chain (by its first execution): a
    # running router polls them; gone with that record (added in 0.1.0).
    """CREATE TABLE IF NOT EXISTS intentusnet_cancels (
        origin text PRIMARY KEY
            REFERENCES intentusnet_records ON DELETE CASCADE,
        data text NOT NULL)""",
    # Operators' decisions, counted for metrics: one row per decision, by the
    # record that holds it; kept when records are deleted (added in 0.1.0).
    """CREATE TABLE IF NOT EXISTS intentusnet_decisions (
        action text NOT NULL,
        execution_id text NOT NULL,
        PRIMARY KEY (action, execution_id))""",
    # Signals of a resume chain, by its first execution, oldest first; and
    # wake-ups of waiting records, by due time (store/postgres/waits.py);
    # gone with their record (added in 0.1.0).
    """CREATE TABLE IF NOT EXISTS intentusnet_signals (
        origin text NOT NULL
            REFERENCES intentusnet_records ON DELETE CASCADE,
        seq bigserial,
        data text NOT NULL,
        PRIMARY KEY (origin, seq))""",
    """CREATE TABLE IF NOT EXISTS intentusnet_wakeups (
        execution_id text NOT NULL
            REFERENCES intentusnet_records ON DELETE CASCADE,
        due_us bigint NOT NULL,
        PRIMARY KEY (execution_id, due_us))""",
    """CREATE INDEX IF NOT EXISTS intentusnet_wakeups_due
        ON intentusnet_wakeups (due_us)""",
    # Queue rate limits (store/postgres/queues.py): a token bucket per queue,
    # counted by the server's clock (added in 0.1.0).
    """CREATE TABLE IF NOT EXISTS intentusnet_queue_buckets (
        scope text PRIMARY KEY,
        tokens double precision NOT NULL,
        counted timestamptz NOT NULL)""",
    # Executions submitted asynchronously waiting for their queue's turn
    # (store/postgres/queues.py); gone with their record (added in 0.1.0).
    """CREATE TABLE IF NOT EXISTS intentusnet_queued (
        execution_id text PRIMARY KEY
            REFERENCES intentusnet_records ON DELETE CASCADE,
        queue text NOT NULL,
        priority bigint NOT NULL,
        created_us bigint NOT NULL)""",
    """CREATE INDEX IF NOT EXISTS intentusnet_queued_order
        ON intentusnet_queued (queue, priority, created_us)""",
    # A record's key goes with it (prune, delete): found by the execution.
    """CREATE INDEX IF NOT EXISTS intentusnet_keys_execution
        ON intentusnet_keys (execution_id)""",
    # The transparency logs (store/postgres/translog.py, added in 0.1.0): each
    # file of the C2SP tiles layout as a row (its path, its bytes exactly as
    # the file store's), the checkpoints included, one log per origin.
    """CREATE TABLE IF NOT EXISTS intentusnet_log_tiles (
        origin text NOT NULL,
        path text NOT NULL,
        data bytea NOT NULL,
        PRIMARY KEY (origin, path))""",
    # Each log's leaves by execution id: derived, written in the transaction
    # that appends them (never evidence: the audit reads the bundles).
    """CREATE TABLE IF NOT EXISTS intentusnet_log_leaves (
        origin text NOT NULL,
        leaf bigint NOT NULL,
        execution_id text NOT NULL,
        chain_head text NOT NULL,
        PRIMARY KEY (origin, leaf))""",
    """CREATE INDEX IF NOT EXISTS intentusnet_log_leaves_id
        ON intentusnet_log_leaves (origin, execution_id, chain_head)""",
)


def lock_key(execution_id: str) -> int:
    """The record's session advisory-lock key: 63 bits of a SHA-256 of its id."""
    return _key(b"intentusnet-record:", execution_id)


def flight_key(envelope_hash: str) -> int:
    """The advisory-lock key of a cache flight of an envelope hash."""
    return _key(b"intentusnet-flight:", envelope_hash)


def key_lock(key_hash: str) -> int:
    """The advisory-lock key of an idempotency key's claim (by the key's hash)."""
    return _key(b"intentusnet-idempotency:", key_hash)


def log_lock(origin: str) -> int:
    """The advisory-lock key of a transparency log's appender (one at a time)."""
    return _key(b"intentusnet-log:", origin)


def _key(kind: bytes, name: str) -> int:
    digest = sha256(kind + name.encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


#: Keys of the advisory locks held now by any session on this database
#: (a bigint key shows in pg_locks as classid = high, objid = low 32 bits).
HELD: Final = """SELECT (l.classid::bigint << 32) | l.objid::bigint FROM pg_locks l
    WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"""


def create_schema(conn: psycopg.Connection[Any], where: str) -> None:
    """Create the tables if missing; refuse tables of another schema version."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", [_SCHEMA_LOCK])
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute(
            "INSERT INTO intentusnet_schema (version) VALUES (%s) "
            "ON CONFLICT DO NOTHING",
            [SCHEMA_VERSION],
        )
        row = conn.execute("SELECT version FROM intentusnet_schema").fetchone()
    version = row[0] if row else None
    if version != SCHEMA_VERSION:
        raise StoreError(
            f"PostgreSQL at {where}: the intentusnet tables are of schema version "
            f"{version}; this release uses version {SCHEMA_VERSION}. Upgrade "
            "intentusnet to use them."
        )
