"""What a store gives durable executions: idempotency keys, holds and resume links.

A ``DurableStore`` (the file and memory stores are) answers three questions
the router asks to make an execution durable (docs/durability.md):

- ``claim_key(key, envelope_hash, execution_id)``: which execution an
  idempotency key names. The first caller's claim is written, atomically and
  durably, *before* its record opens; every later caller gets that claim.
  A claim is *held* by the process acting on it (running, waiting on or
  resuming its execution) until it lets go; in the memory and PostgreSQL
  stores a caller gets ``held=True`` only when no live process holds it, so
  exactly one acts at a time. The file store gives every caller the claim
  held: there, opening the key's record (exclusive: ``RecordExists`` for the
  second) and the record's owner lock decide who runs or resumes it.
- ``hold_record(execution_id)``: take a record's owner lock, which its
  writer holds until it completes or closes (the file store's ``flock``):
  ``None`` while a live process writes or resumes it. A resumer holds the
  interrupted record this way until its own record is closed, so that a
  second resumer sees a live owner.
- ``find_by_idempotency_key(key)``: the execution a key names, read only
  (nothing is claimed or locked).
- ``resumed_by(execution_id)``: the execution that resumed this one, if any
  (written with ``RecordHold.link`` before the resumer's record opens).
  Records are never rewritten: the link lives beside the record (the file
  store's ``resumes/`` directory), and the resumer's record names the
  original in its ``INTENT_RECEIVED`` event (``resumeOf``).

- ``interrupted(intent, until=, limit=)``: the records of an intent that
  recovery should look at: unfinished with no live owner (``incomplete``),
  created before ``until``, and resumed by no record that exists. An old
  record of a resume chain stays ``incomplete`` for ever (records are never
  rewritten); its link keeps it out of every later scan.

A claim whose execution has no record (its claimer died between the claim
and opening the record) names an execution interrupted with nothing done:
whoever holds the claim next runs it under that same id. Deleting a record
(``prune``, ``delete``) deletes the key whose claim names it and its resume
link: the key is new again.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Final, Protocol, TypeAlias, runtime_checkable

from .._util.jsonvalue import JSONObject
from ..errors import InvalidIdempotencyKey
from ..record.durable import (
    idempotency_key_of,
    parked_commands,
    resume_attempt,
    resume_of,
)
from ..record.model import EventType, ExecutionRecord, RecordStatus, RecordSummary
from .filters import ListFilters

# ``list`` is also a method name below; this keeps annotations unambiguous.
_Summaries: TypeAlias = list[RecordSummary]

__all__ = [
    "DECISION_ACTIONS",
    "MAX_KEY_LENGTH",
    "CancelStore",
    "DecisionTally",
    "DurableStore",
    "KeyClaim",
    "ListsInterrupted",
    "RecordHold",
    "WaitStore",
    "check_action",
    "check_idempotency_key",
    "durable_links",
]

#: The longest idempotency key accepted, in characters.
MAX_KEY_LENGTH: Final = 255


def check_idempotency_key(key: object) -> str:
    """Return ``key`` if it is 1 to 255 printable ASCII characters (space to ``~``).

    Raises:
        InvalidIdempotencyKey: it is not a string, is empty, too long, or holds
            another character (the first one is named).
    """
    if not isinstance(key, str):
        raise InvalidIdempotencyKey(
            f"an idempotency key is a string, not {type(key).__name__}"
        )
    if not key:
        raise InvalidIdempotencyKey("an idempotency key may not be empty")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidIdempotencyKey(
            f"an idempotency key is at most {MAX_KEY_LENGTH} characters, not {len(key)}"
        )
    if key.isascii() and key.isprintable():  # exactly space to "~"
        return key
    index, char = next((i, c) for i, c in enumerate(key) if not " " <= c <= "~")
    raise InvalidIdempotencyKey(
        f"an idempotency key is printable ASCII (space to '~'); "
        f"character {index} is {char!r}"
    )


class KeyClaim(Protocol):
    """What an idempotency key names, and whether this caller holds it."""

    @property
    def execution_id(self) -> str:
        """The execution the key names."""
        ...

    @property
    def envelope_hash(self) -> str:
        """The hash of the envelope the key was first used with."""
        ...

    @property
    def created(self) -> bool:
        """This call wrote the claim: the key was new."""
        ...

    @property
    def held(self) -> bool:
        """This caller may act on the claim until ``release`` (see the module)."""
        ...

    def release(self) -> None:
        """Let go of the claim (idempotent); nothing if it was not held."""
        ...


class RecordHold(Protocol):
    """A record's owner lock, held by a resumer."""

    def link(self, resumed_by: str) -> None:
        """Write that execution ``resumed_by`` resumes the held record, durably.

        A link written earlier (by a resumer that died before its record
        opened) is replaced.

        Raises:
            StoreError: it could not be written.
        """
        ...

    def release(self) -> None:
        """Let go of the record (idempotent)."""
        ...


