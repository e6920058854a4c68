"""Durable executions: resuming an interrupted one, and routing with a key.

``resume`` runs an interrupted execution's agent again with its resume chain
(its first record and every resume of it) as the journal (``journal.py``):
steps whose end any of them holds are served, the rest runs live, and
the answer is recorded as a new record that names the old one (``resumeOf``),
while the store links the old one to it. Who may resume is decided by the
store's owner lock: the resumer holds the interrupted record's lock until its
own record is closed, so a second resumer finds it owned.

``route_with_key`` routes an envelope under an idempotency key: the first
caller claims the key in the store before its record opens and runs; every
later caller gets the claimed execution's answer: recorded (a replay: no agent
runs), waited for (a live process holds the key), or finished by resuming it
(its process is gone). The same key with another envelope is
``IdempotencyConflict``.

Both are synchronous; the router's async twins run them on a worker thread
(one code path).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol, TypeAlias

from .._util.ids import new_execution_id
from .._util.jsonvalue import JSONObject, JSONValue
from .._util.time import utc_now
from ..envelope import (
    AgentResponse,
    CacheDirective,
    ErrorCode,
    ErrorInfo,
    IntentEnvelope,
    ResponseMetadata,
)
from ..errors import (
    CancelRefused,
    EnvelopeValidationError,
    IdempotencyConflict,
    IdempotencyTimeout,
    IntentusNetError,
    InvalidIdempotencyKey,
    InvalidResolution,
    RecordExists,
    RecordNotFound,
    ResolveRefused,
    ResumeRefused,
    StoreError,
)
from ..hashing import canonical_json, hash_bytes
from ..record.durable import (
    idempotency_key_of,
    resume_attempt,
    resume_of,
    resume_origin,
)
from ..record.model import EventType, RecordStatus
from ..store.durable import (
    CancelStore,
    DecisionTally,
    DurableStore,
    KeyClaim,
    RecordHold,
)
from .config import configuration
from .journal import Journal, chain_steps
from .recorder import Recorder
from .seams import ExecutionOptions
from .waiting import waiting_answer, waiting_of

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord
    from ..store.protocol import ExecutionStore
    from .agents import AgentRegistry

__all__ = [
    "DEFAULT_KEY_WAIT_S",
    "FINISHED",
    "Route",
    "Routing",
    "StoreHolder",
    "StoreOnly",
    "cancel",
    "cancel_request",
    "cancelled",
    "cancelling",
    "chain_head",
    "chain_of",
    "close_cancelled",
    "count_decision",
    "load_record",
    "park",
    "parked",
    "recorded_answer",
    "resolve",
    "resume",
    "route_with_key",
    "unfinished_head",
]


class StoreHolder(Protocol):
    """What reading a resume chain needs: a router, or its store alone."""

    @property
    def store(self) -> ExecutionStore | None:
        """Where executions are recorded."""
        ...

    @property
    def durable_store(self) -> DurableStore | None:
        """``store``, if it keeps idempotency keys and resume links."""
        ...


#: Routes and records one execution, as ``IntentRouter.route_intent`` does.
Route: TypeAlias = Callable[[IntentEnvelope, ExecutionOptions], AgentResponse]


class StoreOnly:
    """A store alone, as what reads a resume chain asks of a router."""

    def __init__(self, store: ExecutionStore) -> None:
        self.store: ExecutionStore | None = store
        self.durable_store = store if isinstance(store, DurableStore) else None


@dataclass(frozen=True, slots=True)
class Routing:
    """What resuming and keyed routing need of a router.

    Its store, its agents, and ``route`` to run an execution: the one call
    back into the router.
    """

    store: ExecutionStore | None
    durable_store: DurableStore | None
    registry: AgentRegistry
    route: Route


#: How long a caller waits for a live execution its key names, when the
#: envelope has no ``routing.timeoutMs``.
DEFAULT_KEY_WAIT_S: Final = 30.0
#: The statuses of a finished execution: nothing is left to resume.
FINISHED: Final = frozenset(
    {
        RecordStatus.COMPLETED,
        RecordStatus.FAILED,
        RecordStatus.NEEDS_ATTENTION,
        RecordStatus.CANCELLED,
    }
)
#: The statuses of an execution that nothing can cancel any more.
_ENDED: Final = FINISHED - {RecordStatus.NEEDS_ATTENTION}
_POLL_FIRST_S: Final = 0.005
_POLL_MAX_S: Final = 0.1


def count_decision(router: StoreHolder, action: str, record: str) -> None:
    """Count an operator's decision in the store, for ``/metrics``.

    After the decision is recorded: a store that cannot count it is logged,
    not raised (the decision stands; only the metric misses it).
    """
    store = router.durable_store
    if not isinstance(store, DecisionTally):
        return
    try:
        store.note_decision(action, record)
    except StoreError as exc:
        import logging  # imported once there is a failure to say

        logging.getLogger("intentusnet.durable").warning(
            "the %s decision %s was not counted: %s", action, record, exc
        )


def require_durable(router: StoreHolder, execution_id: str = "") -> DurableStore:
    """The router's store, which must keep keys and resume links.

    Raises:
        ResumeRefused: ``no_store``.
    """
    store = router.durable_store
    if store is None:
        raise ResumeRefused(
            "no_store",
            execution_id or "the execution",
            "the router's store keeps no idempotency keys or resume links "
            f"({type(router.store).__name__}); the file, memory and PostgreSQL "
            "stores do",
        )
    return store


def load_record(router: StoreHolder, execution_id: str) -> ExecutionRecord:
    """Load ``execution_id`` from the router's store, which its caller checked."""
    store = router.store
    assert store is not None  # require_durable (or a WaitStore) checked it
    return store.load(execution_id)


