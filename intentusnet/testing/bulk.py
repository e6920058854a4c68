"""Re-running many records against today's code, in worker processes.

:func:`select_ids` selects records (``ListFilters``, then an optional seeded
sample); :func:`rerun_all` sends their ids to ``jobs`` worker processes and
yields one :class:`~intentusnet.testing.verdict.RecordVerdict` per record, in
selection order. Each worker opens the store and builds the application once, then
re-runs the records it is sent (:func:`~intentusnet.testing.verdict.check_record`).
Only ids go out and verdicts come back, a few batches at a time, so memory
stays flat however many records are selected.
"""

from __future__ import annotations

import itertools
import multiprocessing
import os
import random
from collections import deque
from collections.abc import Callable, Collection, Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Final

from ..errors import RerunWorkerError
from ..routing.router import IntentRouter
from ..store.filters import ListFilters
from ..store.naming import open_store
from ..store.protocol import ExecutionStore
from .verdict import RecordVerdict, check_record

__all__ = ["rerun_all", "select_ids"]

#: Records asked of the store at a time.
_PAGE: Final = 1000
#: Records sent to a worker at a time.
_BATCH: Final = 32
#: Batches in flight per worker: enough that a worker never waits for the next.
_AHEAD: Final = 2


def select_ids(
    store: ExecutionStore,
    filters: ListFilters = ListFilters(),
    *,
    sample: int | None = None,
    seed: int = 0,
) -> Iterator[str]:
    """The ids of the records ``filters`` select in ``store``, newest first.

    The store is asked a page at a time, so memory stays flat in the number of
    records; records made after the first page was asked for are left out
    (without ``filters.until``, it is set to that moment). Added in 0.1.0.

    Args:
        store: where the records are.
        filters: what ``store.list()`` selects.
        sample: yield only this many of them, drawn at random (in list order;
            the draw holds ``sample`` ids, not the whole selection).
        seed: the seed of that draw: equal seeds draw equal records.

    Raises:
        ValueError: ``sample`` is below 1.
    """
    if sample is not None and sample < 1:
        raise ValueError(f"sample must be >= 1, not {sample}")
    if filters.until is None:
        filters = replace(filters, until=datetime.now(UTC))
    listed = _listed(store, filters)
    if sample is None:
        return listed
    return _drawn(listed, sample, random.Random(seed))


def _listed(store: ExecutionStore, filters: ListFilters) -> Iterator[str]:
    """Every selected id, asking ``store`` for a page at a time, newest first."""
    left = filters.limit
    until = filters.until
    # ids already yielded that were created at ``edge``, the oldest time seen:
    # the next page starts at that time again and skips them.
    edge, edge_ids = "", set[str]()
    while left is None or left > 0:
        want = _PAGE if left is None else min(_PAGE, left)
        asked = want + len(edge_ids)
        rows = store.list(replace(filters, until=until, limit=asked))
        taken = [r for r in rows if r.execution_id not in edge_ids][:want]
        for row in taken:
            yield row.execution_id
        if len(rows) < asked or not taken:
            return
        if left is not None:
            left -= len(taken)
        oldest = taken[-1].created_utc
        at_oldest = {r.execution_id for r in taken if r.created_utc == oldest}
        edge_ids = edge_ids | at_oldest if oldest == edge else at_oldest
        edge = oldest
        until = datetime.fromisoformat(oldest) + timedelta(microseconds=1)


def _drawn(ids: Iterator[str], sample: int, draw: random.Random) -> Iterator[str]:
    """``sample`` of ``ids`` drawn evenly in one pass (reservoir), in their order."""
    kept: list[tuple[int, str]] = []
    for index, execution_id in enumerate(ids):
        if index < sample:
            kept.append((index, execution_id))
        else:
            slot = draw.randint(0, index)
            if slot < sample:
                kept[slot] = (index, execution_id)
    for _index, execution_id in sorted(kept):
        yield execution_id


def rerun_all(
    store: str | os.PathLike[str],
    app: Callable[[], IntentRouter],
    ids: Iterable[str],
    *,
    jobs: int = 1,
    allowed_hosts: Collection[str] = (),
) -> Iterator[RecordVerdict]:
    """Re-run records ``ids`` of ``store`` strictly with today's application.

    Each of ``jobs`` worker processes (started fresh, not forked) opens the
    store by its name and calls ``app`` once for the router to re-run with;
    ``app`` must be importable by the workers (a module-level function, or a
    ``functools.partial`` of one). Re-runs are recorded in memory only: the
    store is read, never written. See docs/regression.md. Added in 0.1.0.

    Workers are started fresh (``spawn``): they import the caller's main
    module again, so a script calling this keeps its work under ``if __name__
    == "__main__":``.

    Args:
        store: the store's directory or ``postgresql://`` URL.
        app: builds the ``IntentRouter`` with today's agents.
        ids: the records, e.g. from :func:`select_ids`.
        jobs: worker processes.
        allowed_hosts: hosts the re-runs may still connect to (e.g. a
            PostgreSQL store's); every other connection is refused.

    Yields:
        One verdict per record, in the order of ``ids``.

    Raises:
        RerunWorkerError: a worker could not open the store or build the
            router, or ended abruptly.
        ValueError: ``jobs`` is below 1.
    """
    if jobs < 1:
        raise ValueError(f"jobs must be >= 1, not {jobs}")
    batches = _batches(iter(ids))
    first = next(batches, None)
    if first is None:
        return  # nothing to re-run: no worker is started
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=context,
        initializer=_start_worker,
        initargs=(os.fspath(store), app, tuple(allowed_hosts)),
    ) as pool:
        pending: deque[Future[list[RecordVerdict]]] = deque()
        try:
            for batch in itertools.chain([first], batches):
                pending.append(pool.submit(_check_batch, batch))
                if len(pending) >= jobs * _AHEAD:
                    yield from pending.popleft().result()
            while pending:
                yield from pending.popleft().result()
        except BrokenProcessPool as exc:
            raise RerunWorkerError(
                f"a re-run worker process ended abruptly ({exc}); note that a "
                "script calling rerun_all keeps its work under "
                "if __name__ == '__main__'"
            ) from exc


def _batches(ids: Iterator[str]) -> Iterator[list[str]]:
    batch: list[str] = []
    for execution_id in ids:
        batch.append(execution_id)
        if len(batch) == _BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


class _Worker:
    """What a worker process re-runs with: set once, when the process starts."""

    store: ExecutionStore | None = None
    router: IntentRouter | None = None
    allowed_hosts: tuple[str, ...] = ()
    failure: str | None = None


def _start_worker(
    store: str, app: Callable[[], IntentRouter], allowed_hosts: tuple[str, ...]
) -> None:
    _Worker.allowed_hosts = allowed_hosts
    try:
        _Worker.store = open_store(store, create=False)
        _Worker.router = app()
    except Exception as exc:  # reported with the first batch, in the parent
        _Worker.failure = str(exc) or type(exc).__name__


def _check_batch(ids: list[str]) -> list[RecordVerdict]:
    if _Worker.failure is not None or _Worker.store is None or _Worker.router is None:
        raise RerunWorkerError(f"a re-run worker could not start: {_Worker.failure}")
    store, router = _Worker.store, _Worker.router
    return [
        check_record(store, i, router, allowed_hosts=_Worker.allowed_hosts) for i in ids
    ]
