"""The one exception tree of IntentusNet.

Every error a user can catch derives from :class:`IntentusNetError`. Each class has
a stable ``code`` (snake_case, never reused) and the ``exit_code`` the CLI exits
with, and also subclasses the builtin it behaves like::

    IntentusNetError
    ├── EnvelopeValidationError (ValueError)      envelope_invalid       2
    ├── AgentRegistrationError (ValueError)       agent_registration     2
    ├── StoreError (OSError)                      store_error            1
    │   ├── InvalidExecutionId (ValueError)       invalid_execution_id   3
    │   ├── RecordNotFound (KeyError)             record_not_found       3
    │   ├── RecordExists (FileExistsError)        record_exists          1
    │   ├── RecordIntegrityError (ValueError)     integrity_failure      6
    │   └── UnsupportedSchemaVersion (ValueError) unsupported_schema     6
    ├── ReplayError                               replay_error           1
    │   ├── ReplayNotAllowed                      replay_not_allowed     4
    │   └── ReplayHashMismatch                    replay_hash_mismatch   5
    └── ServiceError                              service_error          1
        ├── ServiceUnavailable (ConnectionError)  service_unavailable    1
        ├── Unauthorized (PermissionError)        unauthorized           1
        ├── Forbidden (PermissionError)           forbidden              1
        ├── RequestTooLarge (ValueError)          request_too_large      2
        └── RequestInvalid (ValueError)           request_invalid        2
            └── MalformedRequest                  malformed_request      2

``ServiceError`` and its subclasses come from the HTTP service (``intentusnet
serve``) and its client: the client raises them for answers the in-process
library has no error for, and the library's own errors for everything else.

Agent faults during routing are not exceptions: they come back as ``ErrorInfo`` on
the ``AgentResponse`` (see ``envelope.ErrorCode``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar


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
    exit_code: ClassVar[int] = 1


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
    exit_code: ClassVar[int] = 1


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


class UnsupportedSchemaVersion(RecordIntegrityError):
    """A record was written in a format version this release cannot read."""

    code: ClassVar[str] = "unsupported_schema"
    exit_code: ClassVar[int] = 6


class ReplayError(IntentusNetError):
    """Replay could not produce a result."""

    code: ClassVar[str] = "replay_error"
    exit_code: ClassVar[int] = 1


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


class ServiceError(IntentusNetError):
    """The HTTP service refused a request or could not be reached.

    Attributes:
        status: the HTTP status of the answer, or ``None`` when there was none.
        problem: the ``application/problem+json`` document the service sent
            (empty when there was none).
    """

    code: ClassVar[str] = "service_error"
    exit_code: ClassVar[int] = 1

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
    exit_code: ClassVar[int] = 1


class Unauthorized(ServiceError, PermissionError):
    """The request carried no API key, or one the service does not know."""

    code: ClassVar[str] = "unauthorized"
    exit_code: ClassVar[int] = 1


class Forbidden(ServiceError, PermissionError):
    """The API key may not do this (a read-only key cannot route intents)."""

    code: ClassVar[str] = "forbidden"
    exit_code: ClassVar[int] = 1


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
    exit_code: ClassVar[int] = 2