def _has_record(router: StoreHolder, execution_id: str) -> bool:
    try:
        load_record(router, execution_id)
    except RecordNotFound:
        return False  # its resumer died before its record opened
    return True


def chain_head(router: StoreHolder, execution_id: str) -> str:
    """The newest record of ``execution_id``'s resume chain (itself if none)."""
    store = require_durable(router, execution_id)
    current, seen = execution_id, {execution_id}
    while True:
        following = store.resumed_by(current)
        if following is None or following in seen:
            return current
        if not _has_record(router, following):
            return current
        seen.add(following)
        current = following


def unfinished_head(
    router: StoreHolder,
    execution_id: str,
    refused: Callable[[str, str, str], IntentusNetError],
    ended: AbstractSet[RecordStatus],
    nothing: str,
) -> tuple[str, ExecutionRecord]:
    """The newest record of the chain and its id; ``refused`` ``finished`` if ended.

    ``nothing`` ends the refusal's detail: what an ended execution leaves to do.
    """
    head = chain_head(router, execution_id)
    record = load_record(router, head)
    status = record.header.status
    if status in ended:
        raise refused(
            "finished",
            execution_id,
            f"record {head}, the newest of its chain, is {status.value}: {nothing}",
        )
    return head, record


def chain_of(router: StoreHolder, record: ExecutionRecord) -> list[ExecutionRecord]:
    """``record`` and the records it resumes, back to the first: oldest first.

    Raises:
        ResumeRefused: ``chain_broken``, a record of the chain is gone (its
            steps cannot be known, so none may be guessed).
    """
    chain, seen = [record], {record.execution_id}
    while (previous := resume_of(chain[-1])) is not None and previous not in seen:
        seen.add(previous)
        try:
            chain.append(load_record(router, previous))
        except RecordNotFound:
            raise ResumeRefused(
                "chain_broken",
                record.execution_id,
                f"record {previous}, which it resumes, is gone: the steps it "
                "ended are unknown",
            ) from None
    chain.reverse()
    return chain


