"""Execution records: event types and the frozen model ``store.load`` returns.

A record is read from its file by :func:`intentusnet.record.reader.parse_record`;
this module holds only the data it is read into. Attributes are snake_case;
``to_json()`` gives the camelCase wire form used on disk and by ``--json`` output.
Nothing here imports pydantic: the read path stays light (DESIGN §4).

The types are NamedTuples: immutable, compared, hashed, printed and pickled by
field. (Frozen dataclasses would add about 7 ms to the start of ``intentusnet
replay``, generating their code.)
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final, NamedTuple

from .._util.choices import choice
from .._util.jsonvalue import JSONObject, JSONValue

__all__ = [
    "SCHEMA_VERSION",
    "EventType",
    "ExecutionEvent",
    "ExecutionHeader",
    "ExecutionRecord",
    "RecordStatus",
    "RecordSummary",
    "ReplayableReason",
    "StoreStats",
    "VerifyReport",
    "status_filter",
]

#: The record file format this release writes and reads.
SCHEMA_VERSION: Final = 1


class EventType(StrEnum):
    """What one line of a record tells (DESIGN §4)."""

    INTENT_RECEIVED = "INTENT_RECEIVED"
    ROUTER_DECISION = "ROUTER_DECISION"
    AGENT_ATTEMPT_START = "AGENT_ATTEMPT_START"
    AGENT_ATTEMPT_END = "AGENT_ATTEMPT_END"
    FALLBACK_TRIGGERED = "FALLBACK_TRIGGERED"
    STEP_START = "STEP_START"
    STEP_END = "STEP_END"
    CACHE_HIT = "CACHE_HIT"
    FINAL_RESPONSE = "FINAL_RESPONSE"
    INVALIDATED = "INVALIDATED"
    RECORDING_FAILURE = "RECORDING_FAILURE"
    #: an Ed25519 signature over the line before it, written when a record is
    #: closed (completed, closed unfinished, invalidated) by a store given a
    #: signing key (added in 0.1.0)
    SIGNATURE = "SIGNATURE"
    #: a resumed execution was parked instead of finished: a side-effect step
    #: in doubt, or nondeterminism (``reason``, ``step``, ``name``); written
    #: before its ``FINAL_RESPONSE`` (added in 0.1.0)
    ATTENTION_NEEDED = "ATTENTION_NEEDED"
    #: an operator's decision about a parked execution, in a record of its own
    #: linked into the resume chain (``action``: ``resolve``, with the
    #: ``step``, whether it ``happened`` and its ``output``; or ``cancel``;
    #: ``by``, ``atUtc``, ``via``); the chain's next resume honours it, and a
    #: finished record holding a ``cancel`` is ``cancelled`` (added in 0.1.0)
    OPERATOR_DECISION = "OPERATOR_DECISION"
    #: the execution waits (a durable sleep, a signal, a retry's wait): its
    #: process closed the record unfinished; ``waitingFor`` (``sleep``,
    #: ``signal`` or ``retry``), ``step``, ``name``, ``dueUtc`` (``None``: a
    #: signal with no timeout). Recovery resumes it when due or signalled
    #: (added in 0.1.0)
    EXECUTION_WAITING = "EXECUTION_WAITING"
    #: an asynchronous submit found its queue full: its process closed the
    #: record unfinished, and any router with the queue starts it when its
    #: turn comes, as a resume (``queue``, ``priority``, ``tenant``; added in
    #: 0.1.0)
    EXECUTION_QUEUED = "EXECUTION_QUEUED"


class RecordStatus(StrEnum):
    """Where an execution got to; derived when the record is loaded."""

    COMPLETED = "completed"
    FAILED = "failed"
    IN_PROGRESS = "in_progress"
    INCOMPLETE = "incomplete"
    #: the file has no complete first line: its process was stopped between
    #: creating it and writing the header, so nothing was recorded (added in 0.1.0)
    RECORDING_FAILURE = "recording_failure"
    #: finished, but parked: an ``ATTENTION_NEEDED`` event says which step a
    #: person must look at before it can go on (added in 0.1.0)
    NEEDS_ATTENTION = "needs_attention"
    #: finished, cancelled by an operator: an ``OPERATOR_DECISION`` event
    #: (``action``: ``cancel``) says who and when (added in 0.1.0)
    CANCELLED = "cancelled"
    #: closed unfinished by its own process to wait (an ``EXECUTION_WAITING``
    #: event says for what and until when); recovery resumes it when due or
    #: signalled (added in 0.1.0)
    WAITING = "waiting"
    #: submitted asynchronously and waiting for its queue's turn: an
    #: ``EXECUTION_QUEUED`` event, and its record closed unfinished; the
    #: resume that starts it is the chain's next record (added in 0.1.0)
    QUEUED = "queued"


def status_filter(status: str | None) -> RecordStatus | None:
    """Turn a ``status=`` argument into a RecordStatus.

    Raises:
        ValueError: not a status; the message lists the valid ones.
    """
    if status is None:
        return None
    return choice(RecordStatus, status, "status")


class ReplayableReason(StrEnum):
    """Why a record is not replayable (``None`` when it is)."""

    EXECUTION_INCOMPLETE = "execution_incomplete"
    RECORDING_FAILURE = "recording_failure"
    ENVELOPE_INVALID = "envelope_invalid"
    INTEGRITY_FAILURE = "integrity_failure"
    MANUALLY_INVALIDATED = "manually_invalidated"


class ExecutionEvent(NamedTuple):
    """One line of a record after the header.

    Attributes:
        seq: position in the record; the header line is 0, events count from 1.
        type: what happened.
        at_ms: milliseconds since the record was opened.
        data: the event's data (camelCase keys, see docs/records.md).
        prev_hash: ``hash`` of the line before this one.
        hash: ``"sha256:"`` + hex SHA-256 of this line's bytes up to its hash field.
    """

    seq: int
    type: EventType
    at_ms: float
    data: JSONObject
    prev_hash: str
    hash: str

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        return {
            "seq": self.seq,
            "type": self.type.value,
            "atMs": self.at_ms,
            "data": self.data,
            "prevHash": self.prev_hash,
            "hash": self.hash,
        }


class ExecutionHeader(NamedTuple):
    """What a record is about and what state it is in.

    ``created_utc`` and ``completed_utc`` are ISO 8601 strings in UTC with a
    ``Z`` suffix. ``status``, ``replayable`` and ``replayable_reason`` are derived
    on load (DESIGN §4); ``owner`` is the process that wrote the record;
    ``key_id`` is the signing key the writer announced in line 1, or ``None``
    for an unsigned record (added in 0.1.0).
    ``configuration`` is the router's configuration for the intent when the
    record was made — ``{"fingerprint", "strategy", "agents": [{"name",
    "version", "priority"}, ...]}`` — or ``None`` for a record made without
    one (added in 0.1.0).
    """

    schema_version: int
    execution_id: str
    created_utc: str
    completed_utc: str | None
    envelope_hash: str
    intent_name: str
    intent_version: str
    status: RecordStatus
    replayable: bool
    replayable_reason: ReplayableReason | None
    parent_execution_id: str | None
    agent: str | None
    duration_ms: float | None
    chain_head: str
    owner: JSONObject | None = None
    key_id: str | None = None
    configuration: JSONObject | None = None

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        reason = self.replayable_reason
        return {
            "schemaVersion": self.schema_version,
            "executionId": self.execution_id,
            "createdUtc": self.created_utc,
            "completedUtc": self.completed_utc,
            "envelopeHash": self.envelope_hash,
            "intent": {"name": self.intent_name, "version": self.intent_version},
            "status": self.status.value,
            "replayable": self.replayable,
            "replayableReason": None if reason is None else reason.value,
            "parentExecutionId": self.parent_execution_id,
            "agent": self.agent,
            "durationMs": self.duration_ms,
            "chainHead": self.chain_head,
            "owner": self.owner,
            "keyId": self.key_id,
            "configuration": self.configuration,
        }


class ExecutionRecord(NamedTuple):
    """A loaded, verified record.

    Attributes:
        header: identity and derived state.
        envelope: the envelope as received, in wire form (metadata included).
        events: every event line, in order.
        final_response: the ``AgentResponse`` wire dict returned to the caller,
            or ``None`` when the execution did not finish.
        fingerprint: the hash of this execution's decision path and steps. Two
            records with the same fingerprint decided alike and made the same
            step calls with the same results (docs/records.md says exactly what
            is hashed). Stored in the ``FINAL_RESPONSE`` line; computed from
            the events for a record that has none (unfinished, or written
            before fingerprints were stored). Added in 0.1.0.
        torn_tail: the file ended in a partly written line (a crash mid-write),
            which was left out.

    A record from the store has had its whole hash chain and every line
    checked when it is loaded.
    """

    header: ExecutionHeader
    envelope: JSONObject
    events: tuple[ExecutionEvent, ...]
    final_response: JSONObject | None
    fingerprint: str
    torn_tail: bool = False

    @property
    def execution_id(self) -> str:
        """The record's execution id."""
        return self.header.execution_id

    @property
    def replay_of(self) -> str | None:
        """The execution this one re-ran (``intentusnet.rerun``), or ``None``.

        Added in 0.1.0.
        """
        events = self.events
        if events and events[0].type is EventType.INTENT_RECEIVED:
            value = events[0].data.get("replayOf")
            return value if isinstance(value, str) else None
        return None

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form (what ``records show --json`` prints)."""
        events: list[JSONValue] = [event.to_json() for event in self.events]
        return {
            "header": self.header.to_json(),
            "envelope": self.envelope,
            "events": events,
            "finalResponse": self.final_response,
            "tornTail": self.torn_tail,
        }


class RecordSummary(NamedTuple):
    """One row of ``store.list()``: a record's header without its events."""

    execution_id: str
    created_utc: str
    intent_name: str
    intent_version: str
    envelope_hash: str
    status: RecordStatus
    replayable: bool
    replayable_reason: ReplayableReason | None
    agent: str | None
    duration_ms: float | None

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        reason = self.replayable_reason
        return {
            "executionId": self.execution_id,
            "createdUtc": self.created_utc,
            "intent": {"name": self.intent_name, "version": self.intent_version},
            "envelopeHash": self.envelope_hash,
            "status": self.status.value,
            "replayable": self.replayable,
            "replayableReason": None if reason is None else reason.value,
            "agent": self.agent,
            "durationMs": self.duration_ms,
        }


