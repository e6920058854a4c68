"""The execution page's levers as buttons: resume, resolve, cancel, fork.

Under ``intentusnet serve`` (whose router runs today's code), a key that may
route (not ``ro:``) sees, on an execution's page, a form per lever that fits
the execution (docs/ui.md, "Operating from the page"); each shows the
equivalent command beside it, and a read-only key sees only the commands.
Each form posts to ``/ui/executions/ID/<lever>``, which calls the very
``Levers`` the JSON API's endpoints call (``server/levers.py``), and is guarded
as invalidation is: refused when posted from another origin (the key's cookie
is ``SameSite=Strict`` too), a write key required.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import orjson
from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import RedirectResponse, Response

from ...errors import (
    Forbidden,
    IntentusNetError,
    InvalidResolution,
    InvalidSignal,
    RecordNotFound,
    RequestInvalid,
    StoreError,
    Unauthorized,
)
from ...http.problem import status_for
from ...record.durable import parked_levers
from ...record.model import RecordStatus
from ..auth import Access
from .access import COOKIE, Gate, form, login_redirect, same_origin
from .render import render

if TYPE_CHECKING:
    from ..._util.jsonvalue import JSONObject, JSONValue
    from ...record.model import ExecutionRecord
    from ..levers import Levers

__all__ = ["Lever", "Operator", "operate_router", "page_levers"]

#: Who an operator is, from a request and the key of its cookie.
Who = Callable[[Request, str | None], str]
_RUNNING: Final = frozenset({RecordStatus.IN_PROGRESS, RecordStatus.INCOMPLETE})


@dataclass(frozen=True, slots=True)
class Operator:
    """What the page's buttons act through: the service's levers and keys.

    Attributes:
        levers: the service's levers (the JSON API's too).
        who: names the operator a decision records (the key, never itself).
        app_ref: the application's ``MODULE:ATTR``, for the commands shown.
    """

    levers: Levers
    who: Who
    app_ref: str


@dataclass(frozen=True, slots=True)
class Lever:
    """One lever the page shows: its command, and its form when allowed.

    Attributes:
        kind: ``resume``, ``happened``, ``not_happened``, ``retry``,
            ``cancel`` or ``fork``.
        command: the equivalent command line.
        step: the step a resolution names (``None``: none, or a fork's
            default start).
    """

    kind: str
    command: str
    step: int | None = None


def page_levers(
    record: ExecutionRecord, durable: JSONObject, app_ref: str
) -> list[Lever]:
    """The levers that fit ``record`` as it stands (its chain's newest or not).

    A parked execution's are its park reason's (``parked_levers``); an
    interrupted one not resumed yet is resumed or cancelled; a running one is
    cancelled; any execution that is not running can be forked. A child
    intent's record has none: its parent's move it.
    """
    if record.header.parent_execution_id is not None:
        return []
    execution_id = record.execution_id
    status = record.header.status
    attention = durable.get("attention")
    step = attention.get("step") if isinstance(attention, dict) else None
    found: list[Lever] = []
    if durable.get("commands"):  # parked, nothing after it yet
        found = [
            Lever(kind, command, step if type(step) is int else None)
            for kind, command in parked_levers(execution_id, attention, app_ref)
            if kind != "fork"  # offered below, from any step
        ]
    elif status is RecordStatus.INCOMPLETE and durable.get("resumedBy") is None:
        found = [
            Lever("resume", f"intentusnet resume {execution_id} --app {app_ref}"),
            Lever("cancel", f"intentusnet cancel {execution_id}"),
        ]
    elif status is RecordStatus.IN_PROGRESS:
        found = [Lever("cancel", f"intentusnet cancel {execution_id}")]
    if status not in _RUNNING:
        # from the step today's code asks otherwise; never, by default, from
        # a side effect in doubt (a fork runs its start live)
        changed = isinstance(attention, dict) and (
            attention.get("reason") == "nondeterminism"
        )
        start = step if changed and type(step) is int else None
        fork = f"intentusnet fork {execution_id} --from {start or 'STEP'}"
        found.append(Lever("fork", f"{fork} --app {app_ref}", start))
    return found


def _from_step(text: str) -> int | str:
    """A step as a form gives it: its number, or its name."""
    text = text.strip()
    if not text:
        raise RequestInvalid("say which step the fork runs from")
    return int(text) if text.isdigit() else text


def _output(text: str) -> JSONValue:
    """A resolution's output, typed as JSON in the form (blank: null)."""
    if not text.strip():
        return None
    try:
        found: JSONValue = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise InvalidResolution(f"the output is not JSON: {exc}") from None
    return found


def operate_router(gate: Gate, operator: Operator) -> APIRouter:
    """The levers' form handlers under ``/ui/executions/ID/``. Added in 0.1.0."""
    pages = APIRouter(include_in_schema=False)
    levers = operator.levers

    async def act(
        request: Request, do: Callable[[str, dict[str, str], str], str]
    ) -> Response:
        """Check origin and key, run ``do`` on a worker thread, show its record."""
        try:
            same_origin(request)
            gate.authorize(request, Access.ROUTE)
            if gate.key_access is None:
                raise Forbidden("acting from a page needs an API key")
            fields = await form(request)
            who = operator.who(request, request.cookies.get(COOKIE))
            execution = str(request.path_params["execution_id"])
            shown = await run_in_threadpool(do, execution, fields, who)
        except Unauthorized:
            return login_redirect(request)
        except IntentusNetError as exc:
            message = str(exc)
            if isinstance(exc, StoreError):
                message = "no such record" if isinstance(exc, RecordNotFound) else ""
            return render(
                "error.html",
                request,
                status=status_for(exc),
                code=exc.code,
                message=message or exc.code.replace("_", " "),
            )
        return RedirectResponse(f"/ui/executions/{shown}", status_code=303)

    @pages.post("/ui/executions/{execution_id}/resume")
    async def resume(request: Request) -> Response:
        def do(execution: str, fields: dict[str, str], who: str) -> str:
            return levers.resume(execution).metadata.execution_id or execution

        return await act(request, do)

    @pages.post("/ui/executions/{execution_id}/resolve")
    async def resolve(request: Request) -> Response:
        def do(execution: str, fields: dict[str, str], who: str) -> str:
            happened = fields.get("happened") == "yes"
            step = fields.get("step", "")
            if step and not step.isdigit():
                raise RequestInvalid("the step is a number")
            output = _output(fields.get("output", ""))
            if not happened and output is not None:
                raise InvalidResolution("an output goes with a step that happened")
            return levers.resolve(
                execution,
                step=int(step) if step else None,
                happened=happened,
                output=output,
                by=who,
                via="ui",
            )

        return await act(request, do)

    @pages.post("/ui/executions/{execution_id}/cancel")
    async def cancel(request: Request) -> Response:
        def do(execution: str, fields: dict[str, str], who: str) -> str:
            record, _ = levers.cancel(execution, by=who, via="ui")
            return record

        return await act(request, do)

    @pages.post("/ui/executions/{execution_id}/fork")
    async def fork(request: Request) -> Response:
        def do(execution: str, fields: dict[str, str], who: str) -> str:
            start = _from_step(fields.get("from", ""))
            return str(levers.fork(execution, start)["executionId"])

        return await act(request, do)

    @pages.post("/ui/executions/{execution_id}/signal")
    async def send_signal(request: Request) -> Response:
        def do(execution: str, fields: dict[str, str], who: str) -> str:
            text = fields.get("payload", "").strip() or "null"
            try:
                payload = orjson.loads(text)
            except orjson.JSONDecodeError as exc:
                raise InvalidSignal(f"the payload is not JSON: {exc}") from None
            name = fields.get("name", "")
            levers.signal(execution, name, payload, by=who, via="ui")
            return execution

        return await act(request, do)

    return pages