def recorded_answer(record: ExecutionRecord) -> AgentResponse:
    """A finished record's answer, marked as a replay (no agent ran)."""
    response = AgentResponse.model_validate(record.final_response or {})
    metadata = response.metadata.model_copy(
        update={"from_replay": True, "original_execution_id": record.execution_id}
    )
    return response.model_copy(update={"metadata": metadata})


def cancelling(request: JSONObject) -> JSONObject:
    """The ``OPERATOR_DECISION`` data of a cancellation, from its request."""
    return {"action": "cancel", **request}


def cancelled(response: AgentResponse, request: JSONObject) -> AgentResponse:
    """The answer of a cancelled execution: a ``CANCELLED`` error naming who."""
    error = ErrorInfo(
        code=ErrorCode.CANCELLED,
        message=f"execution cancelled by {request.get('by')} at {request.get('atUtc')}",
        retryable=False,
        details=cancelling(request),
    )
    return response.model_copy(
        update={"status": "error", "payload": None, "error": error}
    )


def cancel(
    router: StoreHolder, execution_id: str, *, by: str, via: str
) -> tuple[str, bool]:
    """Cancel an execution: close it now, or ask its router to stop it.

    A cancel request (``by``, ``via``, ``atUtc``) is written into the store
    under the chain's first execution, once. An execution no live process
    runs (interrupted, parked, or resolved and waiting) is closed at once: a
    new record of its chain holds an ``OPERATOR_DECISION`` (``cancel``) and a
    ``CANCELLED`` answer. A running one is stopped by its router at its next
    step boundary (``cancel.py``), and a resume of its chain closes it
    instead of running it. Returns the record that holds (or will hold) the
    cancellation and whether it is closed already.

    Raises:
        CancelRefused: ``finished`` (completed, failed or cancelled),
            ``cancelled`` (another request came first), ``no_store``.
        RecordNotFound, InvalidExecutionId: no such record.
    """
    store = router.durable_store
    if not isinstance(store, CancelStore):
        raise CancelRefused(
            "no_store", execution_id, "the store keeps no cancel requests"
        )
    head, record = unfinished_head(
        router, execution_id, CancelRefused, _ENDED, "there is nothing to cancel"
    )
    request: JSONObject = {"by": by, "via": via, "atUtc": utc_now()[0]}
    earlier = store.request_cancel(resume_origin(record), request)
    if earlier is not None:
        raise CancelRefused(
            "cancelled",
            execution_id,
            f"{earlier.get('by')} asked to cancel it at {earlier.get('atUtc')}",
        )
    count_decision(router, "cancel", resume_origin(record))
    closed = close_cancelled(router, head, request)
    return (head, False) if closed is None else (closed, True)


def cancel_request(router: StoreHolder, record: ExecutionRecord) -> JSONObject | None:
    """The cancel request of ``record``'s chain, if one was made."""
    store = router.durable_store
    if not isinstance(store, CancelStore):
        return None
    origin = resume_origin(record)
    return store.cancel_requests([origin]).get(origin)


def close_cancelled(
    router: StoreHolder, execution_id: str, request: JSONObject
) -> str | None:
    """Close ``execution_id``'s chain as cancelled, unless a live process runs it.

    Returns the new record's id; ``None`` when the chain is running (its
    router stops it) or ended meanwhile.
    """
    store = require_durable(router, execution_id)
    head = chain_head(router, execution_id)
    hold = store.hold_record(head)
    if hold is None:
        return None
    try:
        record = load_record(router, head)
        if record.header.status in _ENDED or chain_head(router, head) != head:
            return None
        return _close_cancelled(router, record, hold, request)
    finally:
        hold.release()


def _close_cancelled(
    router: StoreHolder, record: ExecutionRecord, hold: RecordHold, request: JSONObject
) -> str:
    return _close(
        router,
        record,
        hold,
        EventType.OPERATOR_DECISION,
        cancelling(request),
        lambda answer: cancelled(answer, request),
    )


