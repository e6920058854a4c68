"""The wire models of the HTTP API that the library has no pydantic model for.

Envelopes and responses are the library's own models (``IntentEnvelope``,
``AgentResponse``). Records, summaries, verify reports and replay results are
NamedTuples on the library's light read path; the models here describe
their ``to_json()`` form field for field, with the library's enums, so the
OpenAPI document states exactly what the service sends. A test holds each
model against real ``to_json()`` output.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictBool, WithJsonSchema
from pydantic.alias_generators import to_camel

from .._util.jsonvalue import JSONObject
from ..record.model import EventType, RecordStatus, ReplayableReason

__all__ = [
    "ENVELOPE_REF",
    "Accepted",
    "Cancellation",
    "Decision",
    "ExecutionEvent",
    "ExecutionHeader",
    "ExecutionPage",
    "ExecutionRecord",
    "ExecutionSummary",
    "Fork",
    "ForkLinks",
    "ForkRequest",
    "Health",
    "IntentName",
    "ModelSavings",
    "Problem",
    "ReplayRequest",
    "ReplayResult",
    "ResolutionRequest",
    "Savings",
    "SignalSent",
    "VerifyReport",
]

#: Where the OpenAPI document keeps the envelope's schema.
ENVELOPE_REF = "#/components/schemas/IntentEnvelope"

_Object = JSONObject


class _Wire(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True
    )


class IntentName(_Wire):
    """An intent's name and version."""

    name: str
    version: str


class ExecutionSummary(_Wire):
    """One record without its events (``RecordSummary.to_json()``)."""

    execution_id: str
    created_utc: str
    intent: IntentName
    envelope_hash: str
    status: RecordStatus
    replayable: bool
    replayable_reason: ReplayableReason | None
    agent: str | None
    duration_ms: float | None


class ExecutionPage(_Wire):
    """A page of summaries, newest first, and the cursor of the next page."""

    items: list[ExecutionSummary]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class ExecutionHeader(ExecutionSummary):
    """A summary's fields and the rest of a record's header (its ``to_json()``)."""

    schema_version: int
    completed_utc: str | None
    parent_execution_id: str | None
    chain_head: str
    owner: _Object | None
    key_id: str | None = Field(
        default=None, description="The key that signs the record; null if unsigned."
    )
    configuration: _Object | None = Field(
        default=None,
        description="The router's configuration for the intent when the record was "
        "made: fingerprint, strategy, agents (name, version, priority).",
    )


class ExecutionEvent(_Wire):
    """One event line of a record."""

    seq: int
    type: EventType
    at_ms: float
    data: _Object
    prev_hash: str
    hash: str


class ExecutionRecord(_Wire):
    """A loaded, verified record (``ExecutionRecord.to_json()``)."""

    header: ExecutionHeader
    envelope: _Object
    events: list[ExecutionEvent]
    final_response: _Object | None
    torn_tail: bool


class VerifyReport(_Wire):
    """The outcome of checking a record's hash chain line by line."""

    execution_id: str
    events_total: int
    events_verified: int
    failures: list[str]
    valid: bool
    notes: list[str]
    recording_failure: bool = False
    key_id: str | None = Field(
        default=None, description="The signing key line 1 names; null if unsigned."
    )


class ReplayResult(_Wire):
    """The recorded answer of an execution (``ReplayResult.to_json()``)."""

    payload: _Object | None
    metadata: _Object
    status: str
    error: _Object | None
    from_replay: bool
    original_execution_id: str
    forced: bool
    partial: bool
    warnings: list[str]


class ReplayRequest(_Wire):
    """The body of a replay request; both fields may be left out."""

    envelope: Annotated[
        _Object | None,
        WithJsonSchema({"anyOf": [{"$ref": ENVELOPE_REF}, {"type": "null"}]}),
    ] = Field(
        default=None,
        description="Replay only if this envelope hashes as the recorded one.",
    )
    force: StrictBool = Field(
        default=False, description="Replay a record that is not replayable."
    )


class ResolutionRequest(_Wire):
    """An operator's decision about a parked execution's side effect in doubt."""

    step: Annotated[int, Field(ge=1, strict=True)] | None = Field(
        default=None,
        description="The step in doubt (its ATTENTION_NEEDED event's step); "
        "absent for an execution parked attempts_exhausted, tried again with "
        "happened false.",
    )
    happened: StrictBool = Field(description="Whether the side effect took place.")
    output: Annotated[object, WithJsonSchema({"description": "Any JSON value."})] = (
        Field(
            default=None,
            description="What the step returned, when it happened (null by default).",
        )
    )


