"""Queues: how many executions of an intent run at once, and how often they start.

``router.queue("llm", concurrency=8, per_tenant=2, per_worker=4, rate="60/min",
priority=True)`` declares a queue; ``@router.agent(..., queue="llm")`` (or
``router.queue(..., intents=[...])``) puts an intent on it. An execution of a
queued intent opens its record, then waits for its turn before any agent runs:

- a slot of the queue (``concurrency``) and of its tenant's share
  (``per_tenant``, by the envelope's ``context.tenant``), both kept by the store
  (``store/queues.py``), so every router sharing the store counts them;
- a place among this router's running executions of the queue (``per_worker``);
- a token of the queue's bucket (``rate``), also kept by the store.

It holds them until its record is closed. One thread per queue and router
hands turns out: it tries the waiting executions in order (by
``context.priority``, lower first, when the queue has ``priority=True``; else
by arrival), skipping a tenant whose share is full, and asks the store again
at once when this router gives a slot back, or every ``POLL_S`` seconds for
slots given back by other processes. A wait ends at the envelope's
``timeoutMs``: the execution is answered ``QUEUE_TIMEOUT`` and no agent runs.
Child intents (``ctx.route``) run in their parent's turn.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Generator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, TypeVar

from ..errors import IntentusNetError, InvalidQueue, UnknownQueue
from ..record.model import EventType
from ..store.durable import DurableStore, RecordHold
from ..store.queues import QueueSlot, QueueStore
from .strategies import queue_timed_out

if TYPE_CHECKING:
    import asyncio
    import logging

    from ..envelope import AgentResponse, IntentEnvelope
    from ..store.memory.queues import MemoryQueues
    from .execution import Execution
    from .queued import QueuedStarter
    from .seams import ExecutionOptions
    from .strategies import Outcome, Run

__all__ = ["POLL_S", "Queue", "Queues", "Rate", "parse_rate"]

#: How often a waiting router asks the store for a slot, in seconds.
POLL_S: Final = 0.005
_NAME: Final = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_RATE: Final = re.compile(r"(\d+)\s*/\s*(\d*)\s*([a-z]+)")
_UNITS: Final[dict[str, float]] = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hour": 3600.0,
    "d": 86400.0,
    "day": 86400.0,
}


def _log() -> logging.Logger:
    """The ``intentusnet.queues`` logger, imported once there is a failure to say."""
    import logging

    return logging.getLogger("intentusnet.queues")


_T = TypeVar("_T")
_Plan = Generator["Run", "list[Outcome]", "AgentResponse"]


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` starts per ``period`` seconds (a token bucket).

    The bucket holds at most ``count`` tokens and starts full, so up to
    ``count`` executions may start at once, then ``count / period`` a second.
    """

    count: int
    period: float
    text: str

    @property
    def per_second(self) -> float:
        """Tokens the bucket gains a second."""
        return self.count / self.period


def parse_rate(text: str) -> Rate:
    """Read ``COUNT/PERIOD``: ``60/min``, ``100/s``, ``5/2h``, ``1000/day``.

    Units: ``s``, ``sec``, ``second``, ``m``, ``min``, ``minute``, ``h``,
    ``hour``, ``d``, ``day`` (a trailing ``s`` is allowed: ``2/hours``).

    Raises:
        InvalidQueue: it does not read so, or a number is 0.
    """
    if not isinstance(text, str):
        raise InvalidQueue(f"rate is a string such as '60/min', not {text!r}")
    match = _RATE.fullmatch(text.strip().lower())
    unit = match.group(3) if match else ""
    seconds = _UNITS.get(unit, _UNITS.get(unit[:-1], 0.0) if unit.endswith("s") else 0)
    if match is None or not seconds:
        raise InvalidQueue(
            f"rate {text!r} does not read as COUNT/PERIOD "
            "(such as '60/min', '100/s', '5/2h'; units s, min, h, day)"
        )
    count, times = int(match.group(1)), int(match.group(2) or 1)
    if count < 1 or times < 1:
        raise InvalidQueue(f"rate {text!r}: its count and period must be 1 or more")
    return Rate(count, times * seconds, text)