def parked(response: AgentResponse, attention: JSONObject) -> AgentResponse:
    """The answer of a parked execution: a ``NEEDS_ATTENTION`` error."""
    error = ErrorInfo(
        code=ErrorCode.NEEDS_ATTENTION,
        message=f"execution parked, needs attention: {attention.get('message')}",
        retryable=False,
        details=attention,
    )
    return response.model_copy(
        update={"status": "error", "payload": None, "error": error}
    )


def resume(
    router: Routing,
    execution_id: str,
    *,
    force: bool = False,
    held: RecordHold | None = None,
) -> AgentResponse:
    """Resume the newest record of ``execution_id``'s chain; return its answer.

    ``held``: the caller's hold of ``execution_id``'s record (a queued
    execution its starter took), used while that record is the chain's
    newest; the caller keeps it and lets it go.

    Raises:
        ResumeRefused: complete, owned by a live process, no agent, changed
            configuration (unless ``force``), or no store that can.
        RecordNotFound, InvalidExecutionId: no such record.
    """
    store = require_durable(router, execution_id)
    while True:
        head = chain_head(router, execution_id)
        record = load_record(router, head)
        _refuse_finished(record, execution_id)
        if held is not None and head == execution_id:
            hold = held  # held before it was read: nothing to look at again
            break
        taken = store.hold_record(head)
        if taken is None:
            raise ResumeRefused(
                "owned",
                head,
                "a live process is writing or resuming it; it is not interrupted",
            )
        hold = taken
        # Held: nobody else can start resuming it now. Look again: it may have
        # finished, or been resumed, before the hold was taken.
        if chain_head(router, head) != head:
            hold.release()
            continue
        record = load_record(router, head)
        break
    try:
        _refuse_finished(record, execution_id)
        _refuse_abandoned(router, store, record)
        request = cancel_request(router, record)
        if request is not None:  # cancelled: closed, never run again
            closed = _close_cancelled(router, record, hold, request)
            return recorded_answer(load_record(router, closed))
        # Linked once the new record says what it resumes (its INTENT_RECEIVED
        # on disk), before its agent runs: a record the chain links to always
        # names the record before it, so its chain can be read back to the
        # first record (chain_of).
        env, options = _resumption(router, record, force, opened=hold.link)
        return router.route(env, options)
    finally:
        if hold is not held:
            hold.release()


