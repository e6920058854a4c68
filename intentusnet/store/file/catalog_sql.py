"""The catalog's SQL: its tables, indexes and triggers, and the statements on them.

The layout (see ``catalog`` for what each table holds) and every statement
``Catalog`` runs, in one place; ``CATALOG_SCHEMA`` is bumped when the layout
changes. Rows are sealed in Python (``catalog_seal.row_seal``); the rows of
``counts``, kept by triggers, are sealed in SQL (``catalog_seal.seal_sql``).
"""

from __future__ import annotations

from typing import Final

from . import catalog_steps, catalog_usage
from .catalog_seal import seal_sql

#: Bumped when the table layout changes; an older catalog is rebuilt, not migrated.
CATALOG_SCHEMA: Final = "8"
COLUMNS: Final = (
    "id, created_us, created_utc, intent, intent_version, envelope_hash, status, "
    "replayable, reason, agent, duration_ms, parent_id, owner, lines, size, "
    "chain_head, usage, inode"
)
NAMES: Final = COLUMNS.split(", ")
PARAMS: Final = ", ".join("?" * 19)  # a row's values and its seal


FIELDS: Final = (
    "created_us INTEGER NOT NULL, created_utc TEXT NOT NULL, intent TEXT NOT NULL, "
    "intent_version TEXT NOT NULL, envelope_hash TEXT NOT NULL, "
    "status TEXT NOT NULL, replayable INTEGER NOT NULL, reason TEXT, agent TEXT, "
    "duration_ms REAL, parent_id TEXT, owner TEXT, lines INTEGER NOT NULL, "
    "size INTEGER NOT NULL, chain_head TEXT NOT NULL, usage TEXT, inode INTEGER, "
    "seal INTEGER NOT NULL"
)
TABLE: Final = f"(id TEXT PRIMARY KEY, {FIELDS})"
# Counted by an update, or a new row (its seal is only computed then).
COUNT_NEW: Final = (
    "UPDATE counts SET records = records + 1, bytes = bytes + new.size, seal = "
    + seal_sql("status", "intent", "records + 1", "bytes + new.size")
    + " WHERE status = new.status AND intent = new.intent; "
    "INSERT INTO counts SELECT new.status, new.intent, 1, new.size, "
    + seal_sql("new.status", "new.intent", "1", "new.size")
    + " WHERE NOT EXISTS (SELECT 1 FROM counts "
    "WHERE status = new.status AND intent = new.intent);"
)
UNCOUNT_OLD: Final = (
    "UPDATE counts SET records = records - 1, bytes = bytes - old.size, seal = "
    + seal_sql("status", "intent", "records - 1", "bytes - old.size")
    + " WHERE status = old.status AND intent = old.intent;"
)
RECORDS: Final = f"CREATE TABLE IF NOT EXISTS records {TABLE}"
RECORDS_INDEXES: Final = (
    # With ``id`` last, a hash lookup reads its answer, newest first, from the
    # index alone.
    "CREATE INDEX IF NOT EXISTS records_by_hash_id "
    "ON records (envelope_hash, replayable, created_us, id)",
    "CREATE INDEX IF NOT EXISTS records_by_created ON records (created_us, id)",
    "CREATE INDEX IF NOT EXISTS records_by_intent ON records (intent, created_us)",
    "CREATE INDEX IF NOT EXISTS records_by_status ON records (status, created_us)",
    "CREATE INDEX IF NOT EXISTS records_by_replayable "
    "ON records (replayable, created_us)",
)
COUNTS: Final = (
    "CREATE TABLE IF NOT EXISTS counts (status TEXT NOT NULL, intent TEXT NOT NULL, "
    "records INTEGER NOT NULL, bytes INTEGER NOT NULL, seal INTEGER NOT NULL, "
    "PRIMARY KEY (status, intent)) WITHOUT ROWID"
)
#: The triggers keeping ``counts`` and the usage totals as ``records`` changes.
RECORDS_TRIGGERS: Final = (
    "CREATE TRIGGER IF NOT EXISTS records_counted AFTER INSERT ON records BEGIN "
    f"{COUNT_NEW} END",
    "CREATE TRIGGER IF NOT EXISTS records_recounted AFTER UPDATE ON records BEGIN "
    f"{UNCOUNT_OLD} {COUNT_NEW} END",
    "CREATE TRIGGER IF NOT EXISTS records_uncounted AFTER DELETE ON records BEGIN "
    f"{UNCOUNT_OLD} END",
    *catalog_usage.TRIGGERS,
)
DDL: Final = (
    RECORDS,
    f"CREATE TABLE IF NOT EXISTS live {TABLE} WITHOUT ROWID",
    *RECORDS_INDEXES,
    COUNTS,
    *RECORDS_TRIGGERS,
    *catalog_steps.DDL,
    *catalog_usage.TABLE,
)
META: Final = "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)"
#: Every table, index and trigger the schema makes, by name, as SQLite keeps its
#: statement (without ``IF NOT EXISTS``): a schema that differs is damaged.
SCHEMA: Final = {
    statement.split()[5]: statement.replace(" IF NOT EXISTS", "")
    for statement in (META, *DDL)
}
# Rows only move forward: a row describing fewer lines never replaces one
# describing more (records are append-only), so a slow reindex cannot undo a
# writer's newer update. A row that moves forward is replaced whole, seal and
# all (its other columns come from the same header).
UPSERT: Final = (
    f"INSERT INTO records ({COLUMNS}, seal) VALUES ({PARAMS}) "
    "ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in [*NAMES[1:], "seal"])
    + " WHERE excluded.lines >= records.lines"
)
ADD_LIVE: Final = f"INSERT OR REPLACE INTO live VALUES ({PARAMS})"
# A logged row of an opened record, unless the record's row is there already.
ADD_OPENED: Final = (
    f"INSERT OR IGNORE INTO live SELECT {PARAMS} "
    "WHERE NOT EXISTS (SELECT 1 FROM records WHERE id = ?1)"
)
DROP_LIVE: Final = "DELETE FROM live WHERE id = ?"
#: The temporary table of a rebuild's rows (see :meth:`Catalog.start_rebuild`).
STAGED: Final = "rebuilt"
STAGE: Final = f"INSERT INTO temp.{STAGED} VALUES ({PARAMS})"
# Rows of records a rebuild did not read.
UNSEEN: Final = (
    "SELECT id FROM records AS r WHERE NOT EXISTS "
    f"(SELECT 1 FROM temp.{STAGED} AS s WHERE s.id = r.id)"
)
# Those, and rows that moved forward since the rebuild read their files.
MERGE: Final = (
    f"INSERT INTO temp.{STAGED} SELECT * FROM records WHERE true "
    "ON CONFLICT (id) DO UPDATE SET "
    + ", ".join(f"{name} = excluded.{name}" for name in [*NAMES[1:], "seal"])
    + f" WHERE excluded.lines > {STAGED}.lines"
)
ANY_LIVE: Final = "SELECT 1 FROM live LIMIT 1"
DROP: Final = "DELETE FROM records WHERE id = ?"
COMPLETE: Final = "INSERT OR REPLACE INTO meta VALUES ('complete', '1')"
ORDER: Final = " ORDER BY created_us DESC, id DESC"
UNFINISHED: Final = "in_progress"
#: Ids of rows of settled records, in id order, a page after a given id.
SETTLED_IDS: Final = (
    "SELECT id FROM records WHERE id > ? AND status != 'in_progress' "
    "ORDER BY id LIMIT ?"
)
#: Ids asked in one query of :meth:`Catalog.rows` (SQLite allows 32,766).
IDS_A_QUERY: Final = 500
