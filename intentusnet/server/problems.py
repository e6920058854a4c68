"""Every error the service answers with is ``application/problem+json``.

The documents and the status mapping are :mod:`intentusnet.http.problem`'s; this
module hooks them into FastAPI: library errors, FastAPI's parameter validation,
Starlette's own HTTP errors (unknown path, wrong method) and, last, anything
unexpected, which answers 500 without internals and logs the traceback. A client
that hangs up before its body is read is not unexpected: it is counted as
``client_disconnected`` (499) and logged in one line.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

import orjson
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import Request
from starlette.responses import Response

from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import (
    ClientDisconnected,
    IntentusNetError,
    RecordNotFound,
    RequestInvalid,
    ServiceUnavailable,
)
from ..http.problem import MEDIA_TYPE, document, from_error, status_for

if TYPE_CHECKING:
    from fastapi import FastAPI

    from .metrics import Metrics

__all__ = ["install_handlers", "problem_response", "public_detail"]

_log = logging.getLogger("intentusnet.server")

#: Codes of Starlette's own HTTP errors.
_HTTP_CODES: Mapping[int, str] = {404: "not_found", 405: "method_not_allowed"}


def problem_response(
    body: JSONObject, headers: Mapping[str, str] | None = None
) -> Response:
    """Send a problem document; a 401 also says how to authenticate."""
    status = body["status"]
    assert isinstance(status, int)
    if status == 401:
        headers = {**(headers or {}), "WWW-Authenticate": 'Bearer realm="intentusnet"'}
    return Response(
        orjson.dumps(body), status_code=status, media_type=MEDIA_TYPE, headers=headers
    )


def invalid_request(
    errors: Iterable[Mapping[str, object]], prefix: str = ""
) -> RequestInvalid:
    """A ``RequestInvalid`` listing every invalid parameter or field.

    ``errors`` are as pydantic lists them (``loc``, ``msg``, ``type``);
    ``prefix`` goes before each location (``body.`` for a body's fields).
    """
    listed: list[JSONValue] = []
    summaries: list[str] = []
    for error in errors:
        loc = error["loc"]
        assert isinstance(loc, tuple | list)
        where = prefix + ".".join(str(part) for part in loc)
        kind = str(error["type"])
        message = "unknown field" if kind == "extra_forbidden" else str(error["msg"])
        listed.append({"location": where, "message": message, "type": kind})
        summaries.append(f"{where}: {message}")
    more = f" (and {len(summaries) - 1} more)" if len(summaries) > 1 else ""
    first = summaries[0] if summaries else "not valid"
    invalid = RequestInvalid(f"invalid request: {first}{more}")
    invalid.problem = {"errors": listed}
    return invalid


def public_detail(
    exc: IntentusNetError, request: Request, hidden: Sequence[str]
) -> str:
    """The error's message as a client may see it: no path of the server.

    A store names itself where a record is missing (``in store <root>``), so
    that detail is rebuilt from the id asked for; an error of the service's own
    (500) says only that it happened, the log has the rest; and the ``hidden``
    paths (the store's directory) are replaced by ``<store>`` in any other.
    """
    if isinstance(exc, RecordNotFound):
        execution_id = request.path_params.get("execution_id")
        return f"no record {execution_id}" if execution_id else "no such record"
    if status_for(exc) >= 500 and not isinstance(exc, ServiceUnavailable):
        _log.warning("%s %s: %s", request.method, request.url.path, exc)
        kind = exc.code.replace("_", " ")
        return f"{kind} in the IntentusNet service; see the server log"
    text = str(exc)
    for path in hidden:
        text = text.replace(path, "<store>")
    return text


def install_handlers(
    app: FastAPI, metrics: Metrics, *, hidden: Sequence[str] = ()
) -> None:
    """Make every error the app answers with a problem document.

    ``hidden``: server paths no answer may show (see :func:`public_detail`).
    """

    async def on_library_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, IntentusNetError)
        metrics.problem(exc.code)
        if isinstance(exc, ClientDisconnected):
            # The client's doing: one line for the operator, no traceback.
            _log.info("%s %s: %s", request.method, request.url.path, exc)
        body = from_error(exc, request.url.path)
        body["detail"] = public_detail(exc, request, hidden)
        return problem_response(body)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        return await on_library_error(request, invalid_request(exc.errors()))

    async def on_http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        code = _HTTP_CODES.get(exc.status_code, "http_error")
        metrics.problem(code)
        body = document(
            exc.status_code, code, str(exc.detail), instance=request.url.path
        )
        return problem_response(body, exc.headers)

    async def on_unexpected(request: Request, exc: Exception) -> Response:
        _log.error(
            "internal error answering %s %s",
            request.method,
            request.url.path,
            exc_info=exc,
        )
        metrics.problem("internal_error")
        detail = "internal error in the IntentusNet service; see the server log"
        return problem_response(
            document(500, "internal_error", detail, instance=request.url.path)
        )

    app.add_exception_handler(IntentusNetError, on_library_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_http_error)
    app.add_exception_handler(Exception, on_unexpected)