def resolve(
    router: StoreHolder,
    execution_id: str,
    *,
    step: int | None,
    happened: bool,
    output: JSONValue = None,
    by: str,
    via: str,
) -> str:
    """Record an operator's decision about a parked execution.

    A new record of the chain (``resumeOf`` the parked record) holds an
    ``OPERATOR_DECISION`` event, ``by`` whom, ``via`` which door, and when.
    Parked ``side_effect_in_doubt``: ``resolve``, the ``step`` in doubt,
    whether it ``happened`` and, if so, the ``output`` it gave. Parked
    ``attempts_exhausted`` (no step, ``happened`` false): ``retry``, the
    attempts counted again from it. It is closed unfinished
    (``incomplete``): recovery, or ``resume``, finishes the execution with it
    in the journal, serving the step's output (it happened) or running it
    (it did not, or the execution is tried again). Returns its id.

    Raises:
        ResolveRefused: ``not_parked``, ``not_in_doubt`` (parked for another
            reason, such as ``nondeterminism``: fork or cancel it),
            ``wrong_step``, ``owned`` or ``resolved`` (another operator),
            ``no_store``.
        InvalidResolution: ``output`` is not JSON, or is given for a step that
            did not happen.
        RecordNotFound, InvalidExecutionId: no such record.
    """
    if router.durable_store is None:
        raise ResolveRefused(
            "no_store", execution_id, "the store keeps no resume links"
        )
    if not happened and output is not None:
        raise InvalidResolution(
            "an output is given only for a step that happened (--happened)"
        )
    try:
        output_hash = hash_bytes(canonical_json(output))
    except EnvelopeValidationError as exc:
        raise InvalidResolution(f"the output is not JSON: {exc}") from None
    store = require_durable(router, execution_id)
    head = chain_head(router, execution_id)
    found = load_record(router, head)
    parked = _deciding(router, found)
    if parked is not None:  # another operator's record, its decision being written
        head, found = parked.execution_id, parked
    attention = _in_doubt(found, execution_id, step, happened)
    hold = store.hold_record(head)
    if hold is None:
        raise ResolveRefused(
            "owned", execution_id, "another operator is deciding about it now"
        )
    try:
        if (newest := chain_head(router, head)) != head:
            _in_doubt(load_record(router, newest), execution_id, step, happened)  # why
            raise ResolveRefused(
                "resolved", execution_id, f"another decision came first: {newest}"
            )
        record = load_record(router, head)
        _in_doubt(record, execution_id, step, happened)
        recorder, new_id = _next_record(
            router, record, hold, "resolve", attempts_from=True
        )
        decision: JSONObject = {"action": "retry"}
        if step is not None:  # a side effect in doubt
            chain = chain_of(router, record)
            [doubt] = [s for s in chain_steps(chain) if s.number == step]
            decision = {
                "action": "resolve",
                "step": step,
                "name": doubt.name,
                "argsHash": doubt.args_hash,
                "parent": doubt.parent,
                "happened": happened,
            }
        decision |= {
            "by": by,
            "via": via,
            "atUtc": utc_now()[0],
            "parked": head,
            "reason": attention.get("reason"),
        }
        if happened:
            decision["output"] = output
            decision["outputHash"] = output_hash
        recorder.event(EventType.OPERATOR_DECISION, decision, now=True)
        recorder.abandon()  # incomplete: recovery, or resume, finishes it
        if recorder.error is not None:
            raise StoreError(f"could not resolve {head}: {recorder.error}")
        count_decision(router, "resolve", new_id)
        return new_id
    finally:
        hold.release()


def _deciding(router: StoreHolder, record: ExecutionRecord) -> ExecutionRecord | None:
    """The parked record ``record`` decides about, while it is being written.

    Another ``resolve`` (or ``cancel``) links its record into the chain before it
    writes its decision, holding the parked record all the while: to a second
    operator that record is a decision being made, not a running execution.
    """
    resumed = resume_of(record)
    if record.header.status is not RecordStatus.IN_PROGRESS or resumed is None:
        return None
    parked = load_record(router, resumed)
    return parked if parked.header.status is RecordStatus.NEEDS_ATTENTION else None


def _in_doubt(
    record: ExecutionRecord, asked: str, step: int | None, happened: bool
) -> JSONObject:
    """The attention of ``record``, parked so that this resolution fits.

    A side effect in doubt is resolved naming its step; an execution whose
    attempts ran out is tried again (no step, not happened).

    Raises:
        ResolveRefused: ``resolved``, ``not_parked``, ``not_in_doubt`` or
            ``wrong_step``.
    """
    status = record.header.status
    attention = next(
        (e.data for e in record.events if e.type is EventType.ATTENTION_NEEDED), None
    )
    decided = next(
        (e.data for e in record.events if e.type is EventType.OPERATOR_DECISION), None
    )
    if decided is not None and status is RecordStatus.INCOMPLETE:
        raise ResolveRefused(
            "resolved",
            asked,
            f"{decided.get('by')} resolved it ({decided.get('action')}) at "
            f"{decided.get('atUtc')} (record {record.execution_id}); it waits "
            "for recovery or resume",
        )
    if status is not RecordStatus.NEEDS_ATTENTION or attention is None:
        raise ResolveRefused(
            "not_parked",
            asked,
            f"record {record.execution_id}, the newest of its chain, is "
            f"{status.value}, not needs_attention",
        )
    reason, parked_step = attention.get("reason"), attention.get("step")
    if reason == "attempts_exhausted":
        if happened:
            raise ResolveRefused(
                "not_in_doubt",
                asked,
                "it was parked for attempts_exhausted: no step is in doubt; "
                "--not-happened (without --step) lets the next resume try again",
            )
        if step is not None:
            raise ResolveRefused(
                "wrong_step",
                asked,
                f"it was parked for attempts_exhausted, not on step {step}: "
                "give no step to try it again",
            )
        return attention
    if reason != "side_effect_in_doubt":
        step_text = f" {parked_step}" if type(parked_step) is int else ""
        raise ResolveRefused(
            "not_in_doubt",
            asked,
            f"it was parked for {reason}, not a side effect in doubt: no step "
            f"can be resolved; fork it from step{step_text} on today's code "
            "(intentusnet fork), or cancel it",
        )
    if parked_step != step:
        named = "no step is named" if step is None else f"step {step} is not it"
        raise ResolveRefused(
            "wrong_step",
            asked,
            f"{named}: step {parked_step} ({attention.get('name')}) is",
        )
    return attention


