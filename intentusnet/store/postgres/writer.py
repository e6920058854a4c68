"""Writing records to PostgreSQL: a record's lines, one row each.

:func:`open_record` takes the record's session advisory lock and writes its
header row and catalog row, in one statement; :class:`PostgresRecordWriter`
appends the rest, one statement (and commit) per write, keeping the catalog row
current in the same statement. A routed intent with one agent is three: the
opening, the lines up to the agent's start, and the rest with the outcome.
:func:`import_record` stores a finished record's bytes as they are,
:func:`append_invalidated` adds an ``INVALIDATED`` line. The lock is released
by the statement that completes the record, by ``close``, or by PostgreSQL
when the writer's connection ends.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Final

from ..._util.jsonvalue import JSONObject
from ..._util.time import utc_now
from ...errors import RecordExists, StoreError
from ...record.format import header_line
from ...record.keys import SigningKey
from ...record.model import ExecutionRecord
from ...record.reader import parse_record
from ...record.signing import invalidated, invalidated_lines
from ..ids import new_record_id
from ..owner import current_owner
from ..rows import row_for
from ..step_index import ended_steps, indexed
from ..writer import ChainWriter, wire_object
from . import steps
from .catalog import COLUMNS, not_running, outcome_of, row_values
from .connection import Connection
from .schema import lock_key

#: The common table expression adding lines to a record: its id, then
#: ``{rows}``, a number and the bytes for each line (see :func:`line_rows`).
#: Scalars, not arrays, for the few lines a writer sends at once: psycopg
#: adapts a list in Python, finding its elements' type on every call, and a
#: number or bytes in C.
_ADDED: Final = """added AS (
        INSERT INTO intentusnet_lines (execution_id, seq, line)
        SELECT %s, s, l FROM (VALUES {rows}) AS u(s, l)
        RETURNING 1)"""
#: Bring the catalog row up to date with the added lines (their size, the new
#: chain head, the record's id); ``{outcome}`` is empty or :data:`OUTCOME`.
_UPDATED: Final = """UPDATE intentusnet_records
        SET lines = lines + (SELECT count(*) FROM added),
            size = size + %s, chain_head = %s {outcome}
        WHERE execution_id = %s RETURNING lines"""
#: Append lines to a record and bring its catalog row up to date, in one
#: statement (``{rows}`` and ``{outcome}`` as above).
APPEND: Final = f"WITH {_ADDED} {_UPDATED}"
OUTCOME: Final = ", status = %s, replayable = %s, reason = %s, agent = %s, " \
    "duration_ms = %s"  # fmt: skip
#: Open a record: take its writer's lock and, only once it is taken, insert its
#: catalog row and header line; one row, ``(locked, opened)``. The lock comes
#: before the commit that shows the row, so no reader sees the row unlocked.
_OPEN: Final = f"""WITH lock AS MATERIALIZED (
        SELECT pg_try_advisory_lock(%s) AS held),
    row AS (INSERT INTO intentusnet_records ({COLUMNS}, lock_key)
        SELECT %s, %s, %s, %s, %s, %s, 'in_progress', false,
            'execution_incomplete', NULL, NULL, %s, NULL, 1, %s, %s, %s
        FROM lock WHERE held
        ON CONFLICT DO NOTHING RETURNING execution_id),
    header AS (INSERT INTO intentusnet_lines (execution_id, seq, line)
        SELECT execution_id, 0, %s FROM row RETURNING seq)
    SELECT held, EXISTS (SELECT 1 FROM header) FROM lock"""
#: :data:`APPEND` with the outcome, releasing the writer's lock: the lock is
#: taken again for the statement's transaction (a session's own lock always
#: is), so it stays held until the commit that shows the row completed, though
#: the session's hold ends here. ``{outcome}`` is :data:`OUTCOME`; then the
#: lock key, twice.
COMPLETE: Final = f"""WITH {_ADDED}, updated AS ({_UPDATED}),
    kept AS MATERIALIZED (SELECT pg_try_advisory_xact_lock(%s))
    SELECT lines, pg_advisory_unlock(%s) FROM updated, kept"""
#: Import a whole record: its lines as two arrays (a record may have more lines
#: than a statement takes parameters), sent in binary (``%b``), which psycopg
#: adapts faster than their text form.
_IMPORT: Final = f"""WITH row AS (INSERT INTO intentusnet_records ({COLUMNS}, lock_key)
        VALUES ({", ".join(["%s"] * 17)})
        ON CONFLICT DO NOTHING RETURNING execution_id)
    INSERT INTO intentusnet_lines (execution_id, seq, line)
    SELECT execution_id, s, l
    FROM row, unnest(%b::integer[], %b::bytea[]) AS u(s, l)
    RETURNING seq"""


def line_rows(first: int, lines: list[bytes]) -> tuple[str, list[object]]:
    """``{rows}`` of :data:`APPEND` for ``lines`` numbered from ``first``; values."""
    values: list[object] = []
    for seq, line in enumerate(lines, first):
        values += (seq, line)
    return ", ".join(["(%s::integer, %s::bytea)"] * len(lines)), values


def lock_record(db: Connection, execution_id: str, writing: set[str]) -> bool:
    """Take the record's writer lock; False if a writer (any session) holds it.

    ``writing`` holds the ids this store's own writers have open: session
    locks are re-entrant, so the lock alone does not see them.
    """
    key = lock_key(execution_id)
    with db.lock:
        (taken,) = db.run("SELECT pg_try_advisory_lock(%s)", [key])[0]
        if taken and execution_id in writing:
            unlock(db, execution_id)  # session locks count: undo this one
            return False
        return bool(taken)


def unlock(db: Connection, execution_id: str) -> None:
    """Release the record's writer lock (gone anyway if the connection is)."""
    with contextlib.suppress(StoreError):
        db.run("SELECT pg_advisory_unlock(%s)", [lock_key(execution_id)])