class ForkRequest(_Wire):
    """Where a fork starts running today's code."""

    from_step: (
        Annotated[int, Field(ge=1, strict=True)]
        | Annotated[str, Field(min_length=1, max_length=256)]
    ) = Field(
        alias="from",
        description="The step (its number, kept through every resume, or its "
        "name: the first so named) from which the fork runs live; the steps "
        "before it are served from the execution's records.",
    )


class ForkLinks(_Wire):
    """Where the fork and the execution it forks are read."""

    self_: str = Field(alias="self", description="/v1/executions/{the fork}")
    fork_of: str = Field(description="/v1/executions/{the record forked}")


class Fork(_Wire):
    """A fork, run: a new execution of today's code."""

    execution_id: str = Field(description="The fork's record.")
    fork_of: str = Field(
        description="The record it forks: the newest of the execution's chain."
    )
    from_step: int | None = Field(description="The step it ran live from.")
    status: str = Field(description="success or error: how the fork answered.")
    links: ForkLinks


class Decision(_Wire):
    """An operator's decision, recorded: the record that holds it."""

    execution_id: str = Field(description="The execution decided about.")
    decision: str = Field(description="The record holding the decision.")


class Cancellation(_Wire):
    """A cancellation, recorded or requested."""

    execution_id: str = Field(description="The execution cancelled.")
    record: str = Field(
        description="The record holding the cancellation (a running execution's "
        "own record, which its router closes so)."
    )
    closed: StrictBool = Field(
        description="true: closed now; false: its router stops it at its next step."
    )


class SignalSent(_Wire):
    """A signal kept for an execution (added in 0.1.0)."""

    execution_id: str = Field(description="The execution signalled.")
    name: str = Field(description="The signal's name.")
    signal: str = Field(description="The signal's id.")


class Accepted(_Wire):
    """An execution submitted with ``Prefer: respond-async`` (202)."""

    execution_id: str = Field(description="The execution's id.")
    location: str = Field(
        description="Where it is read, also in the Location header: "
        "/v1/executions/{id}; ?wait=SECONDS waits for its answer."
    )


class Health(_Wire):
    """Whether the service takes work."""

    status: Literal["ok", "draining"]
    version: str


class Spent(_Wire):
    """Tokens (or cost) spent on calls made and avoided by hits."""

    spent: int
    avoided: int


class Cost(_Wire):
    """Cost spent and avoided, in the price table's currency (null without)."""

    spent: float | None
    avoided: float | None


class ModelSavings(_Wire):
    """One provider's model (``ModelSavings.to_json()``)."""

    provider: str
    model: str | None
    calls: int
    hits: int
    misses: int
    input_tokens: Spent
    output_tokens: Spent
    cost: Cost


class Savings(_Wire):
    """What caching saved over the store (``SavingsReport.to_json()``)."""

    currency: str | None = Field(description="The price table's currency.")
    calls: int
    hits: int = Field(description="Answers served from records of LLM calls.")
    misses: int = Field(description="LLM calls made and recorded.")
    input_tokens: Spent
    output_tokens: Spent
    cost: Cost
    unpriced: list[str] = Field(description="Models the price table has no price for.")
    models: list[ModelSavings]


class Problem(BaseModel):
    """An error, as ``application/problem+json`` (RFC 9457).

    ``code`` is the stable error code (``IntentusNetError.code``); the other
    members beyond RFC 9457 carry the error's own attributes.
    """

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="allow"
    )

    type: str
    title: str
    status: int
    detail: str
    code: str
    instance: str | None = None
    path: str | None = Field(
        default=None, description="envelope_invalid: the offending field's path."
    )
    execution_id: str | None = None
    reason: str | None = Field(
        default=None, description="replay_not_allowed: why the record is refused."
    )
    expected: str | None = Field(
        default=None, description="replay_hash_mismatch: the recorded hash."
    )
    actual: str | None = Field(
        default=None, description="replay_hash_mismatch: the given envelope's hash."
    )
    paths: list[str] | None = Field(
        default=None, description="replay_hash_mismatch: where the envelopes differ."
    )
    line: int | None = Field(
        default=None, description="integrity_failure: the damaged line."
    )
    errors: list[_Object] | None = Field(
        default=None, description="request_invalid: every invalid parameter."
    )
