"""The wire models: the envelope a caller sends and the response it gets back.

Models are pydantic v2, snake_case in Python and camelCase on the wire. They
validate once, where data comes in; the router then trusts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from functools import cached_property
from typing import TYPE_CHECKING, Annotated, Any, Final, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    ValidationError,
    ValidationInfo,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ._util.ids import new_execution_id as new_execution_id
from ._util.ids import new_request_id
from ._util.jsonvalue import JSONObject, JSONValue, check_json, parse_json
from .errors import EnvelopeValidationError
from .hashing import hash_parts, view

__all__ = [
    "JSON_CHECKED",
    "AgentResponse",
    "AttemptInfo",
    "CacheDirective",
    "ErrorCode",
    "ErrorInfo",
    "IntentContext",
    "IntentEnvelope",
    "IntentMetadata",
    "IntentRef",
    "ResponseMetadata",
    "RoutingDecision",
    "RoutingOptions",
    "RoutingStrategy",
    "new_execution_id",
]


#: The validation context of a model built from JSON objects that were checked
#: where they entered (``check_json``): its JSON object fields then check that
#: they are dicts, without walking them a second time. The router builds its
#: answers so (``routing/strategies.py``), from an agent's checked answer.
JSON_CHECKED: Final = object()


def _json_object(value: object, info: ValidationInfo) -> JSONObject:
    if type(value) is not dict:
        raise ValueError(f"must be a JSON object (dict), got {type(value).__name__}")
    if info.context is not JSON_CHECKED:
        check_json(value)
    return value


def _json_int(value: int) -> int:
    check_json(value)  # within +-(2**53-1), refused with the payload's error
    return value


def _as_is(value: JSONObject) -> JSONObject:
    return value


def _dict_only(value: object) -> JSONObject:
    if type(value) is not dict:
        raise ValueError(f"must be a JSON object (dict), got {type(value).__name__}")
    return value


if TYPE_CHECKING:
    JSONObjectField = JSONObject
    _PayloadField = JSONObject
else:
    #: The envelope payload: the model's own validator walks it (see
    #: ``IntentEnvelope._check_payload``).
    _PayloadField = Annotated[
        dict,
        PlainValidator(_dict_only),
        PlainSerializer(_as_is, return_type=Any),
        WithJsonSchema({"type": "object"}),
    ]
    #: A JSON object, checked by our own iterative walk (pydantic's recursive
    #: validation would overflow on hostile nesting) and serialized as it is.
    JSONObjectField = Annotated[
        dict,
        PlainValidator(_json_object),
        PlainSerializer(_as_is, return_type=Any),
        WithJsonSchema({"type": "object"}),
    ]


class _Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        use_enum_values=False,
    )


def _now() -> datetime:
    return datetime.now(UTC)


def _as_utc(value: datetime) -> datetime:
    # A timestamp without an offset is taken to be UTC; others are converted.
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


#: Bounded strings: the bound also makes pydantic refuse lone surrogates, which
#: no JSON encoder can write.
_Text = Annotated[str, Field(max_length=1024)]
_Short = Annotated[str, Field(max_length=256)]


class RoutingStrategy(StrEnum):
    """How the router runs the candidate agents of an intent."""

    DIRECT = "DIRECT"
    FALLBACK = "FALLBACK"
    BROADCAST = "BROADCAST"
    PARALLEL = "PARALLEL"


class CacheDirective(StrEnum):
    """Per-request instruction to the replay cache."""

    DEFAULT = "default"
    BYPASS = "bypass"
    NO_STORE = "no_store"


_Name = Annotated[str, Field(min_length=1, max_length=256)]


class IntentRef(_Model):
    """Names an intent: what the caller wants done."""

    name: _Name
    version: Annotated[str, Field(min_length=1, max_length=64)] = "1.0"


class IntentContext(_Model):
    """Who is asking. Only ``tenant`` is hashed."""

    caller: _Short | None = None
    tenant: _Short | None = None
    priority: Annotated[int, AfterValidator(_json_int)] = 0
    tags: list[_Short] = Field(default_factory=list)


class IntentMetadata(_Model):
    """Volatile facts about one request; never hashed."""

    request_id: _Short = Field(default_factory=new_request_id)
    trace_id: _Short | None = None
    created_at: Annotated[datetime, AfterValidator(_as_utc)] = Field(
        default_factory=_now
    )
    source: _Text | None = None
    identity_chain: list[_Short] = Field(default_factory=list)


class RoutingOptions(_Model):
    """How the caller wants the intent routed."""

    strategy: RoutingStrategy = RoutingStrategy.DIRECT
    target_agent: _Name | None = None
    fallback_agents: list[_Name] = Field(default_factory=list)
    timeout_ms: Annotated[int, Field(gt=0, le=86_400_000)] | None = None
    cache: CacheDirective = CacheDirective.DEFAULT


class IntentEnvelope(_Model):
    """One intent as a caller sends it.

    Only ``intent`` is required; the request id and creation time are filled in.
    The payload must be a JSON object; values JSON cannot carry are refused here,
    naming their path. Treat an envelope as immutable: its hash is computed from
    its contents each time it is asked for.

    Raises:
        EnvelopeValidationError: on construction or ``model_validate`` with
            invalid data (it is also a ``ValueError``).
    """

    version: Literal["1.0"] = "1.0"
    intent: IntentRef
    payload: _PayloadField = Field(default_factory=dict)
    context: IntentContext = Field(default_factory=IntentContext)
    metadata: IntentMetadata = Field(default_factory=IntentMetadata)
    routing: RoutingOptions = Field(default_factory=RoutingOptions)

    # The envelope is where outside data enters: its validation errors become
    # EnvelopeValidationError naming the path, here and in model_validate.
    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _envelope_error(exc) from None

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> IntentEnvelope:
        """Validate a wire-form (camelCase) or Python-form envelope.

        Raises:
            EnvelopeValidationError: naming the first invalid field's path.
        """
        if not isinstance(obj, dict):
            raise EnvelopeValidationError(
                f"an envelope must be a JSON object, got {type(obj).__name__}"
            )
        if kwargs:  # pydantic's options (strict, context, ...): its own path
            try:
                return super().model_validate(obj, **kwargs)
            except ValidationError as exc:
                raise _envelope_error(exc) from None
        if not all(isinstance(key, str) for key in obj):
            raise EnvelopeValidationError("an envelope's keys must be strings")
        # Through __init__, which converts errors: validated once.
        return cls(**obj)

    @classmethod
    def model_validate_json(
        cls, json_data: str | bytes | bytearray, **kwargs: Any
    ) -> IntentEnvelope:
        """Parse and validate an envelope from JSON text."""
        try:
            data = parse_json(json_data)
        except ValueError as exc:
            raise EnvelopeValidationError(f"not valid JSON: {exc}") from None
        return cls.model_validate(data, **kwargs)

    @model_validator(mode="after")
    def _check_payload(self) -> IntentEnvelope:
        # pydantic checked the payload is a dict; this refuses, naming the path,
        # what JSON cannot carry inside it (NaN, bytes, deep nesting, ...). The
        # walk is ``_payload_plain``'s: its verdict is kept for the first hash.
        _ = self._payload_plain
        return self

    @cached_property
    def hash_parts(self) -> tuple[bytes, bytes, bool]:
        """Canonical bytes before and after the payload, and the payload's verdict.

        For ``compute_hash``: the prefix and suffix bracket the payload's
        canonical bytes; the flag says whether orjson's sorted output of the
        payload already is RFC 8785. Made at the first hash and kept: the
        envelope is frozen (a changed copy is validated anew).
        """
        prefix, suffix = hash_parts(self.hashed_view(), typed=True)
        return prefix, suffix, self._payload_plain

    @cached_property
    def _payload_plain(self) -> bool:
        # check_json's verdict on the payload: computed once, by the validator
        # (or, for an envelope built without validation, by the first hash).
        return check_json(self.payload, "payload")

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> IntentEnvelope:
        """Copy the envelope; fields in ``update`` are checked like new input."""
        copy = super().model_copy(update=update, deep=deep)
        if update:
            copy = self.model_validate(copy.model_dump(by_alias=True))
        return copy

    def hashed_view(self) -> dict[str, JSONValue]:
        """Return the part of the envelope that is hashed (DESIGN §3)."""
        routing = self.routing
        return view(
            version=self.version,
            name=self.intent.name,
            intent_version=self.intent.version,
            payload=self.payload,
            tenant=self.context.tenant,
            strategy=routing.strategy.value,
            target_agent=routing.target_agent,
            fallback_agents=list(routing.fallback_agents),
        )

    def to_wire(self) -> JSONObject:
        """Return the camelCase wire form as plain JSON data."""
        return self.model_dump(mode="json", by_alias=True)


def _envelope_error(exc: ValidationError) -> EnvelopeValidationError:
    first = exc.errors(include_url=False)[0]
    path = ""
    for part in first["loc"]:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            path += f".{part}" if path else str(part)
    cause = first.get("ctx", {}).get("error")
    if isinstance(cause, EnvelopeValidationError) and not path:
        return cause  # raised by a nested __init__, already precise
    if isinstance(cause, EnvelopeValidationError):
        # Our own JSON check names the path inside the field.
        inner = cause.path
        if inner and inner != "$":
            path = f"{path}{inner if inner.startswith('[') else '.' + inner}"
        message = str(cause).split(": ", 1)[-1] if cause.path else str(cause)
    else:
        message = first["msg"].removeprefix("Value error, ")
        if first["type"] == "extra_forbidden":
            message = "unknown field"
        elif first["type"] == "missing":
            message = "field required"
    extra = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
    return EnvelopeValidationError(message + extra, path)


class ErrorCode(StrEnum):
    """Why a routed intent failed. Stable: codes are never renamed or reused."""

    NO_AGENT = "NO_AGENT"
    AGENT_ERROR = "AGENT_ERROR"
    AGENT_TIMEOUT = "AGENT_TIMEOUT"
    AGENT_UNAVAILABLE = "AGENT_UNAVAILABLE"
    INVALID_RESPONSE = "INVALID_RESPONSE"
    VALIDATION_ERROR = "VALIDATION_ERROR"
    CANCELLED = "CANCELLED"
    INTERNAL_ERROR = "INTERNAL_ERROR"
    #: a resumed execution was parked: a side effect in doubt or
    #: nondeterminism; ``details`` names the step (added in 0.1.0)
    NEEDS_ATTENTION = "NEEDS_ATTENTION"
    #: the execution waits (a durable sleep, a signal, a retry's wait) and its
    #: process let it go; ``details`` say for what (``waitingFor``, ``name``)
    #: and until when (``dueUtc``); recovery resumes it (added in 0.1.0)
    WAITING = "WAITING"
    #: its queue had no free slot (or rate token) before the envelope's
    #: ``timeoutMs``; no agent ran, ``details`` names the queue (added in 0.1.0)
    QUEUE_TIMEOUT = "QUEUE_TIMEOUT"


class ErrorInfo(_Model):
    """An agent fault, as data."""

    code: ErrorCode
    message: str
    agent: str | None = None
    retryable: bool = False
    details: JSONObjectField = Field(default_factory=dict)


class AttemptInfo(_Model):
    """One agent run within an execution."""

    agent: str
    outcome: Literal["success", "error", "timeout", "cancelled"]
    duration_ms: float
    error_code: ErrorCode | None = None


class RoutingDecision(_Model):
    """Which agents the router chose for an intent, in order, and why."""

    strategy: RoutingStrategy
    candidates: list[str]
    skipped: dict[str, str] = Field(default_factory=dict)
    reason: str = ""


class ResponseMetadata(_Model):
    """What happened while answering: who, how, how long, from where."""

    model_config = ConfigDict(extra="allow")

    execution_id: str | None = None
    agent: str | None = None
    strategy: RoutingStrategy | None = None
    decision: RoutingDecision | None = None
    attempts: list[AttemptInfo] = Field(default_factory=list)
    duration_ms: float = 0.0
    envelope_hash: str | None = None
    from_replay: bool = False
    original_execution_id: str | None = None
    recording_error: str | None = None


class AgentResponse(_Model):
    """The answer to an intent. Agent faults arrive here as ``error``, not raised."""

    status: Literal["success", "error"] = "success"
    payload: JSONObjectField | None = None
    error: ErrorInfo | None = None
    metadata: ResponseMetadata = Field(default_factory=ResponseMetadata)

    def to_wire(self) -> JSONObject:
        """Return the camelCase wire form as plain JSON data."""
        return self.model_dump(mode="json", by_alias=True)