def park(router: StoreHolder, execution_id: str, reason: str, message: str) -> str:
    """Close ``execution_id``'s chain as ``needs_attention`` without running it.

    A new record (``resumeOf`` the newest of the chain) holds an
    ``ATTENTION_NEEDED`` event with ``reason`` and ``message`` and a
    ``NEEDS_ATTENTION`` answer. Returns its id.

    Raises:
        ResumeRefused: ``complete`` or ``owned``, as for :func:`resume`.
    """
    store = require_durable(router, execution_id)
    head = chain_head(router, execution_id)
    record = load_record(router, head)
    _refuse_finished(record, execution_id)
    hold = store.hold_record(head)
    if hold is None:
        raise ResumeRefused("owned", head, "a live process is writing or resuming it")
    try:
        record = load_record(router, head)
        _refuse_finished(record, execution_id)
        if chain_head(router, head) != head:
            raise ResumeRefused("owned", head, "another process resumed it meanwhile")
        _refuse_abandoned(router, store, record)
        attention: JSONObject = {
            "reason": reason,
            "message": message,
            "resumeOf": head,
        }
        return _close(
            router,
            record,
            hold,
            EventType.ATTENTION_NEEDED,
            attention,
            lambda answer: parked(answer, attention),
        )
    finally:
        hold.release()


def _close(
    router: StoreHolder,
    record: ExecutionRecord,
    hold: RecordHold,
    event: EventType,
    data: JSONObject,
    answer: Callable[[AgentResponse], AgentResponse],
) -> str:
    """Finish ``record``'s held chain without running it; return the new record.

    A new record (``resumeOf`` it) holds the event and the answer ``answer``
    makes of an empty one; ``record`` is linked to it once it names
    ``record``, as a resume's is.

    Raises:
        StoreError: the record could not be written.
    """
    recorder, new_id = _next_record(router, record, hold, "close")
    recorder.event(event, data)
    recorder.complete(
        answer(AgentResponse(metadata=ResponseMetadata(execution_id=new_id)))
    )
    if recorder.error is not None:
        raise StoreError(f"could not close {record.execution_id}: {recorder.error}")
    return new_id


def _next_record(
    router: StoreHolder,
    record: ExecutionRecord,
    hold: RecordHold,
    doing: str,
    *,
    attempts_from: bool = False,
) -> tuple[Recorder, str]:
    """Open and link the next record of ``record``'s held chain (``resumeOf`` it).

    ``attempts_from``: its attempts are counted again from it (a retry).
    """
    head, new_id = record.execution_id, new_execution_id()
    attempt = resume_attempt(record) + 1
    received: JSONObject = {
        "resumeOf": head,
        "resumeOrigin": resume_origin(record),
        "resumeAttempt": attempt,
    }
    if attempts_from:
        received["attemptsFrom"] = attempt
    recorder = Recorder(
        router.store,  # type: ignore[arg-type]  # require_durable checked it
        record.envelope,
        record.header.envelope_hash,
        _request_id(record),
        execution_id=new_id,
        parent_execution_id=record.header.parent_execution_id,
        received=received,
        configuration=record.header.configuration,
        announce=True,
    )
    if recorder.error is not None:
        raise StoreError(f"could not {doing} {head}: {recorder.error}")
    hold.link(new_id)  # once the record names what it resumes, as resume
    return recorder, new_id


