"""Automatic recovery: finish the interrupted executions of a router's intents.

``Recovery(router).run_once()`` asks the store's index for the records of the
router's intents that are ``incomplete`` (their owner is gone: the file
store's owner lock says so, PostgreSQL's advisory lock, held by a session on
any host), older than the grace period and not resumed already
(``DurableStore.interrupted``), and resumes each (``IntentRouter.resume``).
A child intent's record (``ctx.route``) is skipped: the resume of its parent
continues it. The claim is the store's: a record a live process writes or resumes is
skipped (``owned``), so processes sharing a store may all run recovery and
each execution is resumed by one of them. A chain resumed ``max_attempts``
times is parked ``needs_attention`` instead; between attempts, the chain
waits ``backoff`` seconds, doubled each attempt. The attempt count is read
from the chain's newest record (``resumeAttempt``), counted from the chain's
last operator decision (``attemptsFrom``: a resolved execution has its
attempts again).

Waiting executions (a durable sleep, a signal, a retry's wait) are found
another way: by the store's wake-ups due (``WaitStore.due_wakeups``, which
reads only those due, so thousands waiting cost a scan nothing). Each due
one whose record still waits (or was interrupted) is resumed at once, with
no grace: its process closed it. A resume that waits again is ``waiting``.

Counters (``resumed``, ``parked``, ``completion_seconds``) are kept on the
object for a metrics exporter.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Final

from .._util.jsonvalue import JSONObject, wire_form
from .._util.time import parse_utc
from ..envelope import ErrorCode
from ..errors import IntentusNetError, ResumeRefused
from ..record.durable import attempts_from, resume_attempt
from ..record.model import RecordStatus
from ..store.durable import WaitStore
from .durable import chain_head, load_record, park, require_durable

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord
    from .router import IntentRouter

__all__ = ["Recovery", "RecoveryOutcome", "RecoveryReport"]

#: At most this many interrupted records are looked at per intent and scan.
SCAN_LIMIT: Final = 1000
#: A wake-up skipped for these reasons is forgotten: nothing will wake.
_FORGET: Final = frozenset(
    {"resumed", "finished", "complete", "child", "record_not_found"}
)


@dataclass(frozen=True, slots=True)
class RecoveryOutcome:
    """What recovery did with one interrupted execution. Added in 0.1.0.

    Attributes:
        execution_id: the interrupted record found.
        action: ``resumed``, ``parked``, ``cancelled`` (an operator cancelled
            its chain: closed so, not run), ``waiting`` (woken, resumed, and
            waiting again) or ``skipped``.
        reason: why (a ``ResumeRefused`` reason, ``backoff``, ``resumed``
            (its chain was finished already), ``child`` (a child intent's
            record: its parent's resume finishes it), or the parked reason).
        resumed_as: the record that finished it (or parked it), if any.
    """

    execution_id: str
    action: str
    reason: str
    resumed_as: str | None = None

    def to_json(self) -> JSONObject:
        """The camelCase wire form."""
        return wire_form(self)


@dataclass(frozen=True, slots=True)
class RecoveryReport:
    """One scan's outcomes. Added in 0.1.0."""

    outcomes: tuple[RecoveryOutcome, ...] = ()

    def of(self, action: str) -> tuple[RecoveryOutcome, ...]:
        """The outcomes with ``action``."""
        return tuple(o for o in self.outcomes if o.action == action)

    @property
    def resumed(self) -> tuple[RecoveryOutcome, ...]:
        """Executions resumed (finished, completed or failed)."""
        return self.of("resumed")

    @property
    def parked(self) -> tuple[RecoveryOutcome, ...]:
        """Executions parked ``needs_attention``."""
        return self.of("parked")

    @property
    def skipped(self) -> tuple[RecoveryOutcome, ...]:
        """Executions left as they are, with why."""
        return self.of("skipped")

    def to_json(self) -> JSONObject:
        """The wire form: a list of outcomes per action."""
        actions = ("resumed", "parked", "cancelled", "waiting", "skipped")
        return {action: [o.to_json() for o in self.of(action)] for action in actions}


@dataclass
class Recovery:
    """Finds and finishes a router's interrupted executions. Added in 0.1.0.

    Args:
        router: the router whose intents and store are recovered.
        grace: seconds an interrupted record is left alone first.
        max_attempts: resumes of one chain before it is parked.
        backoff: seconds between attempts, doubled after each.

    Attributes:
        resumed: executions resumed so far.
        parked: executions parked so far (by their journal or after the last
            attempt).
        completion_seconds: per execution resumed, seconds from its
            interruption (its record's last line) to its answer.
    """

    router: IntentRouter
    grace: float = 5.0
    max_attempts: int = 3
    backoff: float = 1.0
    resumed: int = 0
    parked: int = 0
    completion_seconds: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.grace < 0 or self.backoff < 0 or self.max_attempts < 1:
            raise ValueError(
                "grace and backoff are seconds >= 0, max_attempts at least 1"
            )
        require_durable(self.router)

    def scan(self) -> list[str]:
        """The interrupted executions ``run_once`` acts on, oldest first per intent.

        Records of the router's intents that are ``incomplete``, created
        before ``now - grace``, and resumed by no record (at most 1000 per
        intent). Added in 0.1.0.
        """
        store = require_durable(self.router)
        until = datetime.now(UTC) - timedelta(seconds=self.grace)
        found: list[str] = []
        for name, version in sorted(set(self.router.registry.intents())):
            summaries = store.interrupted(name, until=until, limit=SCAN_LIMIT)
            found += [
                s.execution_id
                for s in reversed(summaries)  # oldest first
                if s.intent_version == version
            ]
        return found

    def run_once(self) -> RecoveryReport:
        """Scan once; resume, park or skip each interrupted execution found.

        Then wake the waiting executions due (:meth:`wake`).
        """
        found = tuple(self._recover(found) for found in self.scan())
        return RecoveryReport(found + self.wake().outcomes)

    def wake(self) -> RecoveryReport:
        """Resume the waiting executions of the router's intents that are due.

        Those whose wake-up is due (their sleep ended, a signal came, their
        timeout passed). A wake-up is forgotten once acted on, or once its
        record is finished or resumed; one of another router's intents, or of
        a record a live process holds, is left for later. Added in 0.1.0.
        """
        store = self.router.durable_store
        if not isinstance(store, WaitStore):
            return RecoveryReport()
        ours = set(self.router.registry.intents())
        until = time.time_ns() // 1000
        outcomes = []
        for execution_id, due in store.due_wakeups(until, SCAN_LIMIT):
            outcome = self._wake(store, ours, execution_id)
            if outcome.action != "skipped" or outcome.reason in _FORGET:
                store.clear_wakeup(execution_id, due)
            if outcome.reason != "other_intent":
                outcomes.append(outcome)
        return RecoveryReport(tuple(outcomes))

    def _wake(
        self, store: WaitStore, ours: set[tuple[str, str]], execution_id: str
    ) -> RecoveryOutcome:
        router = self.router
        try:
            record = load_record(router, execution_id)
        except IntentusNetError as exc:
            return RecoveryOutcome(execution_id, "skipped", exc.code)
        header = record.header
        if (header.intent_name, header.intent_version) not in ours:
            return RecoveryOutcome(execution_id, "skipped", "other_intent")
        if header.parent_execution_id is not None:
            return RecoveryOutcome(execution_id, "skipped", "child")  # see Limits
        if chain_head(router, execution_id) != execution_id:
            return RecoveryOutcome(execution_id, "skipped", "resumed")
        status = header.status
        if status is RecordStatus.IN_PROGRESS:
            return RecoveryOutcome(execution_id, "skipped", "owned")
        if status not in (RecordStatus.WAITING, RecordStatus.INCOMPLETE):
            return RecoveryOutcome(execution_id, "skipped", "finished")
        return self._resumed(execution_id, execution_id, None)

    def run_forever(self, stop: threading.Event, *, interval: float = 1.0) -> None:
        """Scan every ``interval`` seconds until ``stop`` is set."""
        while not stop.is_set():
            self.run_once()
            stop.wait(interval)

    def _recover(self, execution_id: str) -> RecoveryOutcome:
        router = self.router
        try:
            head = chain_head(router, execution_id)
            record = load_record(router, head)
        except IntentusNetError as exc:
            return RecoveryOutcome(execution_id, "skipped", exc.code)
        if not record.events:
            # Only its header: nothing ran in it and nobody was told it is
            # open (an asynchronous submit answers once INTENT_RECEIVED is on
            # disk, a resume links it then). It may be a resume whose process
            # died before saying what it resumes: resumed, it could run its
            # chain's steps again. A key retried resumes it from its claim.
            return RecoveryOutcome(execution_id, "skipped", "empty")
        if record.header.parent_execution_id is not None:
            # A child intent's record: its parent's resume continues it (as a
            # new child record, this one its journal). Resumed on its own too,
            # its side effects could run twice.
            return RecoveryOutcome(execution_id, "skipped", "child")
        status = record.header.status
        if status is not RecordStatus.INCOMPLETE:
            # resumed already (finished, or being resumed by a live process)
            reason = "owned" if status is RecordStatus.IN_PROGRESS else "resumed"
            return RecoveryOutcome(execution_id, "skipped", reason, head)
        # counted from the chain's last operator decision, if any
        attempt = resume_attempt(record) - attempts_from(record)
        if attempt >= self.max_attempts:
            try:
                parked = park(
                    router,
                    head,
                    "attempts_exhausted",
                    f"resumed {attempt} times without finishing",
                )
            except ResumeRefused as refused:
                return RecoveryOutcome(execution_id, "skipped", refused.reason)
            self.parked += 1
            return RecoveryOutcome(execution_id, "parked", "attempts_exhausted", parked)
        if attempt and _age(record) < self.backoff * 2 ** (attempt - 1):
            return RecoveryOutcome(execution_id, "skipped", "backoff")
        return self._resumed(execution_id, head, _last_line_s(record))

    def _resumed(
        self, execution_id: str, head: str, interrupted: float | None
    ) -> RecoveryOutcome:
        """Resume ``head`` (of ``execution_id``'s chain); what came of it."""
        try:
            answer = self.router.resume(head)
        except ResumeRefused as refused:
            return RecoveryOutcome(execution_id, "skipped", refused.reason)
        new_id = answer.metadata.execution_id
        error = answer.error
        if error is not None and error.details.get("action") == "cancel":
            # its chain was cancelled: closed so, never run again
            return RecoveryOutcome(execution_id, "cancelled", "cancelled", new_id)
        if error is not None and error.code is ErrorCode.WAITING:
            return RecoveryOutcome(execution_id, "waiting", "waiting", new_id)
        if error is not None and error.code is ErrorCode.NEEDS_ATTENTION:
            self.parked += 1
            reason = str(error.details.get("reason", "needs_attention"))
            return RecoveryOutcome(execution_id, "parked", reason, new_id)
        self.resumed += 1
        if interrupted is not None:
            self.completion_seconds.append(max(0.0, time.time() - interrupted))
        return RecoveryOutcome(execution_id, "resumed", answer.status, new_id)


def _created_s(record: ExecutionRecord) -> float | None:
    micros = parse_utc(record.header.created_utc)
    return None if micros is None else micros / 1e6


def _age(record: ExecutionRecord) -> float:
    """Seconds since ``record`` was opened."""
    created = _created_s(record)
    return float("inf") if created is None else time.time() - created


def _last_line_s(record: ExecutionRecord) -> float | None:
    """When ``record``'s last line was written (its interruption), in epoch s."""
    created = _created_s(record)
    if created is None:
        return None
    events = record.events
    return created + (events[-1].at_ms / 1000 if events else 0.0)
