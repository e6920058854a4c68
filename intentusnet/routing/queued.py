"""Queued executions: submitted asynchronously, started when their turn comes.

An asynchronous submit (``Prefer: respond-async``; ``ExecutionOptions(opened=)``)
of an intent on a queue is not run by the call that submitted it: once its
record is open (the caller answered), the router notes it in the store's list
of queued executions (``QueueStore.enqueue_execution``), writes
``EXECUTION_QUEUED`` (its queue, priority and tenant) and closes the record
unfinished; it reads ``queued`` and the routing call raises
:class:`ExecutionQueued` (the caller was answered when the record opened).

Every router that declares the queue, on a store that keeps the list, runs a
:class:`QueuedStarter`: a thread that takes the first queued executions of
its queues (by priority, then age; those a live process holds are left out)
by holding their records (``hold_record``, the owner lock), before reading
any, so one router starts each and the others pass on to the next, and
starts each, on a thread of its own, as a resume of its record under that
hold (``durable.resume(held=)``), which waits for its queue's turn like any
execution. The entry is removed once that execution has ended, before the
hold goes, so no router finds an ended one unheld; a router killed while
running it leaves the entry, and the next router to take it resumes the
chain from its newest record. At most ``per_worker`` (else ``concurrency``,
else 8) are started at a time per router and queue.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from ..errors import IntentusNetError, RecordNotFound, ResumeRefused
from ..store.durable import DurableStore, RecordHold
from ..store.queues import QueueStore

if TYPE_CHECKING:
    import logging

__all__ = ["PICK_S", "ExecutionQueued", "QueuedStarter"]

#: How often a router looks for queued executions when it found none, in seconds.
PICK_S: Final = 0.05
#: Started at a time per router and queue when the queue sets no limit.
DEFAULT_STARTED: Final = 8


def _log() -> logging.Logger:
    """The ``intentusnet.queues`` logger, imported once there is a failure to say."""
    import logging

    return logging.getLogger("intentusnet.queues")


class ExecutionQueued(BaseException):
    """An asynchronous submit was queued in the store: no agent ran here.

    A ``BaseException`` (as ``GeneratorExit``): the router closes the record
    unfinished, as for an interrupted call, and its caller, answered when the
    record opened, lets it go. Added in 0.1.0.
    """

    def __init__(self, execution_id: str, queue: str) -> None:
        self.execution_id = execution_id
        self.queue = queue
        super().__init__(f"execution {execution_id} waits in queue {queue!r}")


@dataclass(frozen=True, slots=True)
class QueuedHold:
    """A queued execution's record, held by the router that starts it."""

    execution_id: str
    hold: RecordHold


class StartingStore(QueueStore, DurableStore, Protocol):
    """A store keeping queued executions whose records a router can hold."""


class QueuedStarter:
    """Starts a router's queued executions, from the store.

    Args:
        store: the store keeping the list of queued executions.
        resume: resumes a held execution (the router's ``resume``, with the
            hold taken here; it waits for the queue's turn).
        limits: how many to start at a time, by queue name (read each pass).
    """

    def __init__(
        self,
        store: StartingStore,
        resume: Callable[[str, RecordHold], object],
        limits: Callable[[], Mapping[str, int]],
    ) -> None:
        self._store = store
        self._resume = resume
        self._limits = limits
        self._started: dict[str, set[str]] = {}
        self._refused: set[str] = set()
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._pid = 0

    def start(self) -> None:
        """Start the thread (again in a forked child); idempotent."""
        if self._pid == os.getpid():
            return
        with self._lock:
            if self._pid == os.getpid() or self._stop.is_set():
                return
            self._pid = os.getpid()
            self._started = {}
        threading.Thread(
            target=self._run, name="intentusnet-queued", daemon=True
        ).start()

    def wake(self) -> None:
        """Look now: an execution was just queued."""
        self._wake.set()

    def close(self) -> None:
        """Stop looking (executions started run on)."""
        self._stop.set()
        self._wake.set()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                started = self._pass()
            except IntentusNetError as exc:  # the store is away: looked again
                _log().warning("queued executions: %s", exc)
                started = 0
            except Exception:  # a bug of ours: said, and the thread goes on
                _log().exception("queued executions: starting them failed")
                started = 0
            if not started:
                self._wake.wait(PICK_S)
                self._wake.clear()

    def _pass(self) -> int:
        """Take and start what there is room for; how many were started."""
        count = 0
        for queue, limit in self._limits().items():
            with self._lock:
                started = self._started.setdefault(queue, set())
                room = limit - len(started)
                if room <= 0:
                    continue
                skip = started | self._refused
            for hold in self._take(queue, room, skip):
                with self._lock:
                    started.add(hold.execution_id)
                threading.Thread(
                    target=self._start_one,
                    args=(queue, hold),
                    name="intentusnet-queued-run",
                    daemon=True,
                ).start()
                count += 1
        return count

    def _take(self, queue: str, room: int, skip: set[str]) -> list[QueuedHold]:
        """Hold up to ``room`` of the first queued executions no one holds.

        Held here, before any is read, so each is started by one router: the
        others leave it out of their lists, or find it held and pass on.
        """
        taken: list[QueuedHold] = []
        try:
            for execution_id in self._store.queued_executions(queue, room + len(skip)):
                if execution_id in skip:
                    continue
                try:
                    hold = self._store.hold_record(execution_id)
                except RecordNotFound:  # deleted meanwhile: nothing to start
                    self._store.dequeue_execution(queue, execution_id)
                    continue
                if hold is None:  # another router took it first
                    continue
                taken.append(QueuedHold(execution_id, hold))
                if len(taken) >= room:
                    break
        except BaseException:  # the store went away: none is kept from the others
            for held in taken:
                held.hold.release()
            raise
        return taken

    def _start_one(self, queue: str, held: QueuedHold) -> None:
        """Resume one held queued execution to its end; then drop its entry.

        The entry goes before the hold, so no router finds it unheld once
        its execution ended.
        """
        execution_id = held.execution_id
        try:
            if self._ran(execution_id, held.hold):
                self._store.dequeue_execution(queue, execution_id)
        except IntentusNetError as exc:  # its resume link says it started
            _log().warning("queued execution %s: %s", execution_id, exc)
        finally:
            held.hold.release()
            with self._lock:
                self._started.get(queue, set()).discard(execution_id)
            self._wake.set()

    def _ran(self, execution_id: str, hold: RecordHold) -> bool:
        """Resume it under ``hold``; whether its entry is done with."""
        try:
            self._resume(execution_id, hold)
        except ResumeRefused as refused:
            if refused.reason == "owned":
                return False  # its newest record is another router's
            if refused.reason != "complete":  # it cannot run here: say so once
                _log().warning("queued execution %s: %s", execution_id, refused)
                with self._lock:
                    self._refused.add(execution_id)
                return False
        except IntentusNetError as exc:  # the store is away: taken again later
            _log().warning("queued execution %s: %s", execution_id, exc)
            return False
        return True