@runtime_checkable
class DurableStore(Protocol):
    """A store that keeps idempotency keys and resume links (added in 0.1.0)."""

    def claim_key(self, key: str, envelope_hash: str, execution_id: str) -> KeyClaim:
        """Claim ``key`` for ``execution_id``, or return the claim made before.

        The claim is on disk (as the store's durability says) when this
        returns, before any record of it opens.
        """
        ...

    def hold_record(self, execution_id: str) -> RecordHold | None:
        """Take the record's owner lock; ``None`` while a live process holds it.

        Raises:
            RecordNotFound: there is no such record.
        """
        ...

    def resumed_by(self, execution_id: str) -> str | None:
        """The execution that resumed ``execution_id``, if one did."""
        ...

    def find_by_idempotency_key(self, key: str) -> str | None:
        """The execution ``key`` names, if the key was claimed; read only.

        The first execution of its resume chain (the claim is never moved);
        it may have no record yet, or no more (pruned records take their key
        with them). Added in 0.1.0.

        Raises:
            InvalidIdempotencyKey: the key is malformed.
        """
        ...

    def interrupted(
        self, intent: str, *, until: datetime, limit: int
    ) -> list[RecordSummary]:
        """Records of ``intent`` to recover, newest first, at most ``limit``.

        Those ``incomplete`` (no live process owns them), created before
        ``until``, and resumed by no record that exists (a resumer that died
        before its record opened leaves the old record to recover).
        """
        ...


@runtime_checkable
class CancelStore(Protocol):
    """A store that keeps cancel requests (the file, memory and PostgreSQL stores).

    A request is kept per resume chain, under the chain's first execution
    (``origin``), so that whichever record of the chain runs, now or after a
    resume, finds it. Added in 0.1.0.
    """

    def request_cancel(self, origin: str, data: JSONObject) -> JSONObject | None:
        """Write the chain's cancel request, durably, unless one is there.

        Returns ``None`` when this call wrote it, else the request made
        before (of two requests at once, one is written).

        Raises:
            StoreError: it could not be written.
        """
        ...

    def cancel_requests(self, origins: Iterable[str]) -> dict[str, JSONObject]:
        """The cancel requests of these chains, by origin (those that have one)."""
        ...


#: The operators' decisions a store counts (``DecisionTally``).
DECISION_ACTIONS: Final = ("resolve", "cancel", "fork")


@runtime_checkable
class DecisionTally(Protocol):
    """A store that counts operators' decisions (file, memory and PostgreSQL stores).

    What ``/metrics`` reads (``intentusnet_operator_decisions_total``), so a
    decision made from the CLI, Python or any service counts. Each decision
    is noted once, under the record that holds it (the resolution's record,
    the cancelled chain's first execution, the fork's record); deleting
    records leaves the counts as they are. Added in 0.1.0.
    """

    def note_decision(self, action: str, record: str) -> None:
        """Count decision ``action`` (of ``DECISION_ACTIONS``), held by ``record``.

        Noting the same record twice counts it once.

        Raises:
            ValueError: ``action`` is not a decision.
            StoreError: it could not be written.
        """
        ...

    def decision_counts(self) -> dict[str, int]:
        """The decisions counted, by action (every action of ``DECISION_ACTIONS``)."""
        ...


