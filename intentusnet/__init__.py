"""IntentusNet: intent-routing middleware with a record-and-replay cache.

Every public name is importable from here. Names load lazily (PEP 562) so that
the light read path (``intentusnet replay ID``) never imports pydantic or httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._lazy import lazy_exports

__version__ = "0.1.0"

# name -> module that defines it
_EXPORTS: dict[str, str] = {
    "AgentContext": "agents",
    "AgentDefinition": "agents",
    "AgentRegistrationError": "errors",
    "AgentRegistry": "agents",
    "AgentResponse": "envelope",
    "AsyncIntentusClient": "client",
    "AttemptInfo": "envelope",
    "CacheDirective": "envelope",
    "CacheError": "errors",
    "CacheHit": "store.hits",
    "CacheMiss": "errors",
    "CachePolicy": "cache",
    "CacheStats": "cache",
    "CachedCallError": "errors",
    "CassetteMiss": "errors",
    "DiffEntry": "diff",
    "EnvelopeValidationError": "errors",
    "ErrorCode": "envelope",
    "ErrorInfo": "envelope",
    "EventType": "record",
    "ExecutionEvent": "record",
    "ExecutionHeader": "record",
    "ExecutionPage": "client",
    "ExecutionRecord": "record",
    "ExecutionStore": "store",
    "Explanation": "explain",
    "FileExecutionStore": "store",
    "Forbidden": "errors",
    "IntentContext": "envelope",
    "IntentEnvelope": "envelope",
    "IntentMetadata": "envelope",
    "IntentRef": "envelope",
    "IntentRouter": "router",
    "IntentusClient": "client",
    "IntentusNetError": "errors",
    "InvalidExecutionId": "errors",
    "JSONObject": "_json",
    "JSONValue": "_json",
    "MalformedRequest": "errors",
    "MemoryExecutionStore": "store",
    "NotCacheable": "errors",
    "RecordDiff": "diff",
    "RecordExists": "errors",
    "RecordIntegrityError": "errors",
    "RecordNotFound": "errors",
    "RecordStatus": "record",
    "RecordSummary": "record",
    "RecordWriter": "store",
    "RecordedStep": "stepview",
    "RemoteAgent": "remote",
    "ReplayCache": "cache",
    "ReplayEngine": "replay",
    "ReplayError": "errors",
    "ReplayHashMismatch": "errors",
    "ReplayNotAllowed": "errors",
    "ReplayResult": "replay",
    "ReplayableReason": "record",
    "ReplayedStepError": "errors",
    "RequestInvalid": "errors",
    "RequestTooLarge": "errors",
    "RerunResult": "rerun",
    "ResponseMetadata": "envelope",
    "RoutingDecision": "envelope",
    "RoutingOptions": "envelope",
    "RoutingStrategy": "envelope",
    "ServiceError": "errors",
    "ServiceUnavailable": "errors",
    "SideEffectMismatch": "errors",
    "StepRun": "stepview",
    "StoreError": "errors",
    "StoreStats": "record",
    "Unauthorized": "errors",
    "UnsupportedSchemaVersion": "errors",
    "VerifyReport": "record",
    "agent_app": "agent_service",
    "cached": "cached",
    "canonical_json": "hashing",
    "compute_hash": "hashing",
    "current_context": "agents",
    "diff_records": "diff",
    "explain": "explain",
    "new_execution_id": "_ids",
    "record_steps": "stepview",
    "step": "steps",
}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
    from ._ids import new_execution_id as new_execution_id
    from ._json import JSONObject as JSONObject
    from ._json import JSONValue as JSONValue
    from .agent_service import agent_app as agent_app
    from .agents import AgentContext as AgentContext
    from .agents import AgentDefinition as AgentDefinition
    from .agents import AgentRegistry as AgentRegistry
    from .agents import current_context as current_context
    from .cache import CachePolicy as CachePolicy
    from .cache import CacheStats as CacheStats
    from .cache import ReplayCache as ReplayCache
    from .cached import cached as cached
    from .client import AsyncIntentusClient as AsyncIntentusClient
    from .client import ExecutionPage as ExecutionPage
    from .client import IntentusClient as IntentusClient
    from .diff import DiffEntry as DiffEntry
    from .diff import RecordDiff as RecordDiff
    from .diff import diff_records as diff_records
    from .envelope import AgentResponse as AgentResponse
    from .envelope import AttemptInfo as AttemptInfo
    from .envelope import CacheDirective as CacheDirective
    from .envelope import ErrorCode as ErrorCode
    from .envelope import ErrorInfo as ErrorInfo
    from .envelope import IntentContext as IntentContext
    from .envelope import IntentEnvelope as IntentEnvelope
    from .envelope import IntentMetadata as IntentMetadata
    from .envelope import IntentRef as IntentRef
    from .envelope import ResponseMetadata as ResponseMetadata
    from .envelope import RoutingDecision as RoutingDecision
    from .envelope import RoutingOptions as RoutingOptions
    from .envelope import RoutingStrategy as RoutingStrategy
    from .errors import AgentRegistrationError as AgentRegistrationError
    from .errors import CachedCallError as CachedCallError
    from .errors import CacheError as CacheError
    from .errors import CacheMiss as CacheMiss
    from .errors import CassetteMiss as CassetteMiss
    from .errors import EnvelopeValidationError as EnvelopeValidationError
    from .errors import Forbidden as Forbidden
    from .errors import IntentusNetError as IntentusNetError
    from .errors import InvalidExecutionId as InvalidExecutionId
    from .errors import MalformedRequest as MalformedRequest
    from .errors import NotCacheable as NotCacheable
    from .errors import RecordExists as RecordExists
    from .errors import RecordIntegrityError as RecordIntegrityError
    from .errors import RecordNotFound as RecordNotFound
    from .errors import ReplayedStepError as ReplayedStepError
    from .errors import ReplayError as ReplayError
    from .errors import ReplayHashMismatch as ReplayHashMismatch
    from .errors import ReplayNotAllowed as ReplayNotAllowed
    from .errors import RequestInvalid as RequestInvalid
    from .errors import RequestTooLarge as RequestTooLarge
    from .errors import ServiceError as ServiceError
    from .errors import ServiceUnavailable as ServiceUnavailable
    from .errors import SideEffectMismatch as SideEffectMismatch
    from .errors import StoreError as StoreError
    from .errors import Unauthorized as Unauthorized
    from .errors import UnsupportedSchemaVersion as UnsupportedSchemaVersion
    from .explain import Explanation as Explanation
    from .explain import explain as explain
    from .hashing import canonical_json as canonical_json
    from .hashing import compute_hash as compute_hash
    from .record import EventType as EventType
    from .record import ExecutionEvent as ExecutionEvent
    from .record import ExecutionHeader as ExecutionHeader
    from .record import ExecutionRecord as ExecutionRecord
    from .record import RecordStatus as RecordStatus
    from .record import RecordSummary as RecordSummary
    from .record import ReplayableReason as ReplayableReason
    from .record import StoreStats as StoreStats
    from .record import VerifyReport as VerifyReport
    from .remote import RemoteAgent as RemoteAgent
    from .replay import ReplayEngine as ReplayEngine
    from .replay import ReplayResult as ReplayResult
    from .rerun import RerunResult as RerunResult
    from .router import IntentRouter as IntentRouter
    from .steps import step as step
    from .stepview import RecordedStep as RecordedStep
    from .stepview import StepRun as StepRun
    from .stepview import record_steps as record_steps
    from .store import ExecutionStore as ExecutionStore
    from .store import FileExecutionStore as FileExecutionStore
    from .store import MemoryExecutionStore as MemoryExecutionStore
    from .store import RecordWriter as RecordWriter
    from .store.hits import CacheHit as CacheHit


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__
