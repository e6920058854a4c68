"""Errors over HTTP: problem documents (RFC 9457) and the one status mapping.

Light (no third-party imports), so that the plain-ASGI ``agent_app`` and the
FastAPI service answer errors alike. A problem's ``code`` is the stable code
of an ``IntentusNetError`` class, and its extra members carry the error's
attributes, so a client can raise the very class the library raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final, TypeAlias, cast

from .._util.jsonvalue import JSONObject
from ..errors import (
    CancelRefused,
    EnvelopeValidationError,
    IdempotencyConflict,
    IdempotencyTimeout,
    IntentusNetError,
    RecordIntegrityError,
    ReplayHashMismatch,
    ReplayNotAllowed,
    ResolveRefused,
    ResumeRefused,
    ServiceError,
    SignalRefused,
)

__all__ = [
    "CARRIED",
    "MEDIA_TYPE",
    "REFUSALS",
    "STATUS_BY_CODE",
    "document",
    "from_error",
    "status_for",
]

MEDIA_TYPE: Final = "application/problem+json"
#: The operators' refusals: each says why in ``reason``, for ``execution_id``.
REFUSALS: Final = (ResumeRefused, ResolveRefused, CancelRefused, SignalRefused)

_Kind: TypeAlias = type[IntentusNetError] | tuple[type[IntentusNetError], ...]
#: The members a problem document carries of an error, in the order its class's
#: constructor takes them, so the client rebuilds it from them (``wire``):
#: ``detail`` is the document's own, ``waited`` is not carried (0 s).
CARRIED: Final[tuple[tuple[_Kind, tuple[str, ...]], ...]] = (
    (EnvelopeValidationError, ("detail", "path")),
    (ReplayNotAllowed, ("reason", "executionId")),
    (ReplayHashMismatch, ("expected", "actual", "paths")),
    (RecordIntegrityError, ("detail", "executionId", "line")),
    (IdempotencyConflict, ("key", "recordedHash", "givenHash", "executionId")),
    (IdempotencyTimeout, ("key", "executionId", "waited")),
    (REFUSALS, ("reason", "executionId", "detail")),
)

#: Error code -> HTTP status; a subclass without its own entry takes its
#: parent's. Codes neither here nor inherited answer 500.
STATUS_BY_CODE: Final[Mapping[str, int]] = {
    "malformed_request": 400,
    # the Idempotency-Key header (the IETF httpapi draft's statuses: 400 for a
    # malformed key, 409 while the key's request is still being processed,
    # 422 for a key reused with another request)
    "invalid_idempotency_key": 400,
    "idempotency_timeout": 409,
    "idempotency_conflict": 422,
    "unauthorized": 401,
    "forbidden": 403,
    "not_found": 404,
    "record_not_found": 404,
    "invalid_execution_id": 404,
    "method_not_allowed": 405,
    "replay_error": 409,
    "replay_not_allowed": 409,
    "integrity_failure": 409,
    "record_exists": 409,
    "resolve_refused": 409,
    "cancel_refused": 409,
    "resume_refused": 409,
    "signal_refused": 409,
    "request_too_large": 413,
    # A client that hung up before sending its whole body (nginx's 499): its
    # doing, so counted as a client error; the answer reaches no one.
    "client_disconnected": 499,
    "envelope_invalid": 422,
    "replay_hash_mismatch": 422,
    "request_invalid": 422,
    "invalid_resolution": 422,
    "invalid_rerun_option": 422,
    "invalid_signal": 422,
    "internal_error": 500,
    "service_unavailable": 503,
}


def status_for(exc: IntentusNetError) -> int:
    """The HTTP status of an error: its own code's, or its nearest parent's."""
    for cls in type(exc).__mro__:
        code = getattr(cls, "code", None)
        if isinstance(code, str) and code in STATUS_BY_CODE:
            return STATUS_BY_CODE[code]
    return 500


def document(
    status: int,
    code: str,
    detail: str,
    *,
    instance: str | None = None,
    extra: JSONObject | None = None,
) -> JSONObject:
    """A problem document."""
    body: JSONObject = {
        "type": f"urn:intentusnet:problem:{code}",
        "title": code.replace("_", " ").capitalize(),
        "status": status,
        "detail": detail,
        "code": code,
    }
    if instance is not None:
        body["instance"] = instance
    if extra:
        body.update(extra)
    return body


def from_error(exc: IntentusNetError, instance: str | None = None) -> JSONObject:
    """The problem document of a library error, with its attributes."""
    return document(
        status_for(exc), exc.code, str(exc), instance=instance, extra=_members(exc)
    )


def _members(exc: IntentusNetError) -> JSONObject:
    if isinstance(exc, ServiceError):
        return cast("JSONObject", dict(exc.problem))
    for kind, names in CARRIED:
        if isinstance(exc, kind):
            return {
                name: getattr(exc, re.sub("([A-Z])", r"_\1", name).lower())
                for name in names
                if name not in ("detail", "waited")
            }
    return {}