def check_action(action: str) -> str:
    """``action``, if it is one of ``DECISION_ACTIONS`` (it names a directory).

    Raises:
        ValueError: it is not.
    """
    if action not in DECISION_ACTIONS:
        raise ValueError(
            f"{action!r} is not a decision ({', '.join(DECISION_ACTIONS)})"
        )
    return action


@runtime_checkable
class WaitStore(Protocol):
    """A store that keeps signals and wake-ups (the file, memory and PostgreSQL stores).

    Signals are kept per resume chain, under its first execution (``origin``),
    oldest first, as cancel requests are: whichever record of the chain waits
    for one, now or after a resume, finds it. A wake-up names a waiting record
    and when recovery should look at it again (its due time; *now* when a
    signal came for it). Added in 0.1.0.
    """

    def add_signal(self, origin: str, signal: JSONObject, *, cap: int) -> bool:
        """Keep ``signal`` for the chain, durably; False if it holds ``cap`` already.

        Raises:
            StoreError: it could not be written.
        """
        ...

    def signals(self, origin: str) -> list[JSONObject]:
        """The chain's signals, oldest first."""
        ...

    def add_wakeup(self, execution_id: str, due_us: int) -> None:
        """Ask recovery to look at ``execution_id`` at ``due_us`` (epoch µs)."""
        ...

    def due_wakeups(self, until_us: int, limit: int) -> list[tuple[str, int]]:
        """``(execution_id, due_us)`` of wake-ups due by ``until_us``, soonest first.

        Reads only the due ones: the cost does not grow with the executions
        waiting for later.
        """
        ...

    def clear_wakeup(self, execution_id: str, due_us: int) -> None:
        """Forget one wake-up (nothing if it is gone)."""
        ...


class ListsInterrupted:
    """``interrupted`` answered from the store's listing: the file and memory stores'.

    A resume link and the record it names are two cheap lookups.
    """

    list: Callable[[ListFilters], _Summaries]
    resumed_by: Callable[[str], str | None]
    exists: Callable[[str], bool]

    def interrupted(self, intent: str, *, until: datetime, limit: int) -> _Summaries:
        """Records to recover (see :class:`DurableStore`)."""
        found = self.list(ListFilters(intent=intent, status="incomplete", until=until))
        kept: _Summaries = []
        for summary in found:
            if len(kept) >= limit:
                break
            following = self.resumed_by(summary.execution_id)
            if following is None or not self.exists(following):
                kept.append(summary)
        return kept


def durable_links(
    store: object, record: ExecutionRecord, app_ref: str = "MODULE:ATTR"
) -> JSONObject:
    """The record's key, resume links, resume attempt and attention, as JSON.

    ``resumedBy`` is asked of the store (it keeps the link beside the record);
    ``attention`` is the ``ATTENTION_NEEDED`` event of a parked execution,
    ``commands`` what an operator runs to move it on (``[]`` unless it is
    parked and nothing follows it in its chain yet; ``app_ref`` names the
    application in a ``fork``); ``waiting`` the ``EXECUTION_WAITING`` event of a
    record that waits and is not resumed yet.
    """
    attention = next(
        (e.data for e in record.events if e.type is EventType.ATTENTION_NEEDED), None
    )
    resumed_by = (
        store.resumed_by(record.execution_id)
        if isinstance(store, DurableStore)
        else None
    )
    # parked, and no decision (nor resume) after it yet
    parked = record.header.status is RecordStatus.NEEDS_ATTENTION and resumed_by is None
    waiting = next(
        (e.data for e in record.events if e.type is EventType.EXECUTION_WAITING), None
    )
    return {
        "idempotencyKey": idempotency_key_of(record),
        "resumeOf": resume_of(record),
        "resumedBy": resumed_by,
        "resumeAttempt": resume_attempt(record),
        "interrupted": record.header.status is RecordStatus.INCOMPLETE,
        "attention": attention,
        # what it waits for and until when, while it waits (added in 0.1.0)
        "waiting": waiting
        if record.header.status is RecordStatus.WAITING and resumed_by is None
        else None,
        # what an operator runs to move it on, while it is parked
        "commands": parked_commands(
            record.execution_id, attention if parked else None, app_ref
        ),
    }