def open_record(
    db: Connection,
    writing: set[str],
    envelope: JSONObject,
    *,
    envelope_hash: str,
    execution_id: str | None,
    parent_execution_id: str | None,
    signer: SigningKey | None = None,
    configuration: JSONObject | None = None,
) -> PostgresRecordWriter:
    """Lock a new record, write its header and catalog rows; return its writer.

    With a ``signer``, line 1 names its key and the writer signs on closing.

    Raises:
        InvalidExecutionId: a given id is not allowed (nothing was sent).
        RecordExists: a record with this id exists or is being written.
        StoreError: the database could not be reached or written.
    """
    execution_id = new_record_id(execution_id, parent_execution_id)
    created_utc, created_us = utc_now()
    try:
        wire = wire_object(envelope)
        header, digest = header_line(
            execution_id=execution_id,
            created_utc=created_utc,
            envelope_hash=envelope_hash,
            envelope=wire,
            parent_execution_id=parent_execution_id,
            owner=current_owner(),
            key_id=None if signer is None else signer.key_id,
            configuration=configuration,
        )
    except TypeError as exc:
        raise StoreError(f"record {execution_id}: envelope is not JSON") from exc
    intent = wire.get("intent")
    intent_d = intent if isinstance(intent, dict) else {}
    name, version = intent_d.get("name"), intent_d.get("version", "1.0")
    key = lock_key(execution_id)
    values = [
        key,
        execution_id,
        created_us,
        created_utc,
        name if isinstance(name, str) else "",
        version if isinstance(version, str) else "1.0",
        envelope_hash,
        parent_execution_id,
        len(header),
        digest,
        key,
        header,
    ]
    with db.lock:
        # Session locks are re-entrant: one of ours would be taken again.
        if execution_id in writing:
            raise RecordExists(f"record {execution_id} already exists")
        try:
            ((locked, opened),) = db.run(
                _OPEN, values, doing=f"record {execution_id}: could not open"
            )
        except BaseException:
            unlock(db, execution_id)  # if the statement took it before failing
            raise
        if not opened:
            if locked:
                unlock(db, execution_id)
            raise RecordExists(f"record {execution_id} already exists")
        writing.add(execution_id)
        writer = PostgresRecordWriter(
            db, writing, execution_id, digest, len(header), signer
        )
        writer.index_steps = isinstance(name, str) and indexed(name)
        return writer


def import_record(db: Connection, execution_id: str, data: bytes) -> ExecutionRecord:
    """Store a sound record's bytes as they are, one row per line; return it.

    Raises:
        RecordIntegrityError, UnsupportedSchemaVersion: not a sound record.
        RecordExists: a record with this id exists.
    """
    data = data[: data.rfind(b"\n") + 1]  # a torn last line is not a line
    record = parse_record(data, execution_id, not_running)
    lines = [part + b"\n" for part in data.split(b"\n")[:-1]]
    row = row_values(row_for(record.header, len(lines), len(data)))
    added = db.run(
        _IMPORT,
        [*row, lock_key(execution_id), list(range(len(lines))), lines],
        doing=f"record {execution_id}: could not import",
    )
    if not added:
        raise RecordExists(f"record {execution_id} already exists")
    # Its own statement: the record's row is not visible to the one adding it.
    steps.add(db, execution_id, ended_steps(record))
    return record


