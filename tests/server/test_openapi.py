"""The OpenAPI document and the wire models behind it."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from livekit import echo_router

from intentusnet import AgentResponse, IntentEnvelope
from intentusnet.replay import ReplayEngine
from intentusnet.server import create_app, schemas
from intentusnet.server.openapi import component_schemas
from intentusnet.store import FileExecutionStore


@pytest.fixture
def doc(tmp_path: Path) -> Iterator[dict[str, object]]:
    """The OpenAPI document of an app."""
    with echo_router(tmp_path) as router:
        yield create_app(router).openapi()


def _refs(node: object) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield str(value)
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)


def test_every_reference_resolves(doc: dict[str, object]) -> None:
    """Every $ref names a component that exists."""
    components = doc["components"]
    assert isinstance(components, dict)
    names = set(components["schemas"])
    for ref in _refs(doc):
        assert ref.removeprefix("#/components/schemas/") in names, ref


def test_schemas_come_from_the_library_models(doc: dict[str, object]) -> None:
    """The envelope and response schemas are pydantic's, for the library's models."""
    schemas_ = doc["components"]["schemas"]  # type: ignore[index]
    generated = IntentEnvelope.model_json_schema(by_alias=True)
    assert set(schemas_["IntentEnvelope"]["properties"]) == set(  # type: ignore[index]
        generated["properties"]
    )
    assert schemas_["IntentEnvelope"]["additionalProperties"] is False  # type: ignore[index]
    response = AgentResponse.model_json_schema(by_alias=True, mode="serialization")
    assert set(schemas_["AgentResponse"]["properties"]) == set(  # type: ignore[index]
        response["properties"]
    )
    assert schemas_ == {**schemas_, **component_schemas()}  # type: ignore[dict-item]


def test_errors_are_documented_as_problems(doc: dict[str, object]) -> None:
    """Every 4xx and 5xx response is application/problem+json with Problem."""
    paths = doc["paths"]
    assert isinstance(paths, dict)
    assert set(paths) == {
        "/v1/intents",
        "/v1/executions",
        "/v1/executions/{execution_id}",
        "/v1/executions/{execution_id}/cancel",
        "/v1/executions/{execution_id}/fork",
        "/v1/executions/{execution_id}/resume",
        "/v1/executions/{execution_id}/signals/{name}",
        "/v1/executions/{execution_id}/replay",
        "/v1/executions/{execution_id}/resolution",
        "/v1/executions/{execution_id}/verify",
        "/v1/idempotency-keys/{key}",
        "/v1/savings",
        "/healthz",
        "/metrics",
    }
    for operations in paths.values():
        for operation in operations.values():
            for status, response in operation["responses"].items():
                if status.startswith(("4", "5")) and status != "503":
                    assert list(response["content"]) == ["application/problem+json"]


def test_the_api_key_scheme_is_declared(doc: dict[str, object]) -> None:
    """The bearer key is a security scheme that every operation but health needs."""
    schemes = doc["components"]["securitySchemes"]  # type: ignore[index]
    assert list(schemes) == ["HTTPBearer"]
    assert schemes["HTTPBearer"]["type"] == "http"
    assert schemes["HTTPBearer"]["scheme"] == "bearer"
    assert "Read-only keys" in schemes["HTTPBearer"]["description"]
    paths = doc["paths"]
    assert isinstance(paths, dict)
    for path, operations in paths.items():
        for operation in operations.values():
            needed = None if path == "/healthz" else [{"HTTPBearer": []}]
            assert operation.get("security") == needed, path


def test_list_parameters_are_the_store_filters(doc: dict[str, object]) -> None:
    """GET /v1/executions documents every filter of store.list(), with its format."""
    operation = doc["paths"]["/v1/executions"]["get"]  # type: ignore[index]
    params = {p["name"]: p for p in operation["parameters"]}
    assert list(params) == [
        "intent",
        "status",
        "since",
        "until",
        "replayable",
        "id_prefix",
        "envelope_hash",
        "limit",
        "cursor",
    ]
    assert all(p["in"] == "query" and not p["required"] for p in params.values())

    def schema(name: str) -> dict[str, object]:
        found = params[name]["schema"]["anyOf"][0]
        assert isinstance(found, dict)
        return found

    assert schema("until") == {"type": "string", "format": "date-time"}
    assert schema("replayable") == {"type": "boolean"}
    assert schema("id_prefix")["pattern"] == "^[A-Za-z0-9_.-]{1,128}$"
    assert schema("envelope_hash")["pattern"] == "^sha256:[0-9a-f]{64}$"
    assert "422" in operation["responses"]


def test_wire_models_match_to_json(tmp_path: Path) -> None:
    """The API's models accept exactly what the library's to_json() writes."""
    root = tmp_path / "records"
    with echo_router(root) as router:
        ids = [
            router.route_intent({"intent": {"name": name}}).metadata.execution_id
            for name in ("echo", "flaky", "nobody")
        ]
    with FileExecutionStore(root) as store:
        for execution_id in ids:
            assert execution_id is not None
            record = store.load(execution_id)
            schemas.ExecutionRecord.model_validate(record.to_json())
            schemas.VerifyReport.model_validate(store.verify(execution_id).to_json())
            result = ReplayEngine(record).replay()
            schemas.ReplayResult.model_validate(result.to_json())
        for summary in store.list():
            schemas.ExecutionSummary.model_validate(summary.to_json())


def test_docs_work_offline(live: Any) -> None:
    """/docs is Swagger UI from assets the service serves itself, no CDN."""
    with httpx.Client(base_url=live.url, trust_env=False) as http:
        page = http.get("/docs")
        assert page.status_code == 200
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert assets
        assert all(asset.startswith("/docs/static/") for asset in assets)
        for asset in assets:
            assert http.get(asset).status_code == 200
        assert "https://" not in page.text
        assert "/openapi.json" in page.text
