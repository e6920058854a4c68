"""The wire models: the envelope a caller sends and the response it gets back.

Models are pydantic v2, snake_case in Python and camelCase on the wire. They
validate once, where data comes in; the router then trusts them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

import orjson
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PlainValidator,
    PrivateAttr,
    ValidationError,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

from ._util.ids import new_execution_id as new_execution_id
from ._util.ids import new_request_id
from ._util.jsonvalue import JSONObject, JSONValue, check_json
from ._util.time import wire_utc
from .errors import EnvelopeValidationError
from .hashing import hash_parts

__all__ = [
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


def _json_object(value: object) -> JSONObject:
    if type(value) is not dict:
        raise ValueError(f"must be a JSON object (dict), got {type(value).__name__}")
    check_json(value)
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


class _EnvelopePart(_Model):
    """A model that is part of an envelope: its errors are envelope errors."""

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _envelope_error(exc) from None

    # Only ``IntentRef(...)`` and the like call this ``__init__``. Marked as
    # pydantic's own (as pydantic-settings marks its ``__init__``), so that
    # validation does not call it for every nested part, validating each part
    # twice and running the envelope's after-validator twice; errors of parts
    # validated inside an envelope reach the envelope's own conversion.
    __init__.__pydantic_base_init__ = True  # type: ignore[attr-defined]


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


class IntentRef(_EnvelopePart):
    """Names an intent: what the caller wants done."""

    name: _Name
    version: Annotated[str, Field(min_length=1, max_length=64)] = "1.0"


class IntentContext(_EnvelopePart):
    """Who is asking. Only ``tenant`` is hashed."""

    caller: _Short | None = None
    tenant: _Short | None = None
    priority: int = 0
    tags: list[_Short] = Field(default_factory=list)


class IntentMetadata(_EnvelopePart):
    """Volatile facts about one request; never hashed."""

    request_id: _Short = Field(default_factory=new_request_id)
    trace_id: _Short | None = None
    created_at: Annotated[datetime, AfterValidator(_as_utc)] = Field(
        default_factory=_now
    )
    source: _Text | None = None
    identity_chain: list[_Short] = Field(default_factory=list)


class RoutingOptions(_EnvelopePart):
    """How the caller wants the intent routed."""

    strategy: RoutingStrategy = RoutingStrategy.DIRECT
    target_agent: _Name | None = None
    fallback_agents: list[_Name] = Field(default_factory=list)
    timeout_ms: Annotated[int, Field(gt=0, le=86_400_000)] | None = None
    cache: CacheDirective = CacheDirective.DEFAULT


class IntentEnvelope(_EnvelopePart):
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

    @classmethod
    def model_validate(cls, obj: Any, **kwargs: Any) -> IntentEnvelope:
        """Validate a wire-form (camelCase) or Python-form envelope."""
        if not isinstance(obj, dict):
            raise EnvelopeValidationError(
                f"an envelope must be a JSON object, got {type(obj).__name__}"
            )
        try:
            return super().model_validate(obj, **kwargs)
        except ValidationError as exc:
            raise _envelope_error(exc) from None

    @classmethod
    def model_validate_json(
        cls, json_data: str | bytes | bytearray, **kwargs: Any
    ) -> IntentEnvelope:
        """Parse and validate an envelope from JSON text."""
        import orjson

        try:
            data = orjson.loads(json_data)
        except orjson.JSONDecodeError as exc:
            raise EnvelopeValidationError(f"not valid JSON: {exc}") from None
        return cls.model_validate(data, **kwargs)

    # Set by ``_check_payload``, which every validated envelope passes. No
    # defaults: pydantic copies a default, or inspects a default factory's
    # signature, for every instance, which cost more than the rest of an
    # envelope's validation.
    _plain: bool = PrivateAttr()
    _view: dict[str, JSONValue] = PrivateAttr()
    _parts: tuple[bytes, bytes] = PrivateAttr()

    @model_validator(mode="after")
    def _check_payload(self) -> IntentEnvelope:
        # One walk of the payload: refuse what JSON cannot carry, and note
        # whether its canonical form may take the fast path (hashing.py). The
        # rest of the hashed view cannot change (the model is frozen), so it is
        # built once here.
        private = self.__pydantic_private__
        assert private is not None
        private["_plain"] = check_json(self.payload, "payload")
        routing = self.routing
        view = private["_view"] = {
            "version": self.version,
            "intent": {"name": self.intent.name, "version": self.intent.version},
            "tenant": self.context.tenant,
            "routing": {
                "strategy": routing.strategy._value_,
                "targetAgent": routing.target_agent,
                "fallbackAgents": list(routing.fallback_agents),
            },
        }
        private["_parts"] = hash_parts(view)
        return self

    def model_copy(
        self, *, update: Mapping[str, Any] | None = None, deep: bool = False
    ) -> IntentEnvelope:
        """Copy the envelope; fields in ``update`` are checked like new input."""
        copy = super().model_copy(update=update, deep=deep)
        if update:
            try:
                copy = self.model_validate(copy.model_dump(by_alias=True))
            except ValidationError as exc:
                raise _envelope_error(exc) from None
        return copy

    def hash_parts(self) -> tuple[bytes, bytes, bool]:
        """Canonical bytes before and after the payload, and the payload's verdict.

        For ``compute_hash``: the prefix and suffix bracket the payload's
        canonical bytes; the flag says whether orjson's sorted output of the
        payload already is RFC 8785.
        """
        # Read the slot directly: pydantic's private-attribute lookup costs
        # microseconds, and this is on the hashing hot path.
        private = self.__pydantic_private__
        prefix, suffix = private["_parts"]  # type: ignore[index]
        return prefix, suffix, private["_plain"]  # type: ignore[index]

    def hashed_view(self) -> dict[str, JSONValue]:
        """Return the part of the envelope that is hashed (DESIGN §3)."""
        view = self.__pydantic_private__["_view"]  # type: ignore[index]
        return {**view, "payload": self.payload}

    def to_wire(self) -> JSONObject:
        """Return the camelCase wire form as plain JSON data (the caller's to change).

        Equal to ``model_dump(mode="json", by_alias=True)``, built directly: the
        model is frozen and its values were checked when it was made.
        """
        # The payload was checked (check_json): exact JSON types, integers
        # within 2**53, so orjson copies it exactly (tuples become lists).
        return self._wire(orjson.loads(orjson.dumps(self.payload)))

    def wire_to_write(self) -> JSONObject:
        """The wire form for serialising at once, sharing the payload: never change it.

        What the router hands the store when it records an execution; it saves
        copying the payload only to serialise it.
        """
        return self._wire(self.payload)

    def _wire(self, payload: JSONObject) -> JSONObject:
        # Fields are read from the models' __dict__: a pydantic model has a
        # __getattr__, which sends every attribute read down CPython's slow
        # path (several times a dict subscript's cost), and this runs per
        # recorded execution.
        fields = self.__dict__
        intent = fields["intent"].__dict__
        context = fields["context"].__dict__
        meta = fields["metadata"].__dict__
        routing = fields["routing"].__dict__
        return {
            "version": fields["version"],
            "intent": {"name": intent["name"], "version": intent["version"]},
            "payload": payload,
            "context": {
                "caller": context["caller"],
                "tenant": context["tenant"],
                "priority": context["priority"],
                "tags": list(context["tags"]),
            },
            "metadata": {
                "requestId": meta["request_id"],
                "traceId": meta["trace_id"],
                "createdAt": wire_utc(meta["created_at"]),  # UTC (see _as_utc)
                "source": meta["source"],
                "identityChain": list(meta["identity_chain"]),
            },
            "routing": {
                "strategy": routing["strategy"]._value_,
                "targetAgent": routing["target_agent"],
                "fallbackAgents": list(routing["fallback_agents"]),
                "timeoutMs": routing["timeout_ms"],
                "cache": routing["cache"]._value_,
            },
        }


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

    def wire_to_write(self) -> JSONObject:
        """The wire form for serialising at once, sharing payload and details.

        What the router hands the store for ``FINAL_RESPONSE``: it serialises to
        the same JSON as ``to_wire()``, built directly (pydantic's serializer
        costs most of a recorded answer's Python time). Never change it.
        """
        fields = self.__dict__
        metadata = fields["metadata"]
        if metadata.__pydantic_extra__:  # keys beyond the model's: pydantic writes them
            return self.to_wire()
        # Read through __dict__, as in IntentEnvelope._wire.
        meta = metadata.__dict__
        error = fields["error"]
        decision = meta["decision"]
        strategy = meta["strategy"]
        return {
            "status": fields["status"],
            "payload": fields["payload"],
            "error": None if error is None else _error_wire(error),
            "metadata": {
                "executionId": meta["execution_id"],
                "agent": meta["agent"],
                "strategy": None if strategy is None else strategy._value_,
                "decision": None if decision is None else _decision_wire(decision),
                "attempts": [_attempt_wire(a.__dict__) for a in meta["attempts"]],
                "durationMs": meta["duration_ms"],
                "envelopeHash": meta["envelope_hash"],
                "fromReplay": meta["from_replay"],
                "originalExecutionId": meta["original_execution_id"],
                "recordingError": meta["recording_error"],
            },
        }


def _decision_wire(decision: RoutingDecision) -> JSONObject:
    fields = decision.__dict__
    return {
        "strategy": fields["strategy"]._value_,
        "candidates": list(fields["candidates"]),
        "skipped": dict(fields["skipped"]),
        "reason": fields["reason"],
    }


def _attempt_wire(attempt: dict[str, Any]) -> JSONObject:
    code = attempt["error_code"]
    return {
        "agent": attempt["agent"],
        "outcome": attempt["outcome"],
        "durationMs": attempt["duration_ms"],
        "errorCode": None if code is None else code._value_,
    }


def _error_wire(error: ErrorInfo) -> JSONObject:
    return {
        "code": error.code._value_,
        "message": error.message,
        "agent": error.agent,
        "retryable": error.retryable,
        "details": error.details,
    }


_M = TypeVar("_M", bound=BaseModel)

# Pydantic keeps a model's state in four slots; ``trusted`` fills them through
# their descriptors, the cheapest way CPython offers.
_slot = BaseModel.__dict__
_set_dict = _slot["__dict__"].__set__
_set_fields_set = _slot["__pydantic_fields_set__"].__set__
_set_extra = _slot["__pydantic_extra__"].__set__
_set_private = _slot["__pydantic_private__"].__set__
_new = object.__new__
#: per model class: the set of all its field names, and whether it allows extras
_TRUSTED: dict[type[BaseModel], tuple[set[str], bool]] = {}


def trusted(cls: type[_M], values: dict[str, Any]) -> _M:
    """Build a model from values the library made itself, without validation.

    ``model_construct`` costs microseconds per call; the router builds several
    models per execution from values it already checked, so it sets the state
    pydantic keeps directly. ``values`` must name every field of ``cls``.

    Every instance of a frozen model built here shares one fields-set: nothing
    mutates it in place (``model_copy`` copies it before adding to it).
    """
    spec = _TRUSTED.get(cls)
    if spec is None:
        spec = _TRUSTED[cls] = _trusted_spec(cls)
    obj = _new(cls)
    _set_dict(obj, values)
    _set_fields_set(obj, spec[0])
    _set_extra(obj, {} if spec[1] else None)
    _set_private(obj, None)
    return obj


def _trusted_spec(cls: type[BaseModel]) -> tuple[set[str], bool]:
    config = cls.model_config
    if not config.get("frozen"):
        raise TypeError(f"trusted() builds frozen models only, not {cls.__name__}")
    return set(cls.model_fields), config.get("extra") == "allow"