def append_invalidated(
    db: Connection,
    execution_id: str,
    data: bytes,
    reason: str,
    signer: SigningKey | None = None,
) -> None:
    """Append ``INVALIDATED`` to a record's ``data``; the caller holds its lock.

    A signed record's line is signed by ``signer``, in the same statement. A
    record invalidated already is left as it is: its first reason stands.

    Raises:
        SigningKeyError: the record is signed and there is no ``signer``.
    """
    record = parse_record(data, execution_id, not_running)
    if invalidated(record):
        return
    line = invalidated_lines(record, reason, utc_now()[1], signer)
    lines = [part + b"\n" for part in line.split(b"\n")[:-1]]
    rows, values = line_rows(len(record.events) + 1, lines)
    db.run(
        APPEND.format(rows=rows, outcome=OUTCOME),
        [
            execution_id,
            *values,
            len(line),
            "sha256:" + line[-67:-3].decode(),
            *outcome_of(parse_record(data + line, execution_id, not_running)),
            execution_id,
        ],
        doing=f"record {execution_id}: could not invalidate",
    )


class PostgresRecordWriter(ChainWriter):
    """Appends the lines of one record, one statement (and commit) per write.

    Made by :meth:`PostgresExecutionStore.open`; it holds the record's advisory
    lock on the store's connection. If that connection is lost, the lock went
    with it: every later write raises :class:`StoreError`.
    """

    def __init__(
        self,
        db: Connection,
        writing: set[str],
        execution_id: str,
        header_hash: str,
        size: int,
        signer: SigningKey | None = None,
    ) -> None:
        super().__init__(execution_id, header_hash, size, signer)
        self._db = db
        self._session = db.session()
        self._writing = writing
        self._rows = 1  # the header is row 0
        self._final: JSONObject | None = None
        self._indexed = 0  # ended steps in the step index
        #: called with the id and final chain head once the record is closed
        #: (the store's transparency log queues its leaf; added in 0.1.0)
        self.on_closed: Callable[[str, str], None] | None = None

    def complete(self, response: JSONObject, *, fingerprint: str | None = None) -> None:
        """Append ``FINAL_RESPONSE`` and the catalog's outcome in one statement."""
        with contextlib.suppress(TypeError):  # ChainWriter.complete raises for it
            self._final = wire_object(response)
        try:
            super().complete(response, fingerprint=fingerprint)
        finally:
            self._final = None

    def _emit(self, line: bytes) -> None:
        lines = [part + b"\n" for part in line.split(b"\n")[:-1]]
        rows, values = line_rows(self._rows, lines)
        head = "sha256:" + lines[-1][-67:-3].decode()
        params: list[object] = [self.execution_id, *values, len(line), head]
        if self._final is None:
            sql = APPEND.format(rows=rows, outcome="")
            params.append(self.execution_id)
        else:  # the record is done: its lock goes in the same statement
            sql = COMPLETE.format(rows=rows, outcome=OUTCOME)
            status, replayable, reason, agent, duration = self._outcome(self._final)
            key = lock_key(self.execution_id)
            params += [status, bool(replayable), reason, agent, duration]
            params += [self.execution_id, key, key]
        ended = self.ended_steps[self._indexed :]
        if ended:  # a STEP_END among the lines: indexed in the same statement
            sql = f"WITH {steps.ADD}, {sql.removeprefix('WITH ')}"
            params = [*steps.add_params(self.execution_id, ended), *params]
        with self._db.lock:
            if self._db.session() is not self._session:
                raise StoreError(
                    f"PostgreSQL at {self._db.where}: record {self.execution_id}: the "
                    "connection that opened it was lost, and its lock with it"
                )
            done = self._db.run(
                sql,
                params,
                doing=f"record {self.execution_id}: could not append",
            )
        if not done:
            raise StoreError(f"record {self.execution_id} was deleted")
        self._rows += len(lines)
        self._indexed += len(ended)

    def _finish(self, *, completed: bool) -> None:
        self._writing.discard(self.execution_id)
        if self.on_closed is not None:
            self.on_closed(self.execution_id, self._written[1])
        if completed:
            return  # the statement that completed the record released its lock
        # A StoreError: the connection is gone, and the lock with it.
        with self._db.lock, contextlib.suppress(StoreError):
            if self._db.session() is self._session:
                if self._unfinished_as is not None:  # said before the lock goes
                    self._db.run(
                        "UPDATE intentusnet_records SET status = %s "
                        "WHERE execution_id = %s",
                        [self._unfinished(), self.execution_id],
                    )
                unlock(self._db, self.execution_id)
