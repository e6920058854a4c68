"""The public API: the names users import from ``intentusnet``, pinned."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

import intentusnet

#: Every public name. Adding one is a deliberate change (and a CHANGELOG line);
#: removing or renaming one breaks users.
PUBLIC = [
    "AgentContext",
    "AgentDefinition",
    "AgentRegistrationError",
    "AgentRegistry",
    "AgentResponse",
    "AsyncIntentusClient",
    "AsyncSubmission",
    "AttemptInfo",
    "Backoff",
    "BranchDiff",
    "CacheDirective",
    "CacheError",
    "CacheHit",
    "CacheMiss",
    "CachePolicy",
    "CacheStats",
    "CachedCallError",
    "CancelRefused",
    "Cassette",
    "CassetteMiss",
    "DiffEntry",
    "DurableStore",
    "EnvelopeValidationError",
    "ErrorCode",
    "ErrorInfo",
    "EventType",
    "ExecutionCancelled",
    "ExecutionEvent",
    "ExecutionHeader",
    "ExecutionObserver",
    "ExecutionPage",
    "ExecutionPending",
    "ExecutionRecord",
    "ExecutionStore",
    "ExecutionWaiting",
    "Explanation",
    "FileExecutionStore",
    "Forbidden",
    "HTTPCassette",
    "HTTPInteraction",
    "Hit",
    "IdempotencyConflict",
    "IdempotencyTimeout",
    "IntentContext",
    "IntentEnvelope",
    "IntentMetadata",
    "IntentRef",
    "IntentRouter",
    "IntentusClient",
    "IntentusNetError",
    "InvalidExecutionId",
    "InvalidIdempotencyKey",
    "InvalidQueue",
    "InvalidRerunOption",
    "InvalidResolution",
    "InvalidSignal",
    "JSONObject",
    "JSONValue",
    "KeyRing",
    "ListFilters",
    "LogCadence",
    "LogCheckpoint",
    "LogError",
    "LogIntegrityError",
    "LogLeaf",
    "LogProof",
    "LogWitnesses",
    "MalformedRequest",
    "MemoryExecutionStore",
    "ModelPrice",
    "ModelSavings",
    "NetworkBlocked",
    "NondeterminismError",
    "NotCacheable",
    "ObservedCall",
    "ObservedExecution",
    "ObservedStep",
    "PlannedStep",
    "PostgresExecutionStore",
    "PriceTable",
    "PriceTableError",
    "PublicKey",
    "Queue",
    "Rate",
    "ReaskAnswer",
    "ReaskRefused",
    "ReaskResult",
    "RecordDiff",
    "RecordExists",
    "RecordIntegrityError",
    "RecordMode",
    "RecordNotFound",
    "RecordStatus",
    "RecordSummary",
    "RecordVerdict",
    "RecordWriter",
    "RecordedStep",
    "Recovery",
    "RecoveryOutcome",
    "RecoveryReport",
    "Redactor",
    "RemoteAgent",
    "ReplayCache",
    "ReplayEngine",
    "ReplayError",
    "ReplayHashMismatch",
    "ReplayNotAllowed",
    "ReplayResult",
    "ReplayableReason",
    "ReplayedStepError",
    "RequestInvalid",
    "RequestNotRecorded",
    "RequestTooLarge",
    "RerunOptions",
    "RerunPlan",
    "RerunResult",
    "RerunWorkerError",
    "ResolveRefused",
    "ResponseMetadata",
    "ResumeRefused",
    "RoutingDecision",
    "RoutingOptions",
    "RoutingStrategy",
    "SavingsReport",
    "ServiceError",
    "ServiceUnavailable",
    "SideEffectInDoubt",
    "SideEffectMismatch",
    "SideEffectRefused",
    "SignalRefused",
    "SignatureCheck",
    "SignatureError",
    "SignatureStatus",
    "SigningKey",
    "SigningKeyError",
    "StepRun",
    "StoreError",
    "StoreStats",
    "Submission",
    "TileLog",
    "Unauthorized",
    "UnknownQueue",
    "UnsupportedSchemaVersion",
    "VerifiedEvent",
    "VerifyReport",
    "WaitStore",
    "WaitTimedOut",
    "__version__",
    "agent_app",
    "cached",
    "canonical_json",
    "compute_hash",
    "current_context",
    "diff_records",
    "explain",
    "exponential",
    "fork",
    "new_execution_id",
    "open_store",
    "plan_rerun",
    "reask",
    "record_steps",
    "rerun",
    "rerun_all",
    "savings_report",
    "select_ids",
    "step",
]


def test_all_is_pinned() -> None:
    """``intentusnet.__all__`` is exactly the pinned list, sorted."""
    assert intentusnet.__all__ == PUBLIC


def test_each_name_imports() -> None:
    """``from intentusnet import NAME`` works for every name, in a fresh interpreter."""
    probe = "\n".join(f"from intentusnet import {name}" for name in PUBLIC)
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_a_module_imported_first_does_not_shadow_a_function() -> None:
    """A module imported first does not shadow its function on the package.

    Importing the modules behind ``explain``, ``rerun``, ``cached`` and ``step``
    first still leaves the functions, not the modules, on the package.
    """
    probe = (
        "import types, intentusnet.steps.explain, intentusnet.steps.rerun, "
        "intentusnet.steps.step, intentusnet.cache.cached\n"
        "from intentusnet import cached, explain, rerun, step\n"
        "assert not any(isinstance(f, types.ModuleType) "
        "for f in (cached, explain, rerun, step))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_dir_lists_the_public_names() -> None:
    """``dir(intentusnet)`` shows the public names, not the modules behind them."""
    assert dir(intentusnet) == PUBLIC


def test_unknown_name_is_an_attribute_error() -> None:
    """A misspelt name fails as any module attribute does."""
    with pytest.raises(AttributeError, match="no attribute 'IntentRuoter'"):
        intentusnet.IntentRuoter  # noqa: B018


def _type_checking_imports(source: str) -> dict[str, str]:
    """The ``from .module import Name as Name`` lines under ``if TYPE_CHECKING:``."""
    found: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for line in node.body:
                if not isinstance(line, ast.ImportFrom):
                    continue  # a check for mypy (``_conforms``), not an export
                assert line.level == 1, ast.unparse(line)
                for alias in line.names:
                    assert alias.asname == alias.name, ast.unparse(line)
                    found[alias.name] = str(line.module)
    return found


@pytest.mark.parametrize(
    "package",
    [
        "intentusnet",
        "intentusnet.store",
        "intentusnet.server",
        "intentusnet.server.gateway",
    ],
)
def test_the_lazy_map_and_the_typed_imports_name_the_same(package: str) -> None:
    """Each lazy export's module is the one its TYPE_CHECKING import names."""
    module = importlib.import_module(package)
    assert module.__file__ is not None
    typed = _type_checking_imports(Path(module.__file__).read_text())
    assert typed == module._EXPORTS
