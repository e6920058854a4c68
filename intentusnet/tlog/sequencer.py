"""LogSequencer: closed records queued by their writers, appended in batches.

A writer closing a record calls :meth:`LogSequencer.queue` (a list append
under a lock: nothing is written on the routing path). A background thread
appends what is queued as one batch, with one signed checkpoint, when the
oldest queued leaf has waited ``cadence.seconds`` or ``cadence.leaves`` are
queued, whichever comes first.

Nothing is lost for good when a process dies with leaves queued: a leaf is
re-derived from its record. The first time a process's sequencer runs, it
makes a *pending scan*: every record changed since the last finished scan
started (less a margin) that is closed and not a leaf yet is appended. A
finished scan proves every record closed before it started is in the log,
so the next one starts there. ``log backfill`` scans every record.

With witnesses (``publish``), each new checkpoint is then sent to them and
published only when a quorum cosigned it (``publish.publish_checkpoint``);
a checkpoint short of its quorum is sent again ``_RETRY`` seconds later, or
with the next batch, whichever comes first.

Several processes may append to one log: the log's ``flock`` lets one
append at a time, and under it the :class:`~.index.LeafIndex` leaves out a
record already a leaf at the same chain head, so none is appended twice.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Final

from ..errors import (
    LogError,
    RecordIntegrityError,
    RecordNotFound,
    UnsupportedSchemaVersion,
)
from .cadence import DEFAULT_CADENCE, LogCadence
from .index import LeafIndex, LeafLookup
from .leaf import LogLeaf
from .log import TileLog
from .publish import Published

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord

__all__ = ["LogCadence", "LogSequencer", "append_leaves", "log_deletions"]

#: Records changed this long before the last scan started are scanned again:
#: file times are coarse, and clocks of hosts sharing a store differ.
SCAN_MARGIN: Final = 60.0
#: After a failed append (a full disk), wait this long before trying again.
_RETRY: Final = 5.0


#: A store's pending scan, given two times (seconds since the epoch): the
#: leaves of the records closed and last changed at or after the first and
#: before the second, in the order they closed, and the time the next scan may
#: start from (the second, or earlier: the last change of the oldest record
#: found still open, which may close without its writer queuing it, if that
#: writer is killed).
PendingScan = Callable[[float, float], tuple[list[LogLeaf], float]]


def append_leaves(log: TileLog, index: LeafLookup, leaves: Iterable[LogLeaf]) -> int:
    """Append the leaves that are not leaves already, as one batch; the new size.

    A leaf is left out when the index (brought up to the log's size under
    the log's lock) holds the same record at the same chain head, or when
    it comes twice in ``leaves``.
    """
    batch = list(leaves)
    fresh: list[LogLeaf] = []
    start = 0

    def select(size: int) -> list[bytes]:
        nonlocal start
        start = index.catch_up(size)
        seen: set[tuple[str, str]] = set()
        for leaf in batch:
            key = (leaf.execution_id, leaf.indexed_head)
            if key not in seen and not index.holds(*key):
                seen.add(key)
                fresh.append(leaf)
        return [leaf.to_bytes() for leaf in fresh]

    size = log.append((), select=select)
    if fresh:
        index.add(start, fresh)
    return size


class LogSequencer:
    """Appends queued leaves off the caller's thread, in batches (see module doc).

    ``pending`` scans the store for closed records no live writer queued;
    ``since`` is when the store started queuing the leaves of the records it
    closes (default: now): the first scan looks at records changed before.
    ``publish``, when given, has the log's newest checkpoint cosigned and
    published; it is called after each batch appended. ``index`` says which
    records are leaves already (default: the log's :class:`LeafIndex`).
    """

    def __init__(
        self,
        log: TileLog,
        cadence: LogCadence = DEFAULT_CADENCE,
        pending: PendingScan | None = None,
        since: float | None = None,
        publish: Callable[[], Published] | None = None,
        index: LeafLookup | None = None,
    ) -> None:
        if cadence.seconds < 0 or cadence.leaves < 1:
            raise ValueError(f"a log cadence of at least 1 leaf and 0 s: {cadence}")
        self.log: Final = log
        self.index: Final = LeafIndex(log) if index is None else index
        self.cadence: Final = cadence
        self._pending = pending
        self._publish = publish
        # File times lag the clock by up to a tick: a record closed just after
        # this time may seem closed before, and be scanned too (it is then
        # appended once, by whichever comes first).
        self._made = time.time() if since is None else since
        self._reset()
        _ALL.add(self)

    def _reset(self) -> None:
        self._cond = threading.Condition()
        self._queue: list[LogLeaf] = []
        self._first = 0.0  # when the oldest queued leaf was queued
        self._thread: threading.Thread | None = None
        self._busy = False  # the thread is appending a batch
        self._flushing = 0
        self._scanned = self._pending is None
        self._failed_at = 0.0
        self._published = -1  # the size last published (-1: none yet)
        self._unpublished_at = 0.0  # when publishing last fell short

    def queue(self, leaf: LogLeaf) -> None:
        """Queue one closed record's leaf (cheap: called as a record closes)."""
        with self._cond:
            if not self._queue:
                self._first = time.monotonic()
            self._queue.append(leaf)
            if self._thread is None:
                self._start()
            elif len(self._queue) in (1, self.cadence.leaves):
                self._cond.notify_all()

    def flush(self) -> None:
        """Append everything queued now, and wait until it is in the log.

        Raises:
            LogError, LogIntegrityError: the append failed (the leaves stay
                queued, and their records will be scanned again).
        """
        with self._cond:
            self._flushing += 1
            try:
                while self._busy:
                    self._cond.wait()
                batch, self._queue = self._queue, []
                self._busy = bool(batch) or not self._scanned
            finally:
                self._flushing -= 1
        if not self._busy:
            return
        try:
            self._append(batch)
        except BaseException:
            with self._cond:
                self._queue[:0] = batch
            raise
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()

    def append_now(self, leaves: Iterable[LogLeaf]) -> None:
        """Append ``leaves`` after everything queued, and wait until they are in.

        For deletion leaves: a record is deleted only once its deletion is in
        the log.

        Raises:
            LogError, LogIntegrityError: the append failed; ``leaves`` are
                dropped (the caller does not go on), the queued ones kept.
        """
        mine = list(leaves)
        with self._cond:
            if not self._queue:
                self._first = time.monotonic()
            self._queue.extend(mine)
        try:
            self.flush()
        except BaseException:
            dropped = set(mine)
            with self._cond:
                self._queue = [leaf for leaf in self._queue if leaf not in dropped]
            raise

    def close(self) -> None:
        """Append what is queued (best effort: a failure is left to the next scan).

        A checkpoint short of its witnesses' quorum is not sent again until
        the next batch: a closed store's thread stays quiet.
        """
        with contextlib.suppress(LogError):
            self.flush()
        with self._cond:
            self._unpublished_at = 0.0
        self.index.close()

    # -- the thread ------------------------------------------------------------

    def _start(self) -> None:
        thread = threading.Thread(target=self._run, name="intentusnet-log", daemon=True)
        self._thread = thread
        thread.start()

    def _run(self) -> None:
        cond = self._cond
        while True:
            with cond:
                while True:
                    if self._busy:  # a flushing caller is appending
                        cond.wait()
                        continue
                    wait = self._wait()
                    if wait is not None and wait <= 0:
                        break
                    cond.wait(wait)
                batch: list[LogLeaf] = []
                if self._scanned:  # else scan first; the queue waits its turn
                    batch, self._queue = self._queue, []
                self._busy = True
            try:
                self._append(batch)
            except Exception as exc:  # the thread must live on: it is retried
                _logger.warning(
                    "appending to the log %s failed: %s", self.log.path, exc
                )
                with cond:
                    self._queue[:0] = batch
                    self._failed_at = time.monotonic()
            finally:
                with cond:
                    self._busy = False
                    cond.notify_all()

    def _wait(self) -> float | None:
        """How long the thread waits before the next batch (None: until told)."""
        now = time.monotonic()
        if not self._queue and self._scanned:
            if self._unpublished_at:  # try the witnesses again
                return self._unpublished_at + _RETRY - now
            return None
        if self._flushing:
            return None  # the flushing caller appends
        if self._failed_at and now - self._failed_at < _RETRY:
            return _RETRY - (now - self._failed_at)
        if not self._scanned or len(self._queue) >= self.cadence.leaves:
            return 0.0
        return self._first + self.cadence.seconds - now

    def _append(self, batch: list[LogLeaf]) -> None:
        if not self._scanned and self._pending is not None:
            since = self.index.scanned() - SCAN_MARGIN
            # Records closed since this sequencer was made are queued here,
            # or by a live process; those of a process that dies later are
            # left to the next scan, which starts from the mark set below.
            earlier, until = self._pending(since, self._made)
            append_leaves(self.log, self.index, [*earlier, *batch])
            self.index.mark_scanned(until)
            self._scanned = True
        elif batch:
            append_leaves(self.log, self.index, batch)
        if self._publish is not None:
            self._publish_newest(self._publish)

    def _publish_newest(self, publish: Callable[[], Published]) -> None:
        """Have the newest checkpoint cosigned and published, unless it is already."""
        if self.log.size in (0, self._published):
            self._unpublished_at = 0.0
            return
        try:
            outcome = publish()
        except LogError as exc:  # a damaged log: the audit names it
            _logger.warning("publishing the log %s failed: %s", self.log.path, exc)
            self._unpublished_at = time.monotonic()
            return
        if outcome.published:
            self._published, self._unpublished_at = outcome.size, 0.0
            return
        _logger.warning(
            "the checkpoint of %s at size %d is not published: %d cosigned; %s",
            outcome.origin,
            outcome.size,
            outcome.cosigned,
            "; ".join(outcome.problems),
        )
        self._unpublished_at = time.monotonic()


_ALL: Final[weakref.WeakSet[LogSequencer]] = weakref.WeakSet()
_logger: Final = logging.getLogger("intentusnet.log")


def _after_fork() -> None:
    # A child has none of its parent's threads: its sequencers start afresh
    # (their queued leaves are the parent's to append).
    for sequencer in list(_ALL):
        sequencer._reset()
        if isinstance(sequencer.index, LeafIndex):
            sequencer.index._db = None


def _at_exit() -> None:
    for sequencer in list(_ALL):
        sequencer.close()


os.register_at_fork(after_in_child=_after_fork)
atexit.register(_at_exit)


def log_deletions(
    sequencer: LogSequencer,
    load: Callable[[str], ExecutionRecord],
    ids: Iterable[str],
    key_id: str,
) -> None:
    """Append the deletion leaf of each record ``ids`` names, and wait for it.

    A store calls this before it deletes the records. A record that cannot be
    read (damaged) gets none: its absence is then reported ``deleted``, as for
    one removed by hand.

    Raises:
        LogError: the log cannot be appended to (the store deletes nothing).
    """
    leaves = []
    for execution_id in ids:
        try:
            head = load(execution_id).header.chain_head
        except (RecordNotFound, RecordIntegrityError, UnsupportedSchemaVersion):
            continue
        leaves.append(LogLeaf(execution_id, head, key_id, True))
    if leaves:
        sequencer.append_now(leaves)
