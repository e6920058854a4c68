"""The explorer's re-ask page: one recorded model call, asked again from a form.

``GET /ui/executions/{id}/steps/{n}/reask`` shows the call as recorded (its
request body and answer) and a form: edits (``PATH=JSON``, one a line), a
model, how many times. ``POST`` to the same path sends it with
:func:`intentusnet.integrations.reask.reask`, keys from the server's
environment, and shows the answers side by side. Sending costs money and
records: like invalidating, it needs a key that may route, so a read-only
explorer (``intentusnet ui``, a read key) refuses the form, saying why.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import Response

from ...errors import (
    Forbidden,
    IntentusNetError,
    ReaskRefused,
    RecordIntegrityError,
    RequestInvalid,
    RequestTooLarge,
    StoreError,
    Unauthorized,
)
from ...http.problem import status_for
from ...integrations.reask import MAX_TIMES, ReaskResult, reask
from ...steps.reask import RecordedCall, parse_edit, recorded_call
from ..auth import Access
from .access import Gate, form, login_redirect, same_origin
from .render import pretty_json, render

if TYPE_CHECKING:
    from ...store import ExecutionStore

__all__ = ["reask_router"]

_PATH = "/ui/executions/{execution_id}/steps/{number}/reask"
#: What the routes show as an error page (a browser without a key: the login).
_REFUSALS = (
    Unauthorized,
    Forbidden,
    ReaskRefused,
    RequestInvalid,
    RequestTooLarge,
    StoreError,
)


def reask_router(store: ExecutionStore | None, gate: Gate) -> APIRouter:
    """The re-ask page's two routes over ``store``, guarded by ``gate``."""
    pages = APIRouter(include_in_schema=False)

    def page(
        request: Request,
        call: RecordedCall,
        fields: dict[str, str],
        *,
        result: ReaskResult | None = None,
        error: str | None = None,
        status: int = 200,
    ) -> Response:
        return render(
            "reask.html",
            request,
            status=status,
            call=call,
            body=pretty_json(call.body),
            recorded=call.response,
            fields=fields,
            result=result,
            error=error,
            max_times=MAX_TIMES,
            can_send=gate.may_invalidate(request),
        )

    def refused(request: Request, exc: Exception) -> Response:
        if isinstance(exc, Unauthorized):
            return login_redirect(request)
        assert isinstance(exc, IntentusNetError)
        status = 422 if isinstance(exc, ReaskRefused) else status_for(exc)
        message = str(exc)
        if isinstance(exc, StoreError) and not isinstance(exc, RecordIntegrityError):
            message = "no such record"
        return render(
            "error.html", request, status=status, code=exc.code, message=message
        )

    def found(execution_id: str, number: int) -> RecordedCall:
        if store is None:
            raise RequestInvalid("this service records no executions (no store)")
        return recorded_call(store.load(execution_id), number)

    @pages.get(_PATH)
    def show(request: Request, execution_id: str, number: int) -> Response:
        try:
            gate.authorize(request)
            call = found(execution_id, number)
        except _REFUSALS as exc:
            return refused(request, exc)
        model = call.body.get("model") if isinstance(call.body, dict) else None
        fields = {"model": str(model or ""), "set": "", "times": "1"}
        return page(request, call, fields)

    @pages.post(_PATH)
    async def send(request: Request, execution_id: str, number: int) -> Response:
        try:
            same_origin(request)
            gate.authorize(request, Access.ROUTE)
            if not gate.may_invalidate(request):
                raise Forbidden(
                    "re-asking sends a model call and records it: it needs "
                    "`intentusnet serve` and an API key that may route; this "
                    "explorer is read-only"
                )
            call = found(execution_id, number)
            posted = await form(request)
        except _REFUSALS as exc:
            return refused(request, exc)
        fields = {name: posted.get(name, "") for name in ("model", "set", "times")}
        try:
            result = await run_in_threadpool(_send, store, call, number, fields)
        except (ReaskRefused, RequestInvalid) as exc:
            return page(request, call, fields, error=str(exc), status=422)
        return page(request, call, fields, result=result)

    return pages


def _send(
    store: ExecutionStore | None,
    call: RecordedCall,
    number: int,
    fields: dict[str, str],
) -> ReaskResult:
    """Re-ask the call as the form says (on a worker thread: it waits on the model)."""
    assert store is not None  # the call was found in it
    edits = dict(
        parse_edit(line.strip())
        for line in fields.get("set", "").splitlines()
        if line.strip()
    )
    return reask(
        store.load(call.execution_id),
        number,
        store=store,
        edits=edits,
        model=fields.get("model", "").strip() or None,
        times=_times(fields.get("times") or "1"),
    )


def _times(text: str) -> int:
    try:
        times = int(text)
    except ValueError:
        raise RequestInvalid(f"times must be a number from 1 to {MAX_TIMES}") from None
    if not 1 <= times <= MAX_TIMES:
        raise RequestInvalid(f"times must be a number from 1 to {MAX_TIMES}")
    return times
