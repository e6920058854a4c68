"""The one exception tree of IntentusNet.

Every error a user can catch derives from :class:`IntentusNetError`. Each class has
a stable ``code`` (snake_case, never reused) and the ``exit_code`` the CLI exits
with (its parent's, unless it sets another), and also subclasses the builtin it
behaves like::

    IntentusNetError
    ├── EnvelopeValidationError (ValueError)      envelope_invalid       2
    ├── AgentRegistrationError (ValueError)       agent_registration     2
    ├── StoreError (OSError)                      store_error            1
    │   ├── InvalidExecutionId (ValueError)       invalid_execution_id   3
    │   ├── RecordNotFound (KeyError)             record_not_found       3
    │   ├── RecordExists (FileExistsError)        record_exists          1
    │   ├── RecordIntegrityError (ValueError)     integrity_failure      6
    │   │   └── SignatureError                    signature_failure      6
    │   └── UnsupportedSchemaVersion (ValueError) unsupported_schema     6
    ├── ReplayError                               replay_error           1
    │   ├── ReplayNotAllowed                      replay_not_allowed     4
    │   ├── ReplayHashMismatch                    replay_hash_mismatch   5
    │   ├── CassetteMiss (LookupError)            cassette_miss          7
    │   │   ├── SideEffectMismatch                side_effect_mismatch   7
    │   │   ├── NondeterminismError               nondeterminism         7
    │   │   └── SideEffectInDoubt                 side_effect_in_doubt   7
    │   ├── ReplayedStepError (RuntimeError)      replayed_step_error    1
    │   ├── CacheMiss (LookupError)               cache_miss             3
    │   │   └── RequestNotRecorded                request_not_recorded   3
    │   ├── CachedCallError (RuntimeError)        cached_call_error      1
    │   └── InvalidRerunOption (ValueError)       invalid_rerun_option   2
    ├── CacheError (OSError)                      cache_error            1
    ├── NotCacheable (TypeError)                  not_cacheable          2
    ├── SideEffectRefused (RuntimeError)          side_effect_refused    1
    ├── SigningKeyError (ValueError)              signing_key_error      2
    ├── LogError (OSError)                        log_error              1
    │   └── LogIntegrityError (ValueError)        log_integrity_failure  6
    ├── PriceTableError (ValueError)              price_table_invalid    2
    ├── RerunWorkerError (RuntimeError)           rerun_worker_failed    2
    ├── NetworkBlocked (ConnectionError)          network_blocked        7
    ├── InvalidIdempotencyKey (ValueError)        invalid_idempotency_key 2
    ├── IdempotencyConflict (ValueError)          idempotency_conflict   2
    ├── IdempotencyTimeout (TimeoutError)         idempotency_timeout    1
    ├── ExecutionPending (TimeoutError)           execution_pending      1
    ├── ResumeRefused                             resume_refused         4
    ├── SignalRefused                             signal_refused         4
    ├── InvalidSignal (ValueError)                invalid_signal         2
    ├── ExecutionWaiting                          execution_waiting      1
    ├── WaitTimedOut (TimeoutError)               wait_timed_out         1
    ├── ReaskRefused (ValueError)                 reask_refused          2
    ├── InvalidQueue (ValueError)                 invalid_queue          2
    ├── UnknownQueue (LookupError)                unknown_queue          2
    └── ServiceError                              service_error          1
        ├── ServiceUnavailable (ConnectionError)  service_unavailable    1
        ├── Unauthorized (PermissionError)        unauthorized           1
        ├── Forbidden (PermissionError)           forbidden              1
        ├── RequestTooLarge (ValueError)          request_too_large      2
        ├── RequestInvalid (ValueError)           request_invalid        2
        │   └── MalformedRequest                  malformed_request      2
        └── ClientDisconnected (ConnectionError)  client_disconnected    1

``ServiceError`` and its subclasses come from the HTTP service (``intentusnet
serve``) and its client: the client raises them for answers the in-process
library has no error for, and the library's own errors for everything else.

Agent faults during routing are not exceptions: they come back as ``ErrorInfo`` on
the ``AgentResponse`` (see ``envelope.ErrorCode``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

__all__ = [
    "AgentRegistrationError",
    "CacheError",
    "CacheMiss",
    "CachedCallError",
    "CancelRefused",
    "CassetteMiss",
    "ClientDisconnected",
    "EnvelopeValidationError",
    "ExecutionCancelled",
    "ExecutionPending",
    "ExecutionWaiting",
    "Forbidden",
    "IdempotencyConflict",
    "IdempotencyTimeout",
    "IntentusNetError",
    "InvalidExecutionId",
    "InvalidIdempotencyKey",
    "InvalidQueue",
    "InvalidRerunOption",
    "InvalidResolution",
    "InvalidSignal",
    "LogError",
    "LogIntegrityError",
    "MalformedRequest",
    "NetworkBlocked",
    "NondeterminismError",
    "NotCacheable",
    "PriceTableError",
    "ReaskRefused",
    "RecordExists",
    "RecordIntegrityError",
    "RecordNotFound",
    "ReplayError",
    "ReplayHashMismatch",
    "ReplayNotAllowed",
    "ReplayedStepError",
    "RequestInvalid",
    "RequestNotRecorded",
    "RequestTooLarge",
    "RerunWorkerError",
    "ResolveRefused",
    "ResumeRefused",
    "ServiceError",
    "ServiceUnavailable",
    "SideEffectInDoubt",
    "SideEffectMismatch",
    "SideEffectRefused",
    "SignalRefused",
    "SignatureError",
    "SigningKeyError",
    "StoreError",
    "Unauthorized",
    "UnknownQueue",
    "UnsupportedSchemaVersion",
    "WaitTimedOut",
]


class IntentusNetError(Exception):
    """Root of every error IntentusNet raises on purpose."""

    code: ClassVar[str] = "intentusnet_error"
    exit_code: ClassVar[int] = 1


class EnvelopeValidationError(IntentusNetError, ValueError):
    """An envelope (or a value meant for one) is not valid.

    Attributes:
        path: the JSON path of the offending value, e.g. ``payload.items[3].price``,
            or ``""`` when the problem is the envelope as a whole.
    """

    code: ClassVar[str] = "envelope_invalid"
    exit_code: ClassVar[int] = 2

    def __init__(self, message: str, path: str = "") -> None:
        self.path = path
        shown = path if len(path) <= 120 else path[:60] + " ... " + path[-40:]
        super().__init__(f"{shown}: {message}" if path else message)


class AgentRegistrationError(IntentusNetError, ValueError):
    """An agent cannot be registered (duplicate name, bad definition)."""

    code: ClassVar[str] = "agent_registration"
    exit_code: ClassVar[int] = 2


class StoreError(IntentusNetError, OSError):
    """The execution store failed to read or write."""

    code: ClassVar[str] = "store_error"


class InvalidExecutionId(StoreError, ValueError):
    """An execution id is not of the allowed form; no file was touched."""

    code: ClassVar[str] = "invalid_execution_id"
    exit_code: ClassVar[int] = 3


class RecordNotFound(StoreError, KeyError):
    """No record with that execution id exists in the store."""

    code: ClassVar[str] = "record_not_found"
    exit_code: ClassVar[int] = 3

    def __str__(self) -> str:
        # KeyError would quote the message; keep it readable.
        return str(self.args[0]) if self.args else "record not found"


class RecordExists(StoreError, FileExistsError):
    """A record with that execution id already exists; records are never rewritten."""

    code: ClassVar[str] = "record_exists"


class RecordIntegrityError(StoreError, ValueError):
    """A record file is damaged: broken hash chain, edited or corrupt line.

    Attributes:
        execution_id: the record concerned.
        line: the 1-based line number where verification failed, if known.
    """

    code: ClassVar[str] = "integrity_failure"
    exit_code: ClassVar[int] = 6

    def __init__(self, message: str, execution_id: str = "", line: int | None = None):
        self.execution_id = execution_id
        self.line = line
        where = f" at line {line}" if line is not None else ""
        prefix = f"record {execution_id}{where}: " if execution_id else ""
        super().__init__(prefix + message)


class SignatureError(RecordIntegrityError):
    """A record's signatures do not vouch for it, checked against a ``KeyRing``.

    Raised where keys are configured (``ReplayEngine(..., keys=...)``): the
    record was changed after it was signed (``signed-invalid``), was signed by
    a key the ring does not hold (``unknown-key``), or is not signed while the
    ring requires a signature (``unsigned``). ``force=True`` does not override
    it. Added in 0.1.0.

    Attributes:
        status: the ``SignatureStatus`` value, e.g. ``"signed-invalid"``.
        detail: what was found, one sentence.
    """

    code: ClassVar[str] = "signature_failure"

    def __init__(self, status: str, detail: str, execution_id: str = "") -> None:
        self.status = status
        self.detail = detail
        super().__init__(f"signature check failed ({status}): {detail}", execution_id)


class UnsupportedSchemaVersion(RecordIntegrityError):
    """A record was written in a format version this release cannot read."""

    code: ClassVar[str] = "unsupported_schema"


class ReplayError(IntentusNetError):
    """Replay could not produce a result."""

    code: ClassVar[str] = "replay_error"


class ReplayNotAllowed(ReplayError):
    """The record is not replayable; ``reason`` says why.

    Attributes:
        reason: the record's ``replayableReason``.
        execution_id: the record concerned.
    """

    code: ClassVar[str] = "replay_not_allowed"
    exit_code: ClassVar[int] = 4

    def __init__(self, reason: str, execution_id: str = "") -> None:
        self.reason = reason
        self.execution_id = execution_id
        of = f"record {execution_id} " if execution_id else "record "
        super().__init__(f"{of}is not replayable ({reason}); use force to override")


class ReplayHashMismatch(ReplayError):
    """The envelope given for replay is not the one the record was made from.

    Attributes:
        expected: the recorded envelope hash.
        actual: the hash of the envelope given.
        paths: JSON paths in the hashed view where the two differ.
    """

    code: ClassVar[str] = "replay_hash_mismatch"
    exit_code: ClassVar[int] = 5

    def __init__(self, expected: str, actual: str, paths: Sequence[str]) -> None:
        self.expected = expected
        self.actual = actual
        self.paths = list(paths)
        differ = ", ".join(self.paths) if self.paths else "(no field-level difference)"
        super().__init__(
            f"envelope hash mismatch: recorded {expected}, given {actual}; "
            f"differs at {differ}"
        )


class CassetteMiss(ReplayError, LookupError):
    """A re-run needed a step that the original record does not hold.

    Raised by ``intentusnet.rerun`` after the re-run finished routing (the
    agent may have caught it; it is raised again regardless). The re-run's own
    record exists and shows where it stopped. Added in 0.1.0.

    Attributes:
        name: the step's name.
        args_hash: the canonical hash of the arguments it was called with.
        occurrence: 1-based: which call of this step with these arguments.
        candidates: the nearest recorded steps, one description each.
        execution_id: the record re-run.
        rerun_execution_id: the record of the re-run, once known.
    """

    code: ClassVar[str] = "cassette_miss"
    exit_code: ClassVar[int] = 7

    def __init__(
        self,
        name: str,
        args_hash: str,
        *,
        occurrence: int = 1,
        candidates: Sequence[str] = (),
        execution_id: str = "",
        why: str = "",
    ) -> None:
        self.name = name
        self.args_hash = args_hash
        self.occurrence = occurrence
        self.candidates = list(candidates)
        self.execution_id = execution_id
        self.rerun_execution_id: str | None = None
        where = f"record {execution_id}" if execution_id else "the record"
        nth = f" (call {occurrence} with these arguments)" if occurrence > 1 else ""
        message = (
            f"step {name!r} with args {args_hash[:19]}...{nth} is not in {where}"
            + (f": {why}" if why else "")
        )
        if self.candidates:
            message += "; nearest recorded: " + "; ".join(self.candidates)
        else:
            message += "; no recorded step is like it"
        super().__init__(message)


class SideEffectMismatch(CassetteMiss):
    """A re-run would repeat a side-effect step with other arguments.

    A step marked ``side_effect=True`` (an e-mail sent, a row written) never
    runs again on a re-run: it is served from the record. When the re-run needs
    it with arguments the record does not hold while the record holds a call of
    that step not yet served, running it would do something the original run
    did not, so the re-run stops instead. Added in 0.1.0.
    """

    code: ClassVar[str] = "side_effect_mismatch"


class ReplayedStepError(ReplayError, RuntimeError):
    """A step that failed in the original run fails the same way in a re-run.

    Raised inside agent code by a strict re-run in place of the recorded
    exception, which cannot be rebuilt from the record. What is raised is a
    subclass named like the recorded type, with the recorded message, so the
    re-run records the same failure; when the recorded type is a builtin
    exception (``TimeoutError``, ``KeyError``, ...) it is also an instance of
    that type, so ``except TimeoutError`` still catches it. Added in 0.1.0.

    Attributes:
        name: the step's name.
        error_type: the recorded exception's type name, e.g. ``TimeoutError``.
        message: the recorded exception's message (also ``str()`` of this).
    """

    code: ClassVar[str] = "replayed_step_error"

    def __init__(self, name: str, error_type: str, message: str) -> None:
        self.name = name
        self.error_type = error_type
        self.message = message
        super().__init__(message)

    def __str__(self) -> str:
        # The recorded text, as recorded (KeyError would quote it again).
        return self.message


class ServiceError(IntentusNetError):
    """The HTTP service refused a request or could not be reached.

    Attributes:
        status: the HTTP status of the answer, or ``None`` when there was none.
        problem: the ``application/problem+json`` document the service sent
            (empty when there was none).
    """

    code: ClassVar[str] = "service_error"

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        problem: Mapping[str, object] | None = None,
    ) -> None:
        self.status = status
        self.problem = dict(problem or {})
        super().__init__(message)


class ServiceUnavailable(ServiceError, ConnectionError):
    """The service could not be reached, timed out, or is shutting down."""

    code: ClassVar[str] = "service_unavailable"


class Unauthorized(ServiceError, PermissionError):
    """The request carried no API key, or one the service does not know."""

    code: ClassVar[str] = "unauthorized"


class Forbidden(ServiceError, PermissionError):
    """The API key may not do this (a read-only key cannot route intents)."""

    code: ClassVar[str] = "forbidden"


class RequestTooLarge(ServiceError, ValueError):
    """The request body is larger than the service accepts."""

    code: ClassVar[str] = "request_too_large"
    exit_code: ClassVar[int] = 2


class RequestInvalid(ServiceError, ValueError):
    """A request parameter or body field (other than an envelope) is not valid."""

    code: ClassVar[str] = "request_invalid"
    exit_code: ClassVar[int] = 2


class MalformedRequest(RequestInvalid):
    """The request body is not a JSON document of the expected shape."""

    code: ClassVar[str] = "malformed_request"


class ClientDisconnected(ServiceError, ConnectionError):
    """The client hung up before the service had read its request body.

    The client's doing, not the service's: the service counts it (HTTP 499, as
    nginx names it) and logs one line. Added in 0.1.0.
    """

    code: ClassVar[str] = "client_disconnected"


class CacheMiss(ReplayError, LookupError):
    """Replay-only mode needed an answer that no record holds.

    Raised by the httpx transports in ``replay`` mode instead of making the call.
    Added in 0.1.0.

    Attributes:
        request: what was asked, e.g. ``POST https://api.example/v1/chat``.
        envelope_hash: the hash it was looked up by.
    """

    code: ClassVar[str] = "cache_miss"
    exit_code: ClassVar[int] = 3

    def __init__(
        self, request: str, envelope_hash: str, where: str = "", hint: str = ""
    ) -> None:
        self.request = request
        self.envelope_hash = envelope_hash
        store = f" in store {where}" if where else ""
        super().__init__(
            f"no recorded response for {request} (envelope {envelope_hash})"
            f"{store}; replay mode never makes the call: record it first with "
            f"mode='record' or mode='cache'{hint}"
        )


class RequestNotRecorded(CacheMiss):
    """A test's cassette does not hold a request, and its record mode may not add it.

    Raised by the pytest plugin (docs/pytest.md) in place of the call: in
    record mode ``none``, or ``once`` with a cassette that already holds
    records. The client may wrap it (the OpenAI and Anthropic SDKs raise their
    ``APIConnectionError`` from it). Added in 0.1.0.

    Attributes:
        request: what was asked, e.g. ``POST https://api.example/v1/chat``.
        envelope_hash: the hash it was looked up by.
        cassette: the cassette's directory.
        record_mode: the test's record mode.
    """

    code: ClassVar[str] = "request_not_recorded"

    def __init__(
        self, request: str, envelope_hash: str, cassette: str, record_mode: str
    ) -> None:
        self.request = request
        self.envelope_hash = envelope_hash
        self.cassette = cassette
        self.record_mode = record_mode
        if record_mode == "once":
            why = (
                "record mode 'once' records only a cassette that holds no "
                "records yet; run with --intentusnet-record-mode=new_episodes "
                "to add it, or delete the cassette to record it afresh"
            )
        else:
            why = (
                f"record mode {record_mode!r} never records; run with "
                "--intentusnet-record-mode=once to record a new cassette, or "
                "new_episodes to add to this one"
            )
        # Not CacheMiss's message: its advice is for the transports' modes.
        ReplayError.__init__(
            self,
            f"{request} is not in the cassette {cassette} "
            f"(envelope {envelope_hash}); {why}",
        )


class CachedCallError(ReplayError, RuntimeError):
    """A ``@cached`` function's recorded call failed, and the failure was served.

    The original exception cannot be rebuilt from a record; this carries what
    the record holds. Added in 0.1.0.

    Attributes:
        error: the recorded ``ErrorInfo`` in wire form.
        execution_id: the record of the failed call.
    """

    code: ClassVar[str] = "cached_call_error"

    def __init__(self, error: Mapping[str, object], execution_id: str = "") -> None:
        self.error = dict(error)
        self.execution_id = execution_id
        of = f" (record {execution_id})" if execution_id else ""
        super().__init__(f"the recorded call failed{of}: {error.get('message')}")


class CacheError(IntentusNetError, OSError):
    """The replay cache's directory or database cannot be used.

    Raised only when a cache is created; during routing a failing cache is
    logged and routing carries on without it. Added in 0.1.0.
    """

    code: ClassVar[str] = "cache_error"


class NotCacheable(IntentusNetError, TypeError):
    """A ``@cached`` function got an argument, or returned a value, JSON cannot carry.

    Added in 0.1.0.

    Attributes:
        argument: the parameter's name, or ``"return value"``.
    """

    code: ClassVar[str] = "not_cacheable"
    exit_code: ClassVar[int] = 2

    def __init__(self, message: str, argument: str) -> None:
        self.argument = argument
        super().__init__(message)


class InvalidRerunOption(ReplayError, ValueError):
    """A re-run option does not fit the record it is given for.

    ``from_step``, ``live`` or ``override`` name a step the record does not
    hold, ``from_root_cause`` finds no root cause, ``from_snapshot`` names no
    snapshot, a side effect is asked to run live, or two starting points are
    given. Nothing has run when it is raised. Added in 0.1.0.

    Attributes:
        option: the option at fault, e.g. ``from_step``.
    """

    code: ClassVar[str] = "invalid_rerun_option"
    exit_code: ClassVar[int] = 2

    def __init__(self, message: str, option: str) -> None:
        self.option = option
        super().__init__(message)


class SideEffectRefused(IntentusNetError, RuntimeError):
    """A side-effect step was not started: its agent attempt had been stopped.

    The router stopped the attempt (its timeout passed, or another agent won
    a ``PARALLEL`` race) while its code was still running; a side effect it
    would start after that is refused rather than half recorded. Raised
    inside the agent's code; recorded as the step's failure. Added in 0.1.0.

    Attributes:
        name: the step refused.
    """

    code: ClassVar[str] = "side_effect_refused"

    def __init__(self, name: str, why: str) -> None:
        self.name = name
        super().__init__(f"side-effect step {name!r} not started: {why}")


class SigningKeyError(IntentusNetError, ValueError):
    """A signing or public key cannot be used, or is missing where one is needed.

    The message says which file and why: it does not exist, is not a PEM key,
    holds a key of another type than Ed25519, is a private key where a public
    one is expected (or the reverse), is encrypted; or a signed record is to
    be invalidated by a store without a signing key; or the ``cryptography``
    package (the ``sign`` extra) is not installed. Added in 0.1.0.
    """

    code: ClassVar[str] = "signing_key_error"
    exit_code: ClassVar[int] = 2


class LogError(IntentusNetError, OSError):
    """The transparency log's directory cannot be read or written.

    The message names the file and the operating system's reason, or says
    that another process holds the log's append lock. Added in 0.1.0.
    """

    code: ClassVar[str] = "log_error"


class LogIntegrityError(LogError, ValueError):
    """A log's files, a leaf, a checkpoint or a signed note do not hold up.

    A tile or entry bundle that disagrees with the checkpoint, a signed note
    whose signature fails or that no trusted key signed, a checkpoint or leaf
    that is not well formed. The message says which and why. Added in 0.1.0.
    """

    code: ClassVar[str] = "log_integrity_failure"
    exit_code: ClassVar[int] = 6


class PriceTableError(IntentusNetError, ValueError):
    """A price table file cannot be used (``intentusnet stats --prices FILE``).

    The message names the file and, where one is at fault, the model and the
    field (``prices.json: models["gpt-4o"].input: ...``). Added in 0.1.0.

    Attributes:
        path: the file.
    """

    code: ClassVar[str] = "price_table_invalid"
    exit_code: ClassVar[int] = 2

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        super().__init__(f"{path}: {problem}")


class RerunWorkerError(IntentusNetError, RuntimeError):
    """A bulk re-run's worker could not open the store or build the application.

    Raised by ``rerun_all`` (``intentusnet rerun --all``) with the worker's
    reason, e.g. a module that cannot be imported. Added in 0.1.0.
    """

    code: ClassVar[str] = "rerun_worker_failed"
    exit_code: ClassVar[int] = 2


class NetworkBlocked(IntentusNetError, ConnectionError):
    """A connection was refused because the network is blocked.

    Raised by a socket's ``connect`` inside
    ``intentusnet.integrations.network.block_network()`` (a strict re-run
    inside it, ``intentusnet rerun --block-network``, a test run with
    ``--intentusnet-block-network``) for any address not allowed. HTTP clients
    wrap it in their connection error (``httpx.ConnectError``), with this
    message. Its exit code is a re-run's for anything the record does not hold.
    Added in 0.1.0.

    Attributes:
        address: the host and port the connection was to, ``host:port``.
    """

    code: ClassVar[str] = "network_blocked"
    exit_code: ClassVar[int] = 7

    def __init__(self, address: str) -> None:
        self.address = address
        super().__init__(
            f"network access to {address} is blocked (a strict re-run or a test "
            "run with the network blocked may only use what is recorded)"
        )


class NondeterminismError(CassetteMiss):
    """Resumed code asked for another step than the record holds at that place.

    A resumed execution replays its record by position: the n-th step the
    code opens must be the n-th recorded one (same name, same arguments).
    When it is not, the code is not the code that was interrupted (or does
    not call its steps in a fixed order), so nothing it asks for can be
    trusted: the execution is parked ``needs_attention`` rather than continued
    live. A strict re-run (``rerun``) raises it too where it would raise a plain
    ``CassetteMiss`` while a recorded step is still unserved (``parked=False``:
    a re-run is not parked). Added in 0.1.0.

    Attributes:
        position: the step number where the two differ.
        recorded: ``name`` and ``argsHash`` of the recorded step.
        requested: ``name`` and ``argsHash`` of the step the code asked for.
    """

    code: ClassVar[str] = "nondeterminism"

    def __init__(
        self,
        position: int,
        recorded: tuple[str, str],
        requested: tuple[str, str],
        *,
        execution_id: str = "",
        parked: bool = True,
        occurrence: int = 1,
        candidates: Sequence[str] = (),
    ) -> None:
        self.position = position
        self.recorded = recorded
        self.requested = requested
        super().__init__(
            requested[0],
            requested[1],
            occurrence=occurrence,
            candidates=candidates,
            execution_id=execution_id,
            why=f"at step {position} the record holds {recorded[0]!r} with args "
            f"{recorded[1][:19]}..., not this call; the code does not replay the "
            "record (nondeterminism)" + (": the execution is parked" if parked else ""),
        )


class SideEffectInDoubt(CassetteMiss):
    """A side-effect step started before an interruption and never ended.

    Whether it happened is unknown, so it is neither run again (it may have
    happened) nor skipped (it may not have): the execution is parked
    ``needs_attention``. A step declared ``idempotent=True`` is run again
    instead. Added in 0.1.0.

    Attributes:
        position: the step's number in the record.
    """

    code: ClassVar[str] = "side_effect_in_doubt"

    def __init__(self, position: int, name: str, args_hash: str, execution_id: str):
        self.position = position
        super().__init__(
            name,
            args_hash,
            execution_id=execution_id,
            why=f"side-effect step {position} ({name!r}) started and never ended "
            "before the interruption: it may or may not have happened; it is not "
            "run again unless declared idempotent=True, and the execution is "
            "parked needs_attention",
        )


class InvalidIdempotencyKey(IntentusNetError, ValueError):
    """An idempotency key is not 1 to 255 printable ASCII characters.

    Added in 0.1.0.
    """

    code: ClassVar[str] = "invalid_idempotency_key"
    exit_code: ClassVar[int] = 2


class IdempotencyConflict(IntentusNetError, ValueError):
    """An idempotency key was used again with another envelope.

    One key names one request: the same key with an envelope of another hash
    is refused, and nothing runs (HTTP 422). Added in 0.1.0.

    Attributes:
        key: the key.
        recorded_hash: the envelope hash the key was first used with.
        given_hash: the hash of the envelope given now.
        execution_id: the execution the key names.
    """

    code: ClassVar[str] = "idempotency_conflict"
    exit_code: ClassVar[int] = 2

    def __init__(
        self, key: str, recorded_hash: str, given_hash: str, execution_id: str
    ) -> None:
        self.key = key
        self.recorded_hash = recorded_hash
        self.given_hash = given_hash
        self.execution_id = execution_id
        super().__init__(
            f"idempotency key {key!r} was used for execution {execution_id} with "
            f"envelope {recorded_hash}, not {given_hash}; a key names one request"
        )


class IdempotencyTimeout(IntentusNetError, TimeoutError):
    """The execution a key names was still running when the wait ran out.

    Also raised, saying so, when that execution can never start: its record
    file (file store) was created by a process stopped before it wrote the
    first line, so the id cannot be opened again until the file is removed.

    Added in 0.1.0.

    Attributes:
        key: the key.
        execution_id: the execution still running.
    """

    code: ClassVar[str] = "idempotency_timeout"

    def __init__(
        self, key: str, execution_id: str, waited_s: float, never_written: str = ""
    ) -> None:
        self.key = key
        self.execution_id = execution_id
        if never_written:
            message = (
                f"idempotency key {key!r}: execution {execution_id} never started "
                f"(waited {waited_s:g} s): {never_written}; nothing ran under it, "
                "and the key answers once the file is removed"
            )
        else:
            message = (
                f"idempotency key {key!r}: execution {execution_id} is still "
                f"running after {waited_s:g} s; ask again later"
            )
        super().__init__(message)


class _Refused(IntentusNetError):
    """An operation on an execution was refused; ``reason`` says why, in a stable word.

    Attributes:
        reason: the stable reason word.
        execution_id: the execution concerned.
        detail: what was found, one sentence.
    """

    exit_code: ClassVar[int] = 4
    _verb: ClassVar[str]

    def __init__(self, reason: str, execution_id: str, detail: str) -> None:
        self.reason = reason
        self.execution_id = execution_id
        self.detail = detail
        super().__init__(f"cannot {self._verb} {execution_id} ({reason}): {detail}")


class ResumeRefused(_Refused):
    """An execution cannot be resumed; ``reason`` says why, in a stable word.

    Reasons: ``complete`` (it finished), ``owned`` (a live process is writing
    or resuming it), ``no_agent`` (no agent of this router handles its intent),
    ``configuration_changed`` (the router's configuration for the intent is
    not the recorded one; ``force=True`` resumes anyway), ``no_store`` (the
    router records nothing), ``attempts_exhausted`` (recovery gave up),
    ``chain_broken`` (a record of its resume chain is gone), ``abandoned`` (a
    resume record whose resumer died before linking it: nothing ran in it).
    Added in 0.1.0.
    """

    code: ClassVar[str] = "resume_refused"
    _verb: ClassVar[str] = "resume"


class ResolveRefused(_Refused):
    """A parked execution cannot be resolved as asked; nothing was written.

    Reasons: ``not_parked`` (the newest record of its chain is not parked
    ``needs_attention``: it runs, waits for a resume or finished),
    ``not_in_doubt`` (it was parked for another reason than a side effect in
    doubt, such as nondeterminism: only cancel or fork moves it),
    ``wrong_step`` (the step named is not the one in doubt), ``owned``
    (another operator is deciding about it now), ``resolved`` (another
    operator's decision came first), ``no_store`` (the store keeps no resume
    links). Added in 0.1.0.
    """

    code: ClassVar[str] = "resolve_refused"
    _verb: ClassVar[str] = "resolve"


class CancelRefused(_Refused):
    """An execution cannot be cancelled; nothing was written.

    Reasons: ``finished`` (it completed, failed or was cancelled: naming
    which), ``cancelled`` (another cancel request came first, naming who and
    when), ``no_store`` (the store keeps no cancel requests). Added in 0.1.0.
    """

    code: ClassVar[str] = "cancel_refused"
    _verb: ClassVar[str] = "cancel"


class ExecutionCancelled(IntentusNetError):
    """Raised at a step boundary of an execution an operator cancelled.

    Every later step call of the execution raises it again; the router
    records the execution ``cancelled`` whatever its agent answers. Added in
    0.1.0.

    Attributes:
        execution_id: the execution stopped.
        request: the cancel request (``by``, ``via``, ``atUtc``).
    """

    code: ClassVar[str] = "execution_cancelled"

    def __init__(self, execution_id: str, request: Mapping[str, object]) -> None:
        self.execution_id = execution_id
        self.request = request
        super().__init__(
            f"execution {execution_id} was cancelled by {request.get('by')} "
            f"at {request.get('atUtc')}"
        )


class ExecutionWaiting(IntentusNetError):
    """Raised where an execution starts waiting (a durable sleep, a signal, a retry).

    The execution's process stops running it: every later step call raises
    it again, and the router closes the record ``waiting`` (an
    ``EXECUTION_WAITING`` event) whatever the agent answers; recovery resumes
    it when it is due or signalled. An agent lets it pass. Added in 0.1.0.

    Attributes:
        execution_id: the execution that waits.
        waiting: what for (``waitingFor``, ``step``, ``name``, ``dueUtc``).
    """

    code: ClassVar[str] = "execution_waiting"

    def __init__(self, execution_id: str, waiting: Mapping[str, object]) -> None:
        self.execution_id = execution_id
        self.waiting = waiting
        due = waiting.get("dueUtc")
        until = f" until {due}" if due else ""
        super().__init__(
            f"execution {execution_id} waits for {waiting.get('waitingFor')} "
            f"{waiting.get('name')!r}{until}"
        )


class WaitTimedOut(IntentusNetError, TimeoutError):
    """``ctx.wait_for(NAME, timeout=...)`` reached its timeout with no signal.

    Raised by ``wait_for`` in the execution (the first time and on every
    resume: the timeout is recorded as the wait's answer). Added in 0.1.0.

    Attributes:
        name: the signal waited for.
    """

    code: ClassVar[str] = "wait_timed_out"

    def __init__(self, name: str, due: str) -> None:
        self.name = name
        super().__init__(f"no signal {name!r} came before {due}")


class SignalRefused(_Refused):
    """A signal cannot be delivered; nothing was written.

    Reasons: ``finished`` (the execution completed, failed, was parked or
    cancelled: naming which), ``full`` (the execution keeps the most signals
    it may, ``MAX_SIGNALS``), ``no_store`` (the store keeps no signals).
    Added in 0.1.0.
    """

    code: ClassVar[str] = "signal_refused"
    _verb: ClassVar[str] = "signal"


class InvalidSignal(IntentusNetError, ValueError):
    """A signal's name is not a name, or its payload is not JSON or too large.

    Nothing was written. Added in 0.1.0.
    """

    code: ClassVar[str] = "invalid_signal"
    exit_code: ClassVar[int] = 2


class InvalidResolution(IntentusNetError, ValueError):
    """A resolution's output is not JSON, or given for a step that did not happen.

    Nothing was written. Added in 0.1.0.
    """

    code: ClassVar[str] = "invalid_resolution"
    exit_code: ClassVar[int] = 2


class ReaskRefused(IntentusNetError, ValueError):
    """A recorded model call cannot be asked again as asked; nothing was sent.

    The message says why: the record has no such step, the step is not a
    model call made through a recording transport, or is a side effect; an
    edit is not ``PATH=JSON`` or names no value; the recorded request holds
    redacted values no edit replaced; no credential is in the environment.
    Added in 0.1.0.
    """

    code: ClassVar[str] = "reask_refused"
    exit_code: ClassVar[int] = 2


class InvalidQueue(IntentusNetError, ValueError):
    """A queue cannot be declared as asked; nothing was declared.

    The message names the argument: a name that is not 1 to 64 of
    ``A-Z a-z 0-9 _ . -``, a limit that is not a whole number of 1 or more, a
    rate that is not ``COUNT/PERIOD`` (``60/min``, ``100/s``, ``5/2h``), a
    queue declared twice, an intent put on two queues. Added in 0.1.0.
    """

    code: ClassVar[str] = "invalid_queue"
    exit_code: ClassVar[int] = 2


class UnknownQueue(IntentusNetError, LookupError):
    """An agent or intent names a queue the router has not declared.

    Declare it first with ``router.queue(NAME, ...)``; nothing was
    registered. Added in 0.1.0.

    Attributes:
        queue: the name given.
    """

    code: ClassVar[str] = "unknown_queue"
    exit_code: ClassVar[int] = 2

    def __init__(self, queue: str, known: Sequence[str]) -> None:
        self.queue = queue
        listed = ", ".join(repr(name) for name in known) or "none"
        super().__init__(
            f"no queue {queue!r} is declared (declared: {listed}); "
            "declare it with router.queue(name, ...) first"
        )


class ExecutionPending(IntentusNetError, TimeoutError):
    """An execution submitted asynchronously had not finished in the time given.

    Raised by ``Submission.result(timeout=)``; the execution goes on (ask
    again). Added in 0.1.0.

    Attributes:
        execution_id: the execution waited for.
        status: its newest record's status when the wait ran out
            (``in_progress``, or ``incomplete`` until recovery resumes it).
    """

    code: ClassVar[str] = "execution_pending"

    def __init__(self, execution_id: str, status: str, waited_s: float) -> None:
        self.execution_id = execution_id
        self.status = status
        super().__init__(
            f"execution {execution_id} is still {status} after {waited_s:g} s; "
            "ask again later"
        )
