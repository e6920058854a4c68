"""The catalog: one SQLite row per record, so lookups need not read files.

The catalog is derived data: the record files are the truth, and
``FileExecutionStore.reindex()`` rebuilds the catalog from them. It lives at
``<root>/catalog.sqlite3`` (see ``sqlite.Database``: WAL, busy timeout, one
connection per process, corruption recovery), so several processes can share
one store.

Two tables hold the rows. ``live`` holds the rows of records still being
written (see ``catalog_writer``): a small table without secondary indexes.
When a record completes, its row moves to ``records``, which is indexed for
hash lookups and listings. ``counts`` holds records and bytes per status and intent of
``records``, kept by triggers in the same transactions, so counting a large
store reads a few rows.

Every row carries a checksum of its values (``seal``, see ``catalog_seal``),
written with it (the rows of ``counts``, kept by triggers, are sealed in SQL).
Every row read back is checked against it, a listing's order as well, and a
whole listing's length against ``counts``: a flipped bit in the file is found
(``DatabaseCorrupt``), never answered from.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from ..rows import CatalogRow
from ..step_index import StepRef, StepRow
from ..usage import UsageTotal
from . import catalog_sql as _sql
from . import catalog_steps, catalog_usage
from .catalog_seal import SEAL_FUNCTION, DamagedRow, crc, parts_seal, row_seal, seal_sql
from .catalog_sql import CATALOG_SCHEMA as CATALOG_SCHEMA

# A record's writer builds CatalogRow; only a Catalog needs the database, so
# sqlite3 loads when the first Catalog is made.
if TYPE_CHECKING:
    import sqlite3


#: A row's values and its seal, as written (see :func:`sealed_values`).
SealedRow = tuple[object, ...]


class Catalog:
    """The SQLite index of one store; every method is one short transaction.

    Reads raise ``DatabaseCorrupt`` (see ``sqlite``) when a row does not match
    its seal, a listing is out of order or shorter than ``counts`` says.
    """

    def __init__(
        self,
        path: Path,
        *,
        is_empty: Callable[[], bool] = lambda: False,
    ) -> None:
        from .sqlite import Database

        self.path = path
        self._is_empty = is_empty
        self._complete = False
        self._db = Database(
            path,
            self._setup,
            ready=self._ready,
            functions={SEAL_FUNCTION: crc},
            on_reset=self._forget_complete,
        )

    @property
    def read_only(self) -> bool:
        """Whether this process may not write the catalog (nor make one)."""
        from .sqlite import may_write

        return not may_write(self.path)

    # -- writes -------------------------------------------------------------------

    def add_live(self, row: CatalogRow) -> None:
        """Record that a record is opening (one small commit)."""
        self._db.run(lambda db: db.execute(_sql.ADD_LIVE, sealed_values(row)))

    def upsert_many(
        self,
        rows: Sequence[CatalogRow],
        *,
        opened: Sequence[CatalogRow] = (),
        steps: Sequence[StepRow] = (),
    ) -> None:
        """Upsert rows into ``records`` (leaving ``live``), in one transaction.

        ``opened`` rows, of records still being written, are added to ``live``
        in the same transaction, except records already indexed (rows copied
        from a log of opened records may be older than the row the record has
        by now; they never replace it), and ``steps`` to the step index.
        """

        def run(db: sqlite3.Connection) -> None:
            # sqlite3 binds plain tuples faster than named ones (about 2 us a
            # row here), and "live" is usually empty: most records complete
            # within their batch and never enter it.
            if rows:
                db.executemany(_sql.UPSERT, map(sealed_values, rows))
                if db.execute(_sql.ANY_LIVE).fetchone() is not None:
                    db.executemany(_sql.DROP_LIVE, [(row.id,) for row in rows])
            if opened:
                db.executemany(_sql.ADD_OPENED, map(sealed_values, opened))
            if steps:
                catalog_steps.add(db, steps)

        if rows or opened or steps:
            self._db.transaction(run)

    def remove(self, ids: Sequence[str]) -> None:
        """Forget records (their files were deleted, or never made)."""
        keys = [(i,) for i in ids]

        def run(db: sqlite3.Connection) -> None:
            db.executemany(_sql.DROP, keys)
            db.executemany(_sql.DROP_LIVE, keys)
            catalog_steps.drop(db, ids)

        if keys:
            self._db.transaction(run)

    # -- rebuilding ---------------------------------------------------------------

    def start_rebuild(self) -> None:
        """Begin gathering the rows of a rebuild apart from ``records``.

        They go to a temporary table of this process's connection (SQLite's own
        file, removed when the connection closes, by a killed process too),
        without indexes or triggers: until :meth:`finish_rebuild`, ``records``
        stays as it is, so a rebuild killed midway leaves the catalog usable.
        """

        def run(db: sqlite3.Connection) -> None:
            db.execute(f"DROP TABLE IF EXISTS temp.{_sql.STAGED}")
            # Rows appended as read (a key would be kept sorted at every row).
            db.execute(
                f"CREATE TEMP TABLE {_sql.STAGED} (id TEXT NOT NULL, {_sql.FIELDS})"
            )

        self._db.run(run)

    def stage(self, rows: Sequence[SealedRow], steps: Sequence[StepRow] = ()) -> None:
        """Add rows read by a rebuild, and their records' steps to the step index.

        The rows come sealed (:func:`sealed_values`), by the processes that read
        the files.
        """

        def run(db: sqlite3.Connection) -> None:
            db.executemany(_sql.STAGE, rows)
            if steps:
                catalog_steps.add(db, steps)

        self._db.transaction(run)

    def finish_rebuild(self, exists: Callable[[str], bool]) -> None:
        """Replace ``records`` with the staged rows in one transaction; mark complete.

        Rows other processes wrote meanwhile are kept: that of a record the
        rebuild did not read (made since) if ``exists`` says its file is there,
        and one describing more lines than the rebuild read (appended since).
        ``records`` is then made anew and filled in one statement, its indexes
        built over all its rows, ``counts`` and the usage totals derived with
        one grouped query each, and the triggers that keep them made again.
        Other processes read the old rows until the commit (WAL), and wait for
        it to write theirs.
        """

        def run(db: sqlite3.Connection) -> None:
            db.execute(
                f"CREATE UNIQUE INDEX temp.{_sql.STAGED}_id ON {_sql.STAGED} (id)"
            )
            gone = [(i,) for (i,) in db.execute(_sql.UNSEEN) if not exists(i)]
            db.execute(_sql.MERGE)
            db.executemany(f"DELETE FROM temp.{_sql.STAGED} WHERE id = ?", gone)
            db.executemany(_sql.DROP_LIVE, gone)
            catalog_steps.drop(db, [i for (i,) in gone])
            db.execute("DROP TABLE records")  # with its indexes and triggers
            db.execute(_sql.RECORDS)
            db.execute(f"INSERT INTO records SELECT * FROM temp.{_sql.STAGED}")
            db.execute("DELETE FROM counts")
            db.execute(
                "INSERT INTO counts SELECT status, intent, count(*), sum(size), "
                + seal_sql("status", "intent", "count(*)", "sum(size)")
                + " FROM records GROUP BY status, intent"
            )
            catalog_usage.recount(db)
            # Built after the rows and the totals: sorting once costs less than
            # keeping them row by row (and the totals read the table once).
            for statement in (*_sql.RECORDS_INDEXES, *_sql.RECORDS_TRIGGERS):
                db.execute(statement)
            db.execute(
                "DELETE FROM live WHERE EXISTS "
                f"(SELECT 1 FROM temp.{_sql.STAGED} AS s WHERE s.id = live.id)"
            )
            db.execute(_sql.COMPLETE)
            db.execute(f"DROP TABLE temp.{_sql.STAGED}")

        self._db.transaction(run)
        self._complete = True

    def mark_complete(self) -> None:
        """Record that the catalog lists every record file of the store."""
        self._db.run(lambda db: db.execute(_sql.COMPLETE))
        self._complete = True

    def connect(self) -> None:
        """Open (creating if needed) the catalog now rather than on first use."""
        self._db.run(lambda db: None)

    def close(self) -> None:
        """Close this process's connection (it reopens on next use)."""
        self._db.close()

    # -- reads --------------------------------------------------------------------

    def is_complete(self) -> bool:
        """Whether the catalog was built from all files (False after it was lost)."""
        if not self._complete:
            found = self._db.run(
                lambda db: db.execute(
                    "SELECT value FROM meta WHERE key = 'complete'"
                ).fetchone()
            )
            self._complete = found is not None and found[0] == "1"
        return self._complete

    def get(self, execution_id: str) -> CatalogRow | None:
        """Return one record's row, from either table."""

        def run(db: sqlite3.Connection) -> CatalogRow | None:
            for table in ("records", "live"):
                found = db.execute(
                    f"SELECT {_sql.COLUMNS}, seal FROM {table} WHERE id = ?",
                    (execution_id,),
                ).fetchone()
                if found is not None:
                    return _checked(found)
            return None

        return self._db.run(run)

    def rows(self, ids: Sequence[str]) -> dict[str, CatalogRow]:
        """The ``records`` rows of ``ids`` that exist, by id, in one snapshot.

        Asked by primary key, a few hundred ids a query; each row is read whole
        and checked against its seal.
        """

        def run(db: sqlite3.Connection) -> dict[str, CatalogRow]:
            found: dict[str, CatalogRow] = {}
            for start in range(0, len(ids), _sql.IDS_A_QUERY):
                part = ids[start : start + _sql.IDS_A_QUERY]
                marks = ", ".join("?" * len(part))
                sql = f"SELECT {_sql.COLUMNS}, seal FROM records WHERE id IN ({marks})"
                for values in db.execute(sql, part):
                    row = _checked(values)
                    found[row.id] = row
            return found

        return self._db.read(run)

    def settled_ids(self, after: str, limit: int) -> list[str]:
        """Ids of settled records' rows after ``after``, in id order (a page)."""
        found = self._db.run(
            lambda db: db.execute(_sql.SETTLED_IDS, (after, limit)).fetchall()
        )
        return [str(execution_id) for (execution_id,) in found]

    def ids_by_hash(
        self, envelope_hash: str, *, replayable_only: bool, limit: int
    ) -> list[tuple[str, bool]]:
        """Ids of records with this envelope hash, newest first, then opened ones.

        Each id comes with whether it is in the table of opened records (whose
        completion may not be written yet); that small table is unindexed.
        """
        indexed = "SELECT id FROM records WHERE envelope_hash = ?"
        if replayable_only:
            indexed += " AND replayable = 1"
        sql = (
            f"SELECT id, 0 FROM ({indexed}{_sql.ORDER} LIMIT ?) UNION ALL "
            f"SELECT id, 1 FROM (SELECT id, created_us FROM live "
            f"WHERE envelope_hash = ?{_sql.ORDER} LIMIT ?)"
        )
        params = (envelope_hash, limit, envelope_hash, limit)
        found = self._db.run(lambda db: db.execute(sql, params).fetchall())
        return [(i, bool(live)) for i, live in found]

    def query(
        self,
        *,
        intent: str | None = None,
        statuses: Sequence[str] = (),
        since_us: int | None = None,
        before_us: int | None = None,
        limit: int | None = None,
        live: bool = False,
        replayable: bool | None = None,
        id_prefix: str | None = None,
        envelope_hash: str | None = None,
        settled: bool = False,
    ) -> list[CatalogRow]:
        """Return rows matching every filter given, newest first.

        ``live=True`` reads the rows of opened, unfinished records instead.
        ``id_prefix`` matches the start of the id;
        ``settled=True`` leaves out rows of unfinished records.
        Every row is checked against its seal and the order against the rows;
        a listing of ``records`` by intent and status only (no time bounds, no
        limit) is also checked to hold as many rows as ``counts`` says, in the
        same snapshot.
        """
        where: list[str] = []
        params: list[object] = []
        if intent is not None:
            where.append("intent = ?")
            params.append(intent)
        if statuses:
            where.append(f"status IN ({', '.join('?' * len(statuses))})")
            params.extend(statuses)
        count_where, count_params = list(where), list(params)
        if since_us is not None:
            where.append("created_us >= ?")
            params.append(since_us)
        if before_us is not None:
            where.append("created_us < ?")
            params.append(before_us)
        if replayable is not None:
            where.append("replayable = ?")
            params.append(int(replayable))
        if id_prefix is not None:
            # Read along the newest-first index, which holds the id: a prefix
            # many ids share ends the scan at once, one no id has costs one
            # pass over that index (and no row: see below).
            where.append("substr(id, 1, ?) = ?")
            params.extend((len(id_prefix), id_prefix))
        if envelope_hash is not None:
            where.append("envelope_hash = ?")
            params.append(envelope_hash)
        if settled:
            where.append("status != ?")
            params.append(_sql.UNFINISHED)
        whole = not live and len(where) == len(count_where) and limit is None
        chosen = f"FROM {'live' if live else 'records'}"
        if where:
            chosen += " WHERE " + " AND ".join(where)
        chosen += _sql.ORDER
        if limit is not None:
            chosen += " LIMIT ?"
            params.append(limit)
        sql = f"SELECT {_sql.COLUMNS}, seal {chosen}"
        if id_prefix is not None and not live:
            # The ids are picked from the index alone; only their rows are read.
            sql = (
                f"SELECT {_sql.COLUMNS}, seal FROM records "
                f"WHERE id IN (SELECT id {chosen}){_sql.ORDER}"
            )

        def run(db: sqlite3.Connection) -> list[CatalogRow]:
            rows = [_checked(values) for values in db.execute(sql, params)]
            _check_order(rows)
            if whole:
                counted = _sealed_counts(db, count_where, count_params)
                expected = sum(records for _s, _i, records, _b in counted)
                if expected != len(rows):
                    raise _corrupt(
                        f"it lists {len(rows)} records where its counts say {expected}"
                    )
            return rows

        return self._db.read(run)

    def usage_totals(self) -> list[UsageTotal]:
        """The LLM usage of ``records`` per provider and model, from its totals."""

        def run(db: sqlite3.Connection) -> list[UsageTotal]:
            try:
                return catalog_usage.totals(db)
            except DamagedRow as exc:
                raise _corrupt(f"{exc} do not match their checksum") from exc

        return self._db.read(run)

    def usage_of(self, ids: Sequence[str]) -> list[tuple[str, str]]:
        """(id, usage) of those of ``ids`` that are completed and carry usage."""
        # By id alone: the primary key answers it (a condition on status would
        # let SQLite walk that index instead).
        return [
            (row.id, row.usage)
            for row in self.rows(ids).values()
            if row.status == "completed" and row.usage is not None
        ]

    def find_steps(
        self,
        envelope_hash: str,
        name: str,
        args_hash: str | None,
        limit: int | None,
    ) -> list[StepRef]:
        """A lookup of the step index (see ``StepIndex.find_steps``), checked."""

        def run(db: sqlite3.Connection) -> list[StepRef]:
            try:
                return catalog_steps.find(db, envelope_hash, name, args_hash, limit)
            except DamagedRow as exc:
                raise _corrupt(str(exc)) from None

        return self._db.read(run)

    def counts(self) -> list[tuple[str, str, int, int]]:
        """Return (status, intent, records, bytes) of ``records``, from ``counts``."""
        return self._db.run(
            lambda db: [row for row in _sealed_counts(db, [], []) if row[2] > 0]
        )

    # -- schema -------------------------------------------------------------------

    @staticmethod
    def _ready(db: sqlite3.Connection) -> bool:
        """Whether the schema is current (reading only: nothing to set up)."""
        schema = dict(db.execute("SELECT name, sql FROM sqlite_master").fetchall())
        if "meta" not in schema:
            return False  # a new file
        if schema["meta"] != _sql.SCHEMA["meta"]:
            raise _corrupt("its schema of meta is not the one made")
        found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if found is None or found[0] != CATALOG_SCHEMA:
            return False  # another layout: dropped and made anew
        wrong = sorted(
            name for name, sql in _sql.SCHEMA.items() if schema.get(name) != sql
        )
        if wrong:
            raise _corrupt(f"its schema of {', '.join(wrong)} is not the one made")
        return True

    def _setup(self, db: sqlite3.Connection, fresh: bool) -> None:
        db.execute(_sql.META)
        found = db.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if found is None or found[0] != CATALOG_SCHEMA:
            # Derived data: another layout is dropped and rebuilt, not migrated.
            for table in ("records", "live", "counts", "steps"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
            db.execute("DELETE FROM meta")
        for statement in _sql.DDL:
            db.execute(statement)
        db.execute(
            "INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (CATALOG_SCHEMA,)
        )
        if fresh and self._is_empty():
            db.execute(_sql.COMPLETE)  # a new catalog of a store without records

    def _forget_complete(self) -> None:
        self._complete = False


def _corrupt(problem: str) -> Exception:
    from .sqlite import DatabaseCorrupt

    return DatabaseCorrupt(f"the catalog is damaged: {problem}")


def sealed_values(row: CatalogRow) -> SealedRow:
    """A row's values as SQLite reads them back, and their seal: what is written."""
    values: tuple[object, ...] = tuple(row)
    duration, replayable = row.duration_ms, row.replayable
    if (duration is not None and type(duration) is not float) or type(
        replayable
    ) is not int:
        # A REAL column reads back a float, an INTEGER one an int: sealed so.
        values = tuple(
            row._replace(
                duration_ms=None if duration is None else float(duration) + 0.0,
                replayable=int(replayable),
            )
        )
    return (*values, row_seal(values))


def _checked(values: Sequence[object]) -> CatalogRow:
    """A row read back (its columns, then its seal), if it matches its seal."""
    if len(values) != 19 or row_seal(values[:18]) != values[18]:
        raise _corrupt(f"a row does not match its checksum ({values[0]!r})")
    return CatalogRow(*values[:18])  # type: ignore[arg-type]


def _check_order(rows: Sequence[CatalogRow]) -> None:
    """Rows listed newest first, each once: an index read wrong shows here."""
    for before, after in itertools.pairwise(rows):
        if (before.created_us, before.id) <= (after.created_us, after.id):
            raise _corrupt("a listing is out of order or repeats a record")


def _sealed_counts(
    db: sqlite3.Connection, where: Sequence[str], params: Sequence[object]
) -> list[tuple[str, str, int, int]]:
    """Rows of ``counts`` matching ``where``, each checked against its seal."""
    sql = "SELECT status, intent, records, bytes, seal FROM counts"
    if where:
        sql += " WHERE " + " AND ".join(where)
    found: list[tuple[str, str, int, int]] = []
    for status, intent, records, size, seal in db.execute(sql, params):
        if parts_seal(status, intent, records, size) != seal:
            raise _corrupt(f"the counts of {status} {intent!r} do not match")
        found.append((status, intent, records, size))
    return found
