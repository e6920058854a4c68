"""Property-based fuzz of the API from its own OpenAPI document (schemathesis).

Loopback only, bounded: a fixed number of examples per operation and mode, no
shrinking. Valid and invalid requests alike must never get a 5xx, and every
answer must match the documented status codes, content types and schemas.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from livekit import ROUTE_KEY, LiveServer
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

EXAMPLES_PER_OPERATION = 30
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


@pytest.mark.slow
def test_fuzz_finds_no_server_errors_or_schema_violations(live: LiveServer) -> None:
    """Generated requests to every operation get documented, conforming answers."""
    assert live.url.startswith("http://127.0.0.1:")
    schema = schemathesis.openapi.from_url(f"{live.url}/openapi.json", timeout=10)
    headers = {"Authorization": f"Bearer {ROUTE_KEY}"}
    calls = 0
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) == 14  # with resume, resolution, cancel, fork and signals
    for operation in operations:
        strategy = st.one_of(
            operation.as_strategy(GenerationMode.POSITIVE),
            operation.as_strategy(GenerationMode.NEGATIVE),
        )

        @given(case=strategy)
        @settings(
            max_examples=EXAMPLES_PER_OPERATION,
            deadline=None,
            database=None,
            derandomize=True,
            phases=[Phase.explicit, Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        def fuzz(case: schemathesis.Case) -> None:
            nonlocal calls
            calls += 1
            case.call_and_validate(
                base_url=live.url, headers=headers, checks=CHECKS, timeout=10
            )

        fuzz()
    assert calls > len(operations)
