"""IntentusNet: intent-routing middleware with a record-and-replay cache.

Every public name is importable from here. Names load lazily (PEP 562) so that
the light read path (``intentusnet replay ID``) never imports pydantic or httpx.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

__version__ = "0.1.0"

# name -> module that defines it
_EXPORTS: dict[str, str] = {
    "AgentContext": "agents",
    "AgentDefinition": "agents",
    "AgentRegistrationError": "errors",
    "AgentRegistry": "agents",
    "AgentResponse": "envelope",
    "AttemptInfo": "envelope",
    "CacheDirective": "envelope",
    "EnvelopeValidationError": "errors",
    "ErrorCode": "envelope",
    "ErrorInfo": "envelope",
    "IntentContext": "envelope",
    "IntentEnvelope": "envelope",
    "IntentMetadata": "envelope",
    "IntentRef": "envelope",
    "IntentRouter": "router",
    "IntentusNetError": "errors",
    "InvalidExecutionId": "errors",
    "JSONObject": "_json",
    "JSONValue": "_json",
    "RecordExists": "errors",
    "RecordIntegrityError": "errors",
    "RecordNotFound": "errors",
    "ReplayError": "errors",
    "ReplayHashMismatch": "errors",
    "ReplayNotAllowed": "errors",
    "ResponseMetadata": "envelope",
    "RoutingDecision": "envelope",
    "RoutingOptions": "envelope",
    "RoutingStrategy": "envelope",
    "StoreError": "errors",
    "UnsupportedSchemaVersion": "errors",
    "canonical_json": "hashing",
    "compute_hash": "hashing",
    "new_execution_id": "_ids",
}

__all__ = sorted([*_EXPORTS, "__version__"])

if TYPE_CHECKING:
    from ._ids import new_execution_id as new_execution_id
    from ._json import JSONObject as JSONObject
    from ._json import JSONValue as JSONValue
    from .agents import AgentContext as AgentContext
    from .agents import AgentDefinition as AgentDefinition
    from .agents import AgentRegistry as AgentRegistry
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
    from .errors import EnvelopeValidationError as EnvelopeValidationError
    from .errors import IntentusNetError as IntentusNetError
    from .errors import InvalidExecutionId as InvalidExecutionId
    from .errors import RecordExists as RecordExists
    from .errors import RecordIntegrityError as RecordIntegrityError
    from .errors import RecordNotFound as RecordNotFound
    from .errors import ReplayError as ReplayError
    from .errors import ReplayHashMismatch as ReplayHashMismatch
    from .errors import ReplayNotAllowed as ReplayNotAllowed
    from .errors import StoreError as StoreError
    from .errors import UnsupportedSchemaVersion as UnsupportedSchemaVersion
    from .hashing import canonical_json as canonical_json
    from .hashing import compute_hash as compute_hash
    from .router import IntentRouter as IntentRouter


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'intentusnet' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return __all__