@dataclass(frozen=True, slots=True)
class Queue:
    """A declared queue and its limits (``None``: no such limit).

    Added in 0.1.0.
    """

    name: str
    concurrency: int | None = None
    per_tenant: int | None = None
    per_worker: int | None = None
    rate: Rate | None = None
    priority: bool = False
    run_queued: bool = True


def _limit(name: str, value: object) -> int | None:
    if value is None:
        return None
    if type(value) is not int or value < 1:
        raise InvalidQueue(f"{name} is a whole number of 1 or more, not {value!r}")
    return value


def make_queue(
    name: str,
    *,
    concurrency: int | None,
    per_tenant: int | None,
    per_worker: int | None,
    rate: str | None,
    priority: bool,
    run_queued: bool = True,
) -> Queue:
    """Check a queue's arguments once, where they enter.

    Raises:
        InvalidQueue: an argument names no valid value.
    """
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise InvalidQueue(
            f"a queue's name is 1 to 64 of A-Z a-z 0-9 _ . -, not {name!r}"
        )
    return Queue(
        name,
        _limit("concurrency", concurrency),
        _limit("per_tenant", per_tenant),
        _limit("per_worker", per_worker),
        None if rate is None else parse_rate(rate),
        bool(priority),
        bool(run_queued),
    )


@dataclass(slots=True, eq=False)
class _Waiter:
    """One execution waiting for its turn."""

    order: tuple[int, int]
    tenant: str
    signal: threading.Event | asyncio.Future[None]  # set (or its loop told) at its turn
    loop: asyncio.AbstractEventLoop | None
    turn: _Turn | None = None

    def wake(self) -> None:
        signal = self.signal
        if isinstance(signal, threading.Event):
            signal.set()
        elif self.loop is not None:
            with contextlib.suppress(RuntimeError):  # its loop closed: no one waits
                self.loop.call_soon_threadsafe(_settle, signal)