def _request_id(record: ExecutionRecord) -> str:
    metadata = record.envelope.get("metadata")
    found = metadata.get("requestId") if isinstance(metadata, dict) else None
    return found if isinstance(found, str) else ""


def _refuse_finished(record: ExecutionRecord, asked: str) -> None:
    status = record.header.status
    if status in FINISHED:
        raise ResumeRefused(
            "complete",
            asked,
            f"record {record.execution_id} finished ({status.value}); "
            "nothing is left to resume",
        )


def _refuse_abandoned(
    router: StoreHolder, store: DurableStore, record: ExecutionRecord
) -> None:
    """Refuse a resume record its chain does not link to.

    Its resumer died after the record said what it resumes and before it
    linked it (so before its agent ran): the record it resumes is still the
    chain's newest, and is resumed instead.
    """
    previous = resume_of(record)
    if previous is not None and store.resumed_by(previous) != record.execution_id:
        if not _has_record(router, previous):  # deleted, with its link
            chain_of(router, record)  # raises chain_broken
        raise ResumeRefused(
            "abandoned",
            record.execution_id,
            f"its resumer died before linking it to {previous}, which is "
            "resumed instead (nothing ran in it)",
        )


def _resumption(
    router: Routing,
    record: ExecutionRecord,
    force: bool,
    *,
    opened: Callable[[str], None],
) -> tuple[IntentEnvelope, ExecutionOptions]:
    """The envelope and options of ``record``'s resumed execution, once allowed."""
    header = record.header
    env = IntentEnvelope.model_validate(record.envelope)
    if not router.registry.candidates(env.intent):
        raise ResumeRefused(
            "no_agent",
            header.execution_id,
            f"no agent of this router handles intent {env.intent.name!r} "
            f"v{env.intent.version}",
        )
    recorded = (header.configuration or {}).get("fingerprint")
    now = configuration(router.registry, env.intent, env.routing.strategy)
    today = now.get("fingerprint")
    if recorded is not None and recorded != today and not force:
        raise ResumeRefused(
            "configuration_changed",
            header.execution_id,
            f"the router's agents for the intent changed since it ran (recorded "
            f"configuration {recorded}, today {today}); force=True resumes anyway",
        )
    journal = Journal(chain_of(router, record), store=router.store)
    received = journal.resumption()
    key = idempotency_key_of(record)
    if key is not None:
        received["idempotencyKey"] = key
    # Recorded as a re-run is: never answered from the cache.
    routing = env.routing.model_copy(update={"cache": CacheDirective.BYPASS})
    options = ExecutionOptions(
        execution_id=new_execution_id(),
        parent_execution_id=header.parent_execution_id,
        received=received,
        cassette=journal,
        origin_execution_id=journal.origin,
        opened=opened,
    )
    return env.model_copy(update={"routing": routing}), options


