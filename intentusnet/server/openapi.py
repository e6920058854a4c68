"""The OpenAPI document, generated from the library's and the API's pydantic models.

FastAPI describes the paths and parameters from the route functions; the
schemas come from :func:`pydantic.json_schema.models_json_schema` over the very
models that validate requests (``IntentEnvelope``) and describe answers
(``AgentResponse`` and :mod:`.schemas`). Every error response is documented as
``application/problem+json`` with the ``Problem`` schema, and every operation
that can answer 401 names the API key's scheme (``HTTPBearer``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel
from pydantic.json_schema import JsonSchemaMode, models_json_schema

from .. import __version__
from ..envelope import AgentResponse, IntentEnvelope
from ..http.problem import MEDIA_TYPE
from .schemas import (
    Accepted,
    Cancellation,
    Decision,
    ExecutionPage,
    ExecutionRecord,
    Fork,
    ForkRequest,
    Health,
    Problem,
    ReplayRequest,
    ReplayResult,
    ResolutionRequest,
    Savings,
    SignalSent,
    VerifyReport,
)

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .._util.jsonvalue import JSONObject

__all__ = ["SECURITY_SCHEME", "body", "build_openapi", "ok", "problem", "ref"]

#: The API key as the OpenAPI document names it: a bearer token.
SECURITY_SCHEME: Final = "HTTPBearer"
_KEY_DESCRIPTION: Final = "An API key. Read-only keys can read and replay, not route."

_MODELS: Final[tuple[tuple[type[BaseModel], JsonSchemaMode], ...]] = (
    (IntentEnvelope, "validation"),
    (ReplayRequest, "validation"),
    (ResolutionRequest, "validation"),
    (ForkRequest, "validation"),
    (Fork, "serialization"),
    (Decision, "serialization"),
    (Cancellation, "serialization"),
    (SignalSent, "serialization"),
    (AgentResponse, "serialization"),
    (ExecutionPage, "serialization"),
    (ExecutionRecord, "serialization"),
    (VerifyReport, "serialization"),
    (ReplayResult, "serialization"),
    (Accepted, "serialization"),
    (Health, "serialization"),
    (Savings, "serialization"),
    (Problem, "serialization"),
)
_TEMPLATE: Final = "#/components/schemas/{model}"
_DESCRIPTION: Final = (
    "Routes intents to agents and serves the tamper-evident execution records "
    "they leave. Errors are `application/problem+json`; `code` is the stable "
    "error code of the IntentusNet error class. See docs/serve.md."
)


def ref(name: str) -> JSONObject:
    """A JSON schema reference to the component ``name``."""
    return {"$ref": _TEMPLATE.format(model=name)}


def ok(name: str, description: str) -> JSONObject:
    """An OpenAPI JSON response whose body is the component ``name``."""
    return {
        "description": description,
        "content": {"application/json": {"schema": ref(name)}},
    }


def body(name: str, *, required: bool = True) -> JSONObject:
    """An OpenAPI JSON request body that is the component ``name``."""
    return {
        "required": required,
        "content": {"application/json": {"schema": ref(name)}},
    }


def problem(description: str) -> JSONObject:
    """An OpenAPI error response carrying a problem document."""
    return {
        "description": description,
        "content": {MEDIA_TYPE: {"schema": ref("Problem")}},
    }


def component_schemas() -> JSONObject:
    """The JSON schemas of every model the API reads or writes, by name."""
    _, top = models_json_schema(_MODELS, ref_template=_TEMPLATE, by_alias=True)
    defs = top.get("$defs", {})
    assert isinstance(defs, dict)
    return defs


def build_openapi(app: FastAPI) -> JSONObject:
    """Build (once) and return the app's OpenAPI document."""
    if app.openapi_schema:
        return app.openapi_schema
    doc = get_openapi(
        title="IntentusNet",
        version=__version__,
        description=_DESCRIPTION,
        routes=app.routes,
    )
    components = doc.setdefault("components", {})
    schemas = components.setdefault("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)  # FastAPI's; our validation errors are problems
    schemas.update(component_schemas())
    components["securitySchemes"] = {
        SECURITY_SCHEME: {
            "type": "http",
            "scheme": "bearer",
            "description": _KEY_DESCRIPTION,
        }
    }
    for operations in doc.get("paths", {}).values():
        for operation in operations.values():
            responses = operation.get("responses", {})
            for status, response in responses.items():
                if status[:1] in "45":
                    response["content"] = problem("")["content"]
            if "401" in responses:
                operation["security"] = [{SECURITY_SCHEME: []}]
    app.openapi_schema = doc
    return doc