class VerifyReport(NamedTuple):
    """The outcome of checking a record's hash chain line by line.

    Attributes:
        execution_id: the record checked.
        events_total: lines in the file, the header line included.
        events_verified: lines whose own hash and link to the line before hold.
        failures: one message per problem, each naming its line.
        valid: no failures.
        notes: remarks that are not failures (e.g. a torn last line).
        recording_failure: the file has no complete first line (its process
            was stopped before writing the header): nothing was recorded, which
            is not evidence of tampering (added in 0.1.0).
        key_id: the signing key line 1 names, or ``None`` (added in 0.1.0).
        signatures: the record's ``SIGNATURE`` lines, each found sound in
            form and placed over the line before it; whether they were made
            by their keys takes a ``KeyRing`` (``KeyRing.check_report``).
            Added in 0.1.0.
    """

    execution_id: str
    events_total: int
    events_verified: int
    failures: tuple[str, ...]
    valid: bool
    notes: tuple[str, ...] = ()
    recording_failure: bool = False
    key_id: str | None = None
    signatures: tuple[ExecutionEvent, ...] = ()

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        return {
            "executionId": self.execution_id,
            "eventsTotal": self.events_total,
            "eventsVerified": self.events_verified,
            "failures": list(self.failures),
            "valid": self.valid,
            "notes": list(self.notes),
            "recordingFailure": self.recording_failure,
            "keyId": self.key_id,
        }


class StoreStats(NamedTuple):
    """Counts over a whole store, from its catalog.

    ``bytes_on_disk`` sums the sizes of the record files and the catalog.
    """

    records: int
    by_status: dict[str, int]
    by_intent: dict[str, int]
    bytes_on_disk: int

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        by_status: JSONObject = dict(self.by_status)
        by_intent: JSONObject = dict(self.by_intent)
        return {
            "records": self.records,
            "byStatus": by_status,
            "byIntent": by_intent,
            "bytesOnDisk": self.bytes_on_disk,
        }