def route_with_key(
    router: Routing,
    env: IntentEnvelope,
    key: str,
    envelope_hash: str,
    opened: Callable[[str], None] | None = None,
) -> AgentResponse:
    """Route ``env`` (hashed ``envelope_hash``) under idempotency key ``key``.

    See the module's text. ``key`` was checked where it entered
    (``route``/``route_intent``).
    ``opened`` is told the id of the key's execution once its record is open
    (see ``ExecutionOptions.opened``), at most once: when this call opens it,
    or finds it open and not finished (running elsewhere, or interrupted).

    Raises:
        InvalidIdempotencyKey: the store keeps no keys.
        IdempotencyConflict: the key was used with another envelope.
        IdempotencyTimeout: the key's execution still runs after the wait.
    """
    store = router.durable_store
    if store is None:
        raise InvalidIdempotencyKey(
            "idempotency keys need a router whose store keeps them (the file, "
            f"memory and PostgreSQL stores do), not {type(router.store).__name__}"
        )
    timeout_ms = env.routing.timeout_ms
    waited = DEFAULT_KEY_WAIT_S if timeout_ms is None else timeout_ms / 1000
    deadline = time.monotonic() + waited
    new_id = new_execution_id()
    delay = _POLL_FIRST_S
    told = _Once(opened)
    while True:
        claim = store.claim_key(key, envelope_hash, new_id)
        if claim.envelope_hash != envelope_hash:
            claim.release()
            raise IdempotencyConflict(
                key, claim.envelope_hash, envelope_hash, claim.execution_id
            )
        if claim.held:
            try:
                answer = _act(router, env, key, claim, told, envelope_hash)
            finally:
                claim.release()
            if answer is not None:
                return answer
        elif told.pending and _has_record(router, claim.execution_id):
            told(claim.execution_id)  # a live process runs it
        if time.monotonic() >= deadline:
            raise IdempotencyTimeout(
                key, claim.execution_id, waited, _never_written(router, store, claim)
            )
        time.sleep(delay)
        delay = min(delay * 2, _POLL_MAX_S)


def _never_written(router: Routing, store: DurableStore, claim: KeyClaim) -> str:
    """Why the key's execution cannot start, if its record can never load; else "".

    A record file that exists, that no process holds, and that holds nothing
    to load was left by a process stopped between creating it and writing its
    first line: nothing ran, and the id cannot be opened again until the file
    is removed (the store's own message says how).
    """
    try:
        hold = store.hold_record(claim.execution_id)
    except RecordNotFound:
        return ""
    if hold is None:
        return ""  # a live process writes it: still running
    try:
        load_record(router, claim.execution_id)
    except RecordNotFound as exc:
        return str(exc)
    finally:
        hold.release()
    return ""


class _Once:
    """Calls ``opened`` once, the first time it is called."""

    def __init__(self, opened: Callable[[str], None] | None) -> None:
        self._opened = opened

    @property
    def pending(self) -> bool:
        """Whether ``opened`` is yet to be called."""
        return self._opened is not None

    def __call__(self, execution_id: str) -> None:
        opened, self._opened = self._opened, None
        if opened is not None:
            opened(execution_id)


def _act(
    router: Routing,
    env: IntentEnvelope,
    key: str,
    claim: KeyClaim,
    told: _Once,
    envelope_hash: str,
) -> AgentResponse | None:
    """Answer for a held claim; ``None``: its execution is running, wait."""
    execution_id = claim.execution_id
    received: JSONObject = {"idempotencyKey": key}
    fresh = ExecutionOptions(
        execution_id=execution_id,
        received=received,
        opened=told if told.pending else None,
        envelope_hash=envelope_hash,  # hashed once, to claim the key
    )
    if claim.created:
        return _run(router, env, fresh)
    try:
        head = chain_head(router, execution_id)
        record = load_record(router, head)
    except RecordNotFound:
        # Its claimer died between the claim and opening the record (or, on
        # the file store, is about to open it): nothing was done, so it runs
        # under the claimed id, here or there (the record's creation decides).
        return _run(router, env, fresh)
    status = record.header.status
    if status in FINISHED:
        return recorded_answer(record)
    told(execution_id)  # open, and being finished (by a resumer, or here)
    if status is RecordStatus.IN_PROGRESS:
        return None  # a live resumer is finishing it
    if status is RecordStatus.WAITING:  # recovery resumes it when due
        return waiting_answer(head, waiting_of(record) or {})
    try:
        return resume(router, head)
    except ResumeRefused as refused:
        if refused.reason in ("owned", "complete"):
            return None  # another resumer got there first: its answer comes
        raise


def _run(
    router: Routing, env: IntentEnvelope, fresh: ExecutionOptions
) -> AgentResponse | None:
    """Run the key's execution; ``None``: another caller opened its record first."""
    try:
        return router.route(env, fresh)
    except RecordExists:
        return None  # the record's exclusive creation chose the other: wait
