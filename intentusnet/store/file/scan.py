"""Reading record files into catalog rows and reports: one file, or the whole store.

Whole-store work (``reindex``, ``verify --all``) goes in chunks of at most
:data:`CHUNK` files of one shard directory, in worker processes for a large
store if asked: each worker reads and checks the files of its chunk and
answers with their catalog rows, or with a tally and the reports worth
showing, so that memory does not grow with the store. Only the calling process
writes the catalog, one transaction a chunk (workers writing would wait for
each other's locks).
"""

from __future__ import annotations

import os
import sqlite3
from collections import deque
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeVar

from ..._util.time import utc_text
from ...errors import RecordIntegrityError, RecordNotFound
from ...record.model import (
    RecordStatus,
    ReplayableReason,
    VerifyReport,
)
from ..owner import opener_alive, owner_alive
from ..rows import CatalogRow, catalog_mismatch, derived_row
from ..step_index import StepKey, StepRow, step_rows
from ..verification import Tally, tally, unjudged
from . import files
from .catalog import Catalog, SealedRow, sealed_values
from .files import headerless, saw_header, verify_file
from .layout import ids_in_shard, relative_path, shards

if TYPE_CHECKING:
    from multiprocessing.pool import AsyncResult

_T = TypeVar("_T")
#: Below about this many records, starting worker processes costs more than
#: they save; the work then runs in the calling process.
PARALLEL_FROM: Final = 20_000
#: Files per piece of whole-store work.
CHUNK: Final = 1000
_FAILED: Final = RecordStatus.RECORDING_FAILURE.value
#: Looks up what the catalog knows of a record (only asked for a file that has
#: no header, which alone cannot say what it was meant to hold).
Lookup = Callable[[str], CatalogRow | None]
#: A record file's catalog row and its ended steps (for the step index).
Indexed = tuple[CatalogRow, list[StepKey]]


def file_row(root: str, execution_id: str, lookup: Lookup) -> Indexed | None:
    """The catalog row of one record file, and its ended steps; None if nothing.

    A damaged record is indexed as ``integrity_failure`` where line 1 can be
    read. A file without a complete first line is a ``recording_failure``
    once the process that created it is gone; until then it is left as the
    catalog has it. A newer format or an unreadable header is logged and left
    out.
    """
    path = f"{root}/{relative_path(execution_id)}"
    try:
        data, inode = _read(path, execution_id)
    except RecordNotFound:
        return None
    return data_row(path, execution_id, data, inode, lookup)


def _read(path: str, execution_id: str) -> tuple[bytes, int]:
    """A record file's bytes and the inode of the file they were read from."""
    fd = files.open_existing(path, execution_id)
    try:
        return files.read_all(fd), os.fstat(fd).st_ino
    finally:
        os.close(fd)


def data_row(
    path: str, execution_id: str, data: bytes, inode: int, lookup: Lookup
) -> Indexed | None:
    """The catalog row of a record file's bytes ``data``, read from ``path``.

    With the ended steps of a sound record (none of a damaged one); ``inode``
    is the file's the bytes came from.
    """
    if headerless(data):
        row = _headerless_row(path, execution_id, len(data), lookup(execution_id))
        return None if row is None else (row, [])
    found = derived_row(data, execution_id, lambda owner: owner_alive(path, owner))
    if found is None:
        return None
    return found[0]._replace(inode=inode), found[1]


def _headerless_row(
    path: str, execution_id: str, size: int, known: CatalogRow | None
) -> CatalogRow | None:
    if opener_alive(path, None if known is None else known.owner_object()):
        return known  # about to write its header
    if known is not None and saw_header(known):
        # The catalog saw this record settled, header and all: its lines were
        # cut since, which is not a process stopped before writing them.
        return known._replace(
            replayable=0, reason=ReplayableReason.INTEGRITY_FAILURE.value
        )
    if known is not None:
        return known._replace(
            status=_FAILED,
            replayable=0,
            reason=ReplayableReason.RECORDING_FAILURE.value,
            lines=0,
            size=size,
            chain_head="",
        )
    try:  # all the file can tell: when it was made
        created_us = os.stat(path).st_mtime_ns // 1000
    except OSError:
        return None
    return CatalogRow(
        execution_id,
        created_us,
        utc_text(created_us),
        "",
        "",
        "",
        _FAILED,
        0,
        ReplayableReason.RECORDING_FAILURE.value,
        None,
        None,
        None,
        None,
        0,
        size,
        "",
    )


# -- whole-store work, a chunk of files at a time -----------------------------------


#: What a rebuild found of one record the catalog remembered otherwise:
#: (execution id, how its file differs).
Changed = tuple[str, str]