def _settle(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class _Turn:
    """The slots an execution holds while it runs; given back once."""

    __slots__ = ("_line", "_slots")

    def __init__(self, line: _Line, slots: list[QueueSlot]) -> None:
        self._line = line
        self._slots = slots

    def release(self) -> None:
        slots, self._slots = self._slots, []
        if slots:
            _release(slots)
            self._line.given_back()


def _release(slots: Iterable[QueueSlot]) -> None:
    for slot in slots:
        try:
            slot.release()
        except IntentusNetError as exc:  # its lock goes with the connection anyway
            _log().warning("a queue slot could not be given back: %s", exc)


class _Line:
    """The executions of one queue waiting in one router, and who hands out turns."""

    def __init__(self, queue: Queue, store: QueueStore) -> None:
        self.queue = queue
        self._store = store
        self._waiting: list[_Waiter] = []
        self._running = 0
        self._seq = itertools.count()
        self._cond = threading.Condition()
        self._stop = False
        self._pid = 0

    @property
    def waiting(self) -> int:
        """How many wait for a turn."""
        return len(self._waiting)

    def join(
        self,
        envelope: IntentEnvelope,
        signal: threading.Event | asyncio.Future[None],
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> _Waiter:
        """Put an execution of ``envelope`` in line; ``signal`` says its turn came."""
        context = envelope.context
        rank = context.priority if self.queue.priority else 0
        waiter = _Waiter((rank, next(self._seq)), context.tenant or "", signal, loop)
        with self._cond:
            self._waiting.append(waiter)
            self._waiting.sort(key=lambda w: w.order)
            if self._pid != os.getpid():
                self._start()
            self._cond.notify_all()
        return waiter

    def leave(self, waiter: _Waiter) -> _Turn | None:
        """The wait is over: the turn given, or ``None`` (out of line now)."""
        with self._cond:
            if waiter.turn is None and waiter in self._waiting:
                self._waiting.remove(waiter)
            return waiter.turn

    def given_back(self) -> None:
        with self._cond:
            self._running -= 1
            self._cond.notify_all()

    def close(self) -> None:
        """Stop handing out turns; the waiting stop waiting (no turn)."""
        with self._cond:
            self._stop = True
            waiting, self._waiting = self._waiting, []
            self._cond.notify_all()
        for waiter in waiting:
            waiter.wake()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._running = 0  # a forked child holds none of its parent's slots
        threading.Thread(
            target=self._hand_out,
            name=f"intentusnet-queue-{self.queue.name}",
            daemon=True,
        ).start()

    def _hand_out(self) -> None:
        """Give turns to the waiting, in order, while the limits allow."""
        pause = POLL_S
        while True:
            with self._cond:
                if pause > 0 and not self._stop:
                    self._cond.wait(pause if self._waiting else None)
                if self._stop:
                    return
                waiting = list(self._waiting)
            try:
                pause = self._round(waiting) if waiting else POLL_S
            except Exception:  # a bug of ours: said, and the thread goes on
                _log().exception("queue %r: handing out turns failed", self.queue.name)
                pause = POLL_S * 20

    def _round(self, waiting: list[_Waiter]) -> float:
        """One pass over the waiting; how long to pause before the next (0: none)."""
        queue = self.queue
        full: set[str] = set()
        for waiter in waiting:
            if queue.per_worker is not None and self._running >= queue.per_worker:
                return POLL_S
            if waiter.tenant in full:
                continue
            try:
                slots, wait = self._try(waiter.tenant)
            except IntentusNetError as exc:  # the store is away: asked again soon
                _log().warning("queue %r: %s", queue.name, exc)
                return POLL_S * 20
            if slots is None:
                if wait is None:  # the tenant's share is full: the next one may go
                    full.add(waiter.tenant)
                    continue
                return min(max(wait, 0.0005), POLL_S * 10)
            with self._cond:
                if waiter not in self._waiting:  # it stopped waiting meanwhile
                    given = None
                else:
                    self._waiting.remove(waiter)
                    self._running += 1
                    given = waiter.turn = _Turn(self, slots)
            if given is None:
                _release(slots)
            waiter.wake()
        return POLL_S

    def _try(self, tenant: str) -> tuple[list[QueueSlot] | None, float | None]:
        """Slots for a turn, or why not.

        ``(None, seconds)``: the queue's slots are taken (``POLL_S``) or its
        bucket is empty (till a token); ``(None, None)``: the tenant's share
        is taken.
        """
        queue, store = self.queue, self._store
        slots: list[QueueSlot] = []
        try:
            if queue.per_tenant is not None:
                slot = store.try_queue_slot(f"{queue.name}\0{tenant}", queue.per_tenant)
                if slot is None:
                    return None, None
                slots.append(slot)
            if queue.concurrency is not None:
                slot = store.try_queue_slot(queue.name, queue.concurrency)
                if slot is None:
                    _release(slots)
                    return None, POLL_S
                slots.append(slot)
            rate = queue.rate
            if rate is not None:
                wait = store.take_queue_token(queue.name, rate.per_second, rate.count)
                if wait > 0:
                    _release(slots)
                    return None, wait
        except BaseException:
            _release(slots)
            raise
        return slots, 0.0


class Queues:
    """A router's queues, the intents on them, and the turns it holds."""

    def __init__(self) -> None:
        self._declared: dict[str, Queue] = {}
        self._intents: dict[str, str] = {}
        self._lines: dict[str, _Line] = {}
        self._store: QueueStore | None = None
        self._local: MemoryQueues | None = None  # made with the first local line
        self._lock = threading.Lock()
        self._held: dict[str, _Turn] = {}
        self._starter: QueuedStarter | None = None

    def __bool__(self) -> bool:
        return bool(self._intents)

    @property
    def declared(self) -> dict[str, Queue]:
        """The declared queues, by name."""
        return dict(self._declared)

    def waiting(self, name: str) -> int:
        """How many executions of queue ``name`` wait for a turn in this router."""
        line = self._lines.get(name)
        return 0 if line is None else line.waiting

    def declare(self, queue: Queue, intents: Collection[str] = ()) -> Queue:
        """Declare ``queue`` and put ``intents`` on it.

        Raises:
            InvalidQueue: a queue of that name is declared already, or an
                intent is on another queue.
        """
        with self._lock:
            if queue.name in self._declared:
                raise InvalidQueue(f"queue {queue.name!r} is declared already")
            self._declared[queue.name] = queue
        for intent in intents:
            self.assign(intent, queue.name)
        if self._starter is not None:
            self._starter.start()
        return queue

    def assign(self, intent: str, name: str) -> None:
        """Put ``intent`` on queue ``name``.

        Raises:
            UnknownQueue: no queue of that name is declared.
            InvalidQueue: the intent is on another queue already.
        """
        with self._lock:
            if name not in self._declared:
                raise UnknownQueue(name, sorted(self._declared))
            found = self._intents.setdefault(intent, name)
        if found != name:
            raise InvalidQueue(
                f"intent {intent!r} is on queue {found!r}; it cannot be on {name!r} too"
            )

    def check(self, name: str) -> None:
        """Raise ``UnknownQueue`` unless ``name`` is declared."""
        if name not in self._declared:
            raise UnknownQueue(name, sorted(self._declared))

    def bind(self, store: object, resume: Callable[[str, RecordHold], object]) -> None:
        """Count slots in ``store`` when it shares them, else in this process.

        A store that also keeps resume links gets a starter of the queued
        executions of these queues (``resume`` starts one it holds).
        """
        shared = store if isinstance(store, QueueStore) else None
        starter = None
        if shared is not None and isinstance(shared, DurableStore):
            from .queued import QueuedStarter  # a store that keeps queued ones

            starter = QueuedStarter(shared, resume, self._limits)
        with self._lock:
            self._store = shared
            lines, self._lines = self._lines, {}
            old, self._starter = self._starter, starter
        for line in lines.values():
            line.close()
        if old is not None:
            old.close()
        if starter is not None and self._declared:
            starter.start()

    def gate(
        self,
        envelope: IntentEnvelope,
        options: ExecutionOptions | None,
        ex: Execution,
        plan: _Plan,
    ) -> _Plan:
        """``plan``, run once the execution's turn came.

        The turn is waited for on the first ``next``; ``plan`` itself is
        returned when its intent is on no queue.
        """
        line = self._line(envelope, options)
        if line is None:
            return plan
        return self._wait_then(line, envelope, options, ex, plan)

    async def agate(
        self,
        envelope: IntentEnvelope,
        options: ExecutionOptions | None,
        ex: Execution,
        plan: _Plan,
    ) -> _Plan:
        """The async ``gate``: waits for the turn here, without a thread."""
        line = self._line(envelope, options)
        if line is None:
            return plan
        started = time.monotonic()
        self._submitted(line, envelope, options, ex)
        import asyncio

        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        waiter = line.join(envelope, future, loop)
        try:
            await asyncio.wait_for(asyncio.shield(future), _timeout(envelope))
        except TimeoutError:
            pass
        except BaseException:  # cancelled while waiting: a turn given goes back
            _give_back(line.leave(waiter))
            raise
        return self._run(line, line.leave(waiter), ex, plan, started)

    def abandon(self, ex: Execution) -> None:
        """A routing call interrupted: give back the turn ``ex`` holds, if any."""
        with self._lock:
            turn = self._held.pop(ex.execution_id, None)
        _give_back(turn)

    def close(self) -> None:
        """Stop handing out turns (the waiting ones time out) and starting."""
        with self._lock:
            lines, self._lines = self._lines, {}
            starter, self._starter = self._starter, None
        for line in lines.values():
            line.close()
        if starter is not None:
            starter.close()

    def _limits(self) -> dict[str, int]:
        """How many queued executions to start at a time, by queue with intents."""
        from .queued import DEFAULT_STARTED

        on = set(self._intents.values())
        return {
            name: queue.per_worker or queue.concurrency or DEFAULT_STARTED
            for name, queue in self._declared.items()
            if name in on and queue.run_queued
        }

    def _submitted(
        self,
        line: _Line,
        envelope: IntentEnvelope,
        options: ExecutionOptions | None,
        ex: Execution,
    ) -> None:
        """Queue an asynchronous submit in the store; any other goes on.

        Raises:
            ExecutionQueued: queued; its record is closed unfinished by the
                caller (an interrupted call's path), and reads ``queued``.
        """
        store, recorder, starter = self._store, ex.recorder, self._starter
        if (
            options is None
            or options.opened is None
            or "resumeOf" in (options.received or {})
            or recorder is None
            or starter is None
            or store is None
        ):
            return
        queue, context = line.queue, envelope.context
        priority = context.priority if queue.priority else 0
        # listed first: a record that reads queued is always on the list
        store.enqueue_execution(queue.name, ex.execution_id, priority)
        recorder.event(
            EventType.EXECUTION_QUEUED,
            {"queue": queue.name, "priority": priority, "tenant": context.tenant},
            now=True,
        )
        starter.wake()  # this router may start it at once
        from .queued import ExecutionQueued

        raise ExecutionQueued(ex.execution_id, queue.name)

    def _line(
        self, envelope: IntentEnvelope, options: ExecutionOptions | None
    ) -> _Line | None:
        if not self._intents or (
            options is not None and options.parent_execution_id is not None
        ):
            return None  # no queue, or a child: it runs in its parent's turn
        name = self._intents.get(envelope.intent.name)
        if name is None:
            return None
        starter = self._starter
        if starter is not None:
            starter.start()  # (again in a forked child: a pid check)
        line = self._lines.get(name)
        if line is None:
            with self._lock:
                line = self._lines.get(name)
                if line is None:
                    store = self._store if self._store is not None else self._local
                    if store is None:
                        from ..store.memory.queues import MemoryQueues

                        store = self._local = MemoryQueues()
                    line = self._lines[name] = _Line(self._declared[name], store)
        return line

    def _wait_then(
        self,
        line: _Line,
        envelope: IntentEnvelope,
        options: ExecutionOptions | None,
        ex: Execution,
        plan: _Plan,
    ) -> _Plan:
        started = time.monotonic()
        self._submitted(line, envelope, options, ex)
        event = threading.Event()
        waiter = line.join(envelope, event)
        try:
            event.wait(_timeout(envelope))
        except BaseException:  # interrupted while waiting
            _give_back(line.leave(waiter))
            raise
        return (yield from self._run(line, line.leave(waiter), ex, plan, started))

    def _run(
        self,
        line: _Line,
        turn: _Turn | None,
        ex: Execution,
        plan: _Plan,
        started: float,
    ) -> _Plan:
        if turn is None:
            plan.close()
            waited = (time.monotonic() - started) * 1000
            return queue_timed_out(ex, line.queue.name, waited)
        with self._lock:
            self._held[ex.execution_id] = turn
        try:
            return (yield from plan)
        finally:
            with self._lock:
                self._held.pop(ex.execution_id, None)
            turn.release()


def _give_back(turn: _Turn | None) -> None:
    if turn is not None:
        turn.release()


def _timeout(envelope: IntentEnvelope) -> float | None:
    timeout_ms = envelope.routing.timeout_ms
    return None if timeout_ms is None else timeout_ms / 1000
