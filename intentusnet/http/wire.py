"""What the HTTP clients send and how they read answers, shared by both clients.

Answers become the library's own types (``AgentResponse``, ``ExecutionRecord``,
``RecordSummary``, ``VerifyReport``, ``ReplayResult``) and problem documents
become the library's own exceptions, found by their stable ``code``, so code
behaves the same in-process and over HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import quote

import httpx
import orjson

from .._util.jsonvalue import JSONObject, JSONValue
from ..envelope import AgentResponse, IntentEnvelope
from ..errors import IntentusNetError, ServiceError, ServiceUnavailable
from ..record.fingerprint import record_fingerprint
from ..record.model import (
    EventType,
    ExecutionEvent,
    ExecutionHeader,
    ExecutionRecord,
    RecordStatus,
    RecordSummary,
    ReplayableReason,
    VerifyReport,
)
from ..replay import ReplayResult
from ..store.durable import check_idempotency_key
from ..store.filters import ListFilters
from ..store.ids import check_id
from .problem import CARRIED

__all__ = [
    "ExecutionPage",
    "error_from",
    "execution_path",
    "list_params",
    "transport_error",
]


@dataclass(frozen=True, slots=True)
class ExecutionPage:
    """One page of record summaries, newest first.

    Attributes:
        items: the summaries on this page.
        next_cursor: pass as ``cursor`` for the next page; ``None`` on the last.
    """

    items: tuple[RecordSummary, ...]
    next_cursor: str | None


# -- requests ------------------------------------------------------------------------


def envelope_body(envelope: IntentEnvelope | Mapping[str, JSONValue]) -> bytes:
    """The envelope as JSON, validated here as the router would validate it.

    Raises:
        EnvelopeValidationError: the envelope is not valid.
    """
    if not isinstance(envelope, IntentEnvelope):
        envelope = IntentEnvelope.model_validate(dict(envelope))
    return orjson.dumps(envelope.to_wire())


def replay_body(
    envelope: IntentEnvelope | Mapping[str, JSONValue] | None, force: bool
) -> bytes:
    """The body of a replay request."""
    body: JSONObject = {"force": force}
    if envelope is not None:
        body["envelope"] = orjson.loads(envelope_body(envelope))
    return orjson.dumps(body)


def key_path(key: str) -> str:
    """``/v1/idempotency-keys/<key>``, the key checked and percent-encoded.

    Raises:
        InvalidIdempotencyKey: the key is malformed, before any request.
    """
    return f"/v1/idempotency-keys/{quote(check_idempotency_key(key), safe='')}"


def execution_path(execution_id: str, suffix: str = "") -> str:
    """``/v1/executions/<id><suffix>``, refusing ids no store allows.

    Raises:
        InvalidExecutionId: as ``FileExecutionStore`` would, before any request.
    """
    return f"/v1/executions/{quote(check_id(execution_id), safe='')}{suffix}"


def list_params(filters: ListFilters, cursor: str | None = None) -> dict[str, str]:
    """Query parameters of ``GET /v1/executions`` (the filters given, only)."""
    f = filters
    given: dict[str, object] = {
        "intent": f.intent,
        "status": f.status,
        "since": None if f.since is None else f.since.isoformat(),
        "until": None if f.until is None else f.until.isoformat(),
        "replayable": None if f.replayable is None else str(f.replayable).lower(),
        "id_prefix": f.id_prefix,
        "envelope_hash": f.envelope_hash,
        "limit": f.limit,
        "cursor": cursor,
    }
    return {name: str(value) for name, value in given.items() if value is not None}


# -- answers -------------------------------------------------------------------------


def json_object(response: httpx.Response) -> JSONObject:
    """The answer's JSON object.

    Raises:
        ServiceError: the answer is not a JSON object.
    """
    try:
        value = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        value = None
    if not isinstance(value, dict):
        raise ServiceError(
            f"the service answered {response.status_code} with a body that is not "
            "a JSON object",
            status=response.status_code,
        )
    return value


def agent_response(data: JSONObject) -> AgentResponse:
    """Read an ``AgentResponse``."""
    return AgentResponse.model_validate(data)


def summary(data: JSONObject) -> RecordSummary:
    """Read a ``RecordSummary`` from its ``to_json()`` form."""
    intent = _object(data["intent"])
    reason = data["replayableReason"]
    return RecordSummary(
        execution_id=str(data["executionId"]),
        created_utc=str(data["createdUtc"]),
        intent_name=str(intent["name"]),
        intent_version=str(intent["version"]),
        envelope_hash=str(data["envelopeHash"]),
        status=RecordStatus(str(data["status"])),
        replayable=bool(data["replayable"]),
        replayable_reason=None if reason is None else ReplayableReason(str(reason)),
        agent=_text(data["agent"]),
        duration_ms=_float(data["durationMs"]),
    )


def page(data: JSONObject) -> ExecutionPage:
    """Read a page of summaries."""
    items = data["items"]
    assert isinstance(items, list)
    return ExecutionPage(
        tuple(summary(_object(item)) for item in items), _text(data["nextCursor"])
    )


def record(data: JSONObject) -> ExecutionRecord:
    """Read an ``ExecutionRecord`` from its ``to_json()`` form."""
    head = _object(data["header"])
    header = ExecutionHeader(
        # The header's JSON holds a summary's fields under the same names.
        **summary(head)._asdict(),
        schema_version=int(str(head["schemaVersion"])),
        completed_utc=_text(head["completedUtc"]),
        parent_execution_id=_text(head["parentExecutionId"]),
        chain_head=str(head["chainHead"]),
        owner=_maybe_object(head.get("owner")),
        key_id=_text(head.get("keyId")),
        configuration=_maybe_object(head.get("configuration")),
    )
    items = data["events"]
    assert isinstance(items, list)
    events = tuple(_event(_object(event)) for event in items)
    final_response = _maybe_object(data["finalResponse"])
    return ExecutionRecord(
        header=header,
        envelope=_object(data["envelope"]),
        events=events,
        final_response=final_response,
        fingerprint=record_fingerprint(events, final_response),
        torn_tail=bool(data.get("tornTail", False)),
    )


def _event(data: JSONObject) -> ExecutionEvent:
    return ExecutionEvent(
        seq=int(str(data["seq"])),
        type=EventType(str(data["type"])),
        at_ms=float(str(data["atMs"])),
        data=_object(data["data"]),
        prev_hash=str(data["prevHash"]),
        hash=str(data["hash"]),
    )


def verify_report(data: JSONObject) -> VerifyReport:
    """Read a ``VerifyReport``."""
    return VerifyReport(
        execution_id=str(data["executionId"]),
        events_total=int(str(data["eventsTotal"])),
        events_verified=int(str(data["eventsVerified"])),
        failures=tuple(str(f) for f in _list(data["failures"])),
        valid=bool(data["valid"]),
        notes=tuple(str(n) for n in _list(data.get("notes", []))),
        recording_failure=bool(data.get("recordingFailure", False)),
        key_id=_text(data.get("keyId")),
    )


def replay_result(data: JSONObject) -> ReplayResult:
    """Read a ``ReplayResult``."""
    return ReplayResult(
        payload=_maybe_object(data["payload"]),
        metadata=_object(data["metadata"]),
        status=str(data["status"]),
        error=_maybe_object(data["error"]),
        original_execution_id=str(data["originalExecutionId"]),
        from_replay=bool(data["fromReplay"]),
        forced=bool(data["forced"]),
        partial=bool(data["partial"]),
        warnings=tuple(str(w) for w in _list(data["warnings"])),
    )


def _object(value: JSONValue) -> JSONObject:
    if not isinstance(value, dict):
        raise ServiceError(f"the service sent {type(value).__name__}, not an object")
    return value


def _maybe_object(value: JSONValue) -> JSONObject | None:
    return value if isinstance(value, dict) else None


def _list(value: JSONValue) -> list[JSONValue]:
    return value if isinstance(value, list) else []


def _text(value: JSONValue) -> str | None:
    return None if value is None else str(value)


def _float(value: JSONValue) -> float | None:
    return None if value is None else float(str(value))


# -- errors --------------------------------------------------------------------------


def _codes() -> dict[str, type[IntentusNetError]]:
    found: dict[str, type[IntentusNetError]] = {}
    pending: list[type[IntentusNetError]] = [IntentusNetError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.code, cls)
        pending.extend(cls.__subclasses__())
    return found


def error_from(response: httpx.Response) -> IntentusNetError:
    """The library exception an error answer stands for."""
    status = response.status_code
    try:
        problem = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        problem = None
    if not isinstance(problem, dict) or not isinstance(problem.get("code"), str):
        cls: type[ServiceError] = (
            ServiceUnavailable if status in (502, 503, 504) else ServiceError
        )
        return cls(f"the service answered HTTP {status}", status=status)
    code = str(problem["code"])
    detail = str(problem.get("detail") or problem.get("title") or code)
    found = _codes().get(code)
    if found is None or found is IntentusNetError:
        return ServiceError(detail, status=status, problem=problem)
    exc = _build(found, problem, detail, status)
    exc.args = (detail,)  # the service's exact message
    return exc


def _build(
    cls: type[IntentusNetError], problem: JSONObject, detail: str, status: int
) -> IntentusNetError:
    if issubclass(cls, ServiceError):
        return cls(detail, status=status, problem=problem)
    for kind, names in CARRIED:
        if issubclass(cls, kind):
            return cls(*(_argument(problem, name, detail) for name in names))
    try:
        return cls(detail)
    except (TypeError, ValueError):
        # A class made from more than a message, which CARRIED does not rebuild
        # from a problem document: the service's error as it came, code kept.
        return ServiceError(detail, status=status, problem=problem)


def _argument(problem: JSONObject, name: str, detail: str) -> object:
    value = problem.get(name)
    if name == "detail":
        return detail
    if name == "waited":
        return 0.0
    if name == "line":
        return value if isinstance(value, int) else None
    if name == "paths":
        return [str(p) for p in value] if isinstance(value, list) else []
    if name in ("path", "executionId"):
        return str(value or "")
    return str(value or "unknown") if name == "reason" else str(value)


def transport_error(exc: httpx.HTTPError, base_url: str) -> ServiceUnavailable:
    """A ``ServiceUnavailable`` for a request that got no answer."""
    kind = "timed out" if isinstance(exc, httpx.TimeoutException) else "failed"
    return ServiceUnavailable(
        f"request to {base_url} {kind}: {type(exc).__name__}: {exc}"
    )