def index_chunk(
    catalog: Catalog, root: str, ids: list[str]
) -> tuple[int, list[SealedRow], list[Changed], list[StepRow]]:
    """Read the rows of some record files; return files read, rows, changes, steps.

    The rows come sealed (``catalog.sealed_values``), ready to be written.

    A file whose bytes no longer hold the last line the catalog saw (same
    place, same hash) was changed or cut after it was indexed: its row keeps
    the catalog's line count and chain head and says ``integrity_failure``,
    so that a rebuild never turns a changed record valid, and it is listed
    among the changes. The caller writes the rows: one writer, so that
    workers never wait for each other's locks on the catalog.
    """
    try:
        known = catalog.rows(ids)
    except (sqlite3.Error, OSError):
        known = {}  # nothing to compare with
    rows: list[SealedRow] = []
    changed: list[Changed] = []
    steps: list[StepRow] = []
    for execution_id in ids:
        path = f"{root}/{relative_path(execution_id)}"
        try:
            data, inode = _read(path, execution_id)
        except RecordNotFound:
            continue
        found = data_row(path, execution_id, data, inode, catalog.get)
        row, ended = (None, []) if found is None else found
        seen = known.get(execution_id)
        if seen is not None:
            problem = catalog_mismatch(data, seen.lines, seen.chain_head)
            if problem is not None:
                changed.append((execution_id, problem))
                ended = []  # a changed record points the index nowhere
                if row is not None:
                    row = row._replace(
                        replayable=0,
                        reason=ReplayableReason.INTEGRITY_FAILURE.value,
                        lines=seen.lines,
                        chain_head=seen.chain_head,
                    )
        if row is not None:
            rows.append(sealed_values(row))
            steps += step_rows(row.envelope_hash, row.created_us, row.id, ended)
    return len(ids), rows, changed, steps


def verify_chunk(catalog: Catalog, root: str, ids: list[str], each: bool) -> Tally:
    """Verify some record files; return their tally (see ``verification.tally``)."""
    try:
        rows = catalog.rows(ids)
    except (sqlite3.Error, OSError):
        rows = {}  # no catalog to compare with (say, a read-only store)
    reports: list[VerifyReport] = []
    for execution_id in ids:
        try:
            data = files.read(f"{root}/{relative_path(execution_id)}", execution_id)
        except RecordNotFound:
            continue  # deleted meanwhile
        try:
            reports.append(verify_file(data, execution_id, rows.get(execution_id)))
        except RecordIntegrityError as exc:  # a newer format: cannot be judged
            reports.append(unjudged(execution_id, exc))
    return tally(reports, each)


def rows_without_files(catalog: Catalog, root: str) -> Iterator[Tally]:
    """Tallies of the settled catalog rows whose record file is gone.

    A file deleted outside the store (not by ``delete`` or ``prune``) leaves a
    row claiming a record nobody can load: each is a failing report, a page of
    :data:`CHUNK` rows at a time. ``reindex`` drops such rows.
    """
    after = ""
    while True:
        try:
            ids = catalog.settled_ids(after, CHUNK)
        except (sqlite3.Error, OSError):
            return  # no catalog to compare with (say, a read-only store)
        if not ids:
            return
        after = ids[-1]
        gone = [
            VerifyReport(
                execution_id,
                0,
                0,
                (
                    "no file: the catalog lists this record but its file is gone "
                    "(deleted outside the store); `intentusnet reindex` drops "
                    "the row",
                ),
                valid=False,
            )
            for execution_id in ids
            if not os.path.exists(f"{root}/{relative_path(execution_id)}")
        ]
        if gone:
            yield tally(gone, each=True)


#: Work on some record files: (catalog, root, ids, *args) -> result.
ShardWork = Callable[..., _T]


def over_shards(
    catalog: Catalog,
    root: str,
    work: ShardWork[_T],
    *args: object,
    processes: int = 1,
) -> Iterator[_T]:
    """Yield ``work(catalog, root, ids, *args)`` for every chunk of files, in order.

    Chunks hold at most :data:`CHUNK` ids of one shard directory. With
    ``processes`` above 1 and a store of :data:`PARALLEL_FROM` records or more
    (judged by its first shard), the chunks go to that many worker processes
    (multiprocessing's "forkserver": fresh processes, not forks of this one,
    which may hold other threads' locks), each with its own catalog connection
    and at most two chunks ahead of the consumer, so that results do not pile
    up in memory. Otherwise the work runs here, with ``catalog``.
    """
    found = shards(root)
    chunks = _chunks(root, found)
    path = str(catalog.path)  # the workers open it too
    if processes <= 1 or _estimate(root, found) < PARALLEL_FROM:
        for ids in chunks:
            yield work(catalog, root, ids, *args)
        return
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    with context.Pool(processes) as pool:
        queue: deque[AsyncResult[_T]] = deque()
        for ids in chunks:
            queue.append(pool.apply_async(_in_worker, (work, path, root, ids, *args)))
            if len(queue) >= 2 * processes:
                break
        while queue:
            result = queue.popleft().get()
            following = next(chunks, None)
            if following is not None:
                queue.append(
                    pool.apply_async(_in_worker, (work, path, root, following, *args))
                )
            yield result


def _chunks(root: str, found: list[str]) -> Iterator[list[str]]:
    """The ids of the record files, a shard directory at a time, in chunks."""
    for shard in found:
        ids = ids_in_shard(root, shard)
        for start in range(0, len(ids), CHUNK):
            yield ids[start : start + CHUNK]


def _estimate(root: str, found: list[str]) -> int:
    """Roughly how many records a store holds: its first shard times the shards."""
    if len(found) < 256:
        return len(found)  # ids fill all 256 shards long before 20,000 records
    return len(ids_in_shard(root, found[0])) * len(found)


_WORKER_CATALOGS: dict[str, Catalog] = {}


def _in_worker(
    work: ShardWork[_T], path: str, root: str, ids: list[str], *args: object
) -> _T:
    """Run ``work`` in a worker process, with its connection to the catalog ``path``."""
    catalog = _WORKER_CATALOGS.get(path)
    if catalog is None:
        catalog = _WORKER_CATALOGS[path] = Catalog(Path(path))
    return work(catalog, root, ids, *args)
