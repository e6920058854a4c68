"""IntentusNet: intent-routing middleware with a record-and-replay cache.

Every public name is importable from here. Names load lazily (PEP 562) so that
the light read path (``intentusnet replay ID``) never imports pydantic or httpx.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._util.lazy import lazy_exports

__version__ = "0.1.0"

# name -> module that defines it
_EXPORTS: dict[str, str] = {
    "AgentContext": "routing.agents",
    "AgentDefinition": "routing.agents",
    "AgentRegistrationError": "errors",
    "AgentRegistry": "routing.agents",
    "AgentResponse": "envelope",
    "AsyncIntentusClient": "http.client",
    "AsyncSubmission": "http.submission",
    "AttemptInfo": "envelope",
    "BranchDiff": "steps.diff",
    "CacheDirective": "envelope",
    "CacheError": "errors",
    "CacheHit": "store.hits",
    "CacheMiss": "errors",
    "CachePolicy": "cache.replay_cache",
    "CacheStats": "cache.replay_cache",
    "CachedCallError": "errors",
    "CancelRefused": "errors",
    "Cassette": "steps.cassette",
    "CassetteMiss": "errors",
    "DiffEntry": "steps.diff",
    "DurableStore": "store.durable",
    "Backoff": "routing.retries",
    "exponential": "routing.retries",
    "ExecutionWaiting": "errors",
    "InvalidSignal": "errors",
    "SignalRefused": "errors",
    "WaitTimedOut": "errors",
    "WaitStore": "store.durable",
    "EnvelopeValidationError": "errors",
    "ErrorCode": "envelope",
    "ErrorInfo": "envelope",
    "EventType": "record.model",
    "ExecutionCancelled": "errors",
    "ExecutionEvent": "record.model",
    "ExecutionHeader": "record.model",
    "ExecutionObserver": "routing.seams",
    "ExecutionPage": "http.client",
    "ExecutionPending": "errors",
    "ExecutionRecord": "record.model",
    "ExecutionStore": "store",
    "Explanation": "steps.explain",
    "FileExecutionStore": "store",
    "Forbidden": "errors",
    "HTTPCassette": "integrations.cassette",
    "HTTPInteraction": "integrations.cassette",
    "Hit": "store.hits",
    "IdempotencyConflict": "errors",
    "IdempotencyTimeout": "errors",
    "IntentContext": "envelope",
    "IntentEnvelope": "envelope",
    "IntentMetadata": "envelope",
    "IntentRef": "envelope",
    "IntentRouter": "routing.router",
    "IntentusClient": "http.client",
    "IntentusNetError": "errors",
    "InvalidExecutionId": "errors",
    "InvalidIdempotencyKey": "errors",
    "InvalidQueue": "errors",
    "InvalidRerunOption": "errors",
    "InvalidResolution": "errors",
    "JSONObject": "_util.jsonvalue",
    "JSONValue": "_util.jsonvalue",
    "KeyRing": "record.signing",
    "ListFilters": "store",
    "LogCadence": "tlog.cadence",
    "LogCheckpoint": "tlog.checkpoint",
    "LogError": "errors",
    "LogIntegrityError": "errors",
    "LogLeaf": "tlog.leaf",
    "LogProof": "tlog.proof",
    "LogWitnesses": "tlog.publish",
    "MalformedRequest": "errors",
    "MemoryExecutionStore": "store",
    "ModelPrice": "cache.prices",
    "ModelSavings": "cache.savings",
    "NetworkBlocked": "errors",
    "NondeterminismError": "errors",
    "NotCacheable": "errors",
    "ObservedCall": "routing.seams",
    "ObservedExecution": "routing.seams",
    "ObservedStep": "routing.seams",
    "PlannedStep": "steps.plan",
    "PostgresExecutionStore": "store",
    "PriceTable": "cache.prices",
    "PriceTableError": "errors",
    "PublicKey": "record.keys",
    "Queue": "routing.queues",
    "Rate": "routing.queues",
    "ReaskAnswer": "integrations.reask",
    "ReaskRefused": "errors",
    "ReaskResult": "integrations.reask",
    "RecordDiff": "steps.diff",
    "RecordExists": "errors",
    "RecordIntegrityError": "errors",
    "RecordMode": "integrations.cassette",
    "RecordNotFound": "errors",
    "RecordStatus": "record.model",
    "RecordSummary": "record.model",
    "RecordVerdict": "testing.verdict",
    "RecordWriter": "store",
    "RecordedStep": "steps.view",
    "Recovery": "routing.recovery",
    "RecoveryOutcome": "routing.recovery",
    "RecoveryReport": "routing.recovery",
    "Redactor": "routing.redact",
    "RemoteAgent": "http.remote",
    "ReplayCache": "cache.replay_cache",
    "ReplayEngine": "replay",
    "ReplayError": "errors",
    "ReplayHashMismatch": "errors",
    "ReplayNotAllowed": "errors",
    "ReplayResult": "replay",
    "ReplayableReason": "record.model",
    "ReplayedStepError": "errors",
    "RequestInvalid": "errors",
    "RequestNotRecorded": "errors",
    "RequestTooLarge": "errors",
    "RerunOptions": "steps.options",
    "RerunPlan": "steps.plan",
    "RerunResult": "steps.rerun",
    "RerunWorkerError": "errors",
    "ResolveRefused": "errors",
    "ResponseMetadata": "envelope",
    "ResumeRefused": "errors",
    "RoutingDecision": "envelope",
    "RoutingOptions": "envelope",
    "RoutingStrategy": "envelope",
    "SavingsReport": "cache.savings",
    "ServiceError": "errors",
    "ServiceUnavailable": "errors",
    "SideEffectInDoubt": "errors",
    "SideEffectMismatch": "errors",
    "SideEffectRefused": "errors",
    "SignatureCheck": "record.signing",
    "SignatureError": "errors",
    "SignatureStatus": "record.signing",
    "SigningKey": "record.keys",
    "SigningKeyError": "errors",
    "StepRun": "steps.view",
    "StoreError": "errors",
    "StoreStats": "record.model",
    "Submission": "http.submission",
    "TileLog": "tlog.log",
    "Unauthorized": "errors",
    "UnknownQueue": "errors",
    "UnsupportedSchemaVersion": "errors",
    "VerifiedEvent": "replay",
    "VerifyReport": "record.model",
    "agent_app": "http.agent_app",
    "cached": "cache.cached",
    "canonical_json": "hashing",
    "compute_hash": "hashing",
    "current_context": "routing.agents",
    "diff_records": "steps.diff",
    "explain": "steps.explain",
    "fork": "steps.fork",
    "new_execution_id": "_util.ids",
    "open_store": "store",
    "plan_rerun": "steps.plan",
    "reask": "integrations.reask",
    "record_steps": "steps.view",
    "rerun": "steps.rerun",
    "rerun_all": "testing.bulk",
    "savings_report": "cache.savings",
    "select_ids": "testing.bulk",
    "step": "steps.step",
}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
    from ._util.ids import new_execution_id as new_execution_id
    from ._util.jsonvalue import JSONObject as JSONObject
    from ._util.jsonvalue import JSONValue as JSONValue
    from .cache.cached import cached as cached
    from .cache.prices import ModelPrice as ModelPrice
    from .cache.prices import PriceTable as PriceTable
    from .cache.replay_cache import CachePolicy as CachePolicy
    from .cache.replay_cache import CacheStats as CacheStats
    from .cache.replay_cache import ReplayCache as ReplayCache
    from .cache.savings import ModelSavings as ModelSavings
    from .cache.savings import SavingsReport as SavingsReport
    from .cache.savings import savings_report as savings_report
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
    from .errors import CancelRefused as CancelRefused
    from .errors import CassetteMiss as CassetteMiss
    from .errors import EnvelopeValidationError as EnvelopeValidationError
    from .errors import ExecutionCancelled as ExecutionCancelled
    from .errors import ExecutionPending as ExecutionPending
    from .errors import ExecutionWaiting as ExecutionWaiting
    from .errors import Forbidden as Forbidden
    from .errors import IdempotencyConflict as IdempotencyConflict
    from .errors import IdempotencyTimeout as IdempotencyTimeout
    from .errors import IntentusNetError as IntentusNetError
    from .errors import InvalidExecutionId as InvalidExecutionId
    from .errors import InvalidIdempotencyKey as InvalidIdempotencyKey
    from .errors import InvalidQueue as InvalidQueue
    from .errors import InvalidRerunOption as InvalidRerunOption
    from .errors import InvalidResolution as InvalidResolution
    from .errors import InvalidSignal as InvalidSignal
    from .errors import LogError as LogError
    from .errors import LogIntegrityError as LogIntegrityError
    from .errors import MalformedRequest as MalformedRequest
    from .errors import NetworkBlocked as NetworkBlocked
    from .errors import NondeterminismError as NondeterminismError
    from .errors import NotCacheable as NotCacheable
    from .errors import PriceTableError as PriceTableError
    from .errors import ReaskRefused as ReaskRefused
    from .errors import RecordExists as RecordExists
    from .errors import RecordIntegrityError as RecordIntegrityError
    from .errors import RecordNotFound as RecordNotFound
    from .errors import ReplayedStepError as ReplayedStepError
    from .errors import ReplayError as ReplayError
    from .errors import ReplayHashMismatch as ReplayHashMismatch
    from .errors import ReplayNotAllowed as ReplayNotAllowed
    from .errors import RequestInvalid as RequestInvalid
    from .errors import RequestNotRecorded as RequestNotRecorded
    from .errors import RequestTooLarge as RequestTooLarge
    from .errors import RerunWorkerError as RerunWorkerError
    from .errors import ResolveRefused as ResolveRefused
    from .errors import ResumeRefused as ResumeRefused
    from .errors import ServiceError as ServiceError
    from .errors import ServiceUnavailable as ServiceUnavailable
    from .errors import SideEffectInDoubt as SideEffectInDoubt
    from .errors import SideEffectMismatch as SideEffectMismatch
    from .errors import SideEffectRefused as SideEffectRefused
    from .errors import SignalRefused as SignalRefused
    from .errors import SignatureError as SignatureError
    from .errors import SigningKeyError as SigningKeyError
    from .errors import StoreError as StoreError
    from .errors import Unauthorized as Unauthorized
    from .errors import UnknownQueue as UnknownQueue
    from .errors import UnsupportedSchemaVersion as UnsupportedSchemaVersion
    from .errors import WaitTimedOut as WaitTimedOut
    from .hashing import canonical_json as canonical_json
    from .hashing import compute_hash as compute_hash
    from .http.agent_app import agent_app as agent_app
    from .http.client import AsyncIntentusClient as AsyncIntentusClient
    from .http.client import ExecutionPage as ExecutionPage
    from .http.client import IntentusClient as IntentusClient
    from .http.remote import RemoteAgent as RemoteAgent
    from .http.submission import AsyncSubmission as AsyncSubmission
    from .http.submission import Submission as Submission
    from .integrations.cassette import HTTPCassette as HTTPCassette
    from .integrations.cassette import HTTPInteraction as HTTPInteraction
    from .integrations.cassette import RecordMode as RecordMode
    from .integrations.reask import ReaskAnswer as ReaskAnswer
    from .integrations.reask import ReaskResult as ReaskResult
    from .integrations.reask import reask as reask
    from .record.keys import PublicKey as PublicKey
    from .record.keys import SigningKey as SigningKey
    from .record.model import EventType as EventType
    from .record.model import ExecutionEvent as ExecutionEvent
    from .record.model import ExecutionHeader as ExecutionHeader
    from .record.model import ExecutionRecord as ExecutionRecord
    from .record.model import RecordStatus as RecordStatus
    from .record.model import RecordSummary as RecordSummary
    from .record.model import ReplayableReason as ReplayableReason
    from .record.model import StoreStats as StoreStats
    from .record.model import VerifyReport as VerifyReport
    from .record.signing import KeyRing as KeyRing
    from .record.signing import SignatureCheck as SignatureCheck
    from .record.signing import SignatureStatus as SignatureStatus
    from .replay import ReplayEngine as ReplayEngine
    from .replay import ReplayResult as ReplayResult
    from .replay import VerifiedEvent as VerifiedEvent
    from .routing.agents import AgentContext as AgentContext
    from .routing.agents import AgentDefinition as AgentDefinition
    from .routing.agents import AgentRegistry as AgentRegistry
    from .routing.agents import current_context as current_context
    from .routing.queues import Queue as Queue
    from .routing.queues import Rate as Rate
    from .routing.recovery import Recovery as Recovery
    from .routing.recovery import RecoveryOutcome as RecoveryOutcome
    from .routing.recovery import RecoveryReport as RecoveryReport
    from .routing.redact import Redactor as Redactor
    from .routing.retries import Backoff as Backoff
    from .routing.retries import exponential as exponential
    from .routing.router import IntentRouter as IntentRouter
    from .routing.seams import ExecutionObserver as ExecutionObserver
    from .routing.seams import ObservedCall as ObservedCall
    from .routing.seams import ObservedExecution as ObservedExecution
    from .routing.seams import ObservedStep as ObservedStep
    from .steps.cassette import Cassette as Cassette
    from .steps.diff import BranchDiff as BranchDiff
    from .steps.diff import DiffEntry as DiffEntry
    from .steps.diff import RecordDiff as RecordDiff
    from .steps.diff import diff_records as diff_records
    from .steps.explain import Explanation as Explanation
    from .steps.explain import explain as explain
    from .steps.fork import fork as fork
    from .steps.options import RerunOptions as RerunOptions
    from .steps.plan import PlannedStep as PlannedStep
    from .steps.plan import RerunPlan as RerunPlan
    from .steps.plan import plan_rerun as plan_rerun
    from .steps.rerun import RerunResult as RerunResult
    from .steps.rerun import rerun as rerun
    from .steps.step import step as step
    from .steps.view import RecordedStep as RecordedStep
    from .steps.view import StepRun as StepRun
    from .steps.view import record_steps as record_steps
    from .store import ExecutionStore as ExecutionStore
    from .store import FileExecutionStore as FileExecutionStore
    from .store import ListFilters as ListFilters
    from .store import MemoryExecutionStore as MemoryExecutionStore
    from .store import PostgresExecutionStore as PostgresExecutionStore
    from .store import RecordWriter as RecordWriter
    from .store import open_store as open_store
    from .store.durable import DurableStore as DurableStore
    from .store.durable import WaitStore as WaitStore
    from .store.hits import CacheHit as CacheHit
    from .store.hits import Hit as Hit
    from .testing.bulk import rerun_all as rerun_all
    from .testing.bulk import select_ids as select_ids
    from .testing.verdict import RecordVerdict as RecordVerdict
    from .tlog.cadence import LogCadence as LogCadence
    from .tlog.checkpoint import LogCheckpoint as LogCheckpoint
    from .tlog.leaf import LogLeaf as LogLeaf
    from .tlog.log import TileLog as TileLog
    from .tlog.proof import LogProof as LogProof
    from .tlog.publish import LogWitnesses as LogWitnesses

__getattr__ = lazy_exports(__name__, _EXPORTS, globals())[0]


def __dir__() -> list[str]:
    return __all__
