"""The explorer's pages: records, one execution, a diff of two, the store.

Each page reads through the library's own readers (``store.list`` through the
service's cursor pagination, ``store.load``, ``store.verify``, ``record_steps``,
``diff_records``, ``explain``, ``store.stats``) and renders a Jinja2 template
with autoescaping on, so whatever a payload holds is shown as text. The pages
only read: nothing here writes to the store.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from functools import wraps
from typing import TYPE_CHECKING, Final, NamedTuple

from fastapi import APIRouter, Request
from starlette.concurrency import run_in_threadpool
from starlette.responses import JSONResponse, RedirectResponse, Response

from ...cache.seams import CacheHitJournal
from ...errors import (
    Forbidden,
    InvalidExecutionId,
    RecordIntegrityError,
    RecordNotFound,
    RequestInvalid,
    StoreError,
    Unauthorized,
)
from ...http.problem import status_for
from ...integrations.mcp.view import is_session
from ...record.model import RecordStatus, VerifyReport
from ...record.signing import KeyRing, SignatureStatus
from ...steps.diff import diff_records
from ...steps.explain import explain
from ...store.durable import durable_links
from ...store.filters import ListFilters
from ..auth import Access
from ..pagination import Cursor, page
from .access import Gate, form, login_redirect, same_origin
from .jsondiff import entry_rows
from .operate import Operator, page_levers
from .overview import DAYS, ROWS, window
from .render import HEADERS, pretty_json, render, render_text
from .rows import load_rows, row_details
from .search import SCAN_LIMIT, scan, value_query
from .spans import drawn

if TYPE_CHECKING:
    from ...cache.prices import PriceTable
    from ...record.model import ExecutionRecord
    from ...store import ExecutionStore

__all__ = ["PAGE_SIZE", "ui_router"]

#: Records per page of the list.
PAGE_SIZE: Final = 50
_Page = Callable[..., Response]


def _shown(page_function: _Page) -> _Page:
    """Show a missing record, a bad filter or a refusal as a page, not as JSON.

    A browser without a key is sent to the login page.
    """

    @wraps(page_function)
    def guarded(request: Request, *args: object, **kwargs: object) -> Response:
        try:
            return page_function(request, *args, **kwargs)
        except Unauthorized:
            return login_redirect(request)
        except (StoreError, RequestInvalid, Forbidden) as exc:
            return _error(request, exc)

    return guarded


def _error(request: Request, exc: StoreError | RequestInvalid | Forbidden) -> Response:
    """The error page of a refusal, a store's error without its directory."""
    message = str(exc) if not isinstance(exc, StoreError) else _quiet(exc)
    return render(
        "error.html", request, status=status_for(exc), code=exc.code, message=message
    )


def _quiet(exc: StoreError) -> str:
    """The error's message without the store's directory (the service hides it)."""
    if isinstance(exc, RecordNotFound):
        return "no such record"
    if isinstance(exc, InvalidExecutionId):
        return "not a valid execution id"
    return exc.code.replace("_", " ")


def _when(text: str | None) -> datetime | None:
    """A ``datetime-local`` or ISO 8601 value, naive read as UTC; blank is None."""
    if not text:
        return None
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise RequestInvalid(f"{text!r} is not a date and time") from None
    return found if found.tzinfo else found.replace(tzinfo=UTC)


def _yes_no(replayable: str) -> bool | None:
    """The replayable filter: yes, no, or blank for either."""
    if replayable not in ("", "yes", "no"):
        raise RequestInvalid("replayable must be yes, no or blank")
    return None if not replayable else replayable == "yes"


class _Signature(NamedTuple):
    """What the record page says of a record's signatures."""

    #: ``unsigned``, ``unchecked`` (no trusted keys), or a SignatureStatus value
    state: str
    text: str
    detail: str
    tone: str  # the badge's class: ok, bad or muted


def _signature(report: VerifyReport, keys: KeyRing | None) -> _Signature:
    """The signature state of a verified (or failed) record, checked by ``keys``."""
    key_id = report.key_id
    if keys is None:
        if key_id is None:
            return _Signature("unsigned", "unsigned", "line 1 names no key", "muted")
        return _Signature(
            "unchecked",
            f"signed by key {key_id}, not checked",
            "no trusted keys were given: start the explorer with --key FILE or "
            "--keys DIR to check signatures",
            "muted",
        )
    check = keys.check_report(report)
    signers = ", ".join(check.key_ids) or key_id or ""
    text, tone = {
        SignatureStatus.SIGNED_VALID: (f"signed by key {signers}, verified", "ok"),
        SignatureStatus.SIGNED_INVALID: ("signature invalid", "bad"),
        SignatureStatus.UNKNOWN_KEY: (f"key unknown: {signers}", "bad"),
        SignatureStatus.UNSIGNED: ("unsigned", "muted" if check.accepted else "bad"),
    }[check.status]
    return _Signature(check.status.value, text, check.detail, tone)


def _exact_record(store: ExecutionStore, query: str) -> str | None:
    """The id a search names outright, so the page can open it directly."""
    try:
        return query if store.exists(query) else None
    except InvalidExecutionId:
        return None


def ui_router(
    store: ExecutionStore | None,
    gate: Gate,
    signature_keys: KeyRing | None = None,
    *,
    app_ref: str | None = None,
    prices: PriceTable | None = None,
    operator: Operator | None = None,
) -> APIRouter:
    """The explorer's routes, reading ``store``; ``gate`` guards each page.

    The other arguments are :func:`~intentusnet.server.ui.add_ui`'s. Added in 0.1.0.
    """
    authorize = gate.authorize
    pages = APIRouter(include_in_schema=False)

    def need_store() -> ExecutionStore:
        if store is None:
            raise RecordNotFound("this service records no executions (no store)")
        return store

    @pages.get("/ui")
    @pages.get("/ui/")
    @_shown
    def records(
        request: Request,
        intent: str = "",
        status: str = "",
        since: str = "",
        until: str = "",
        replayable: str = "",
        q: str = "",
        cursor: str = "",
    ) -> Response:
        authorize(request)
        where = need_store()
        query = q.strip()
        by_value = value_query(query)
        if by_value is None and query and (found := _exact_record(where, query)):
            return RedirectResponse(f"/ui/executions/{found}", status_code=303)
        hashed = by_value is None and query.lower().startswith("sha256:")
        after, before, which = _when(since), _when(until), _yes_no(replayable)
        try:
            selected = ListFilters(
                intent=intent or None,
                status=status or None,
                since=after,
                until=before,
                replayable=which,
                id_prefix=None if hashed or by_value or not query else query,
                envelope_hash=query.lower() if hashed else None,
                limit=PAGE_SIZE,
            )
        except ValueError as exc:
            raise RequestInvalid(str(exc)) from None
        at = Cursor.decode(cursor) if cursor else None
        searched = None
        loaded: Mapping[str, ExecutionRecord | None]
        if by_value is None:
            items, following = page(where, selected, at)
            loaded = load_rows(where, items)
        else:
            searched = scan(where, selected, at, by_value, PAGE_SIZE)
            items, following = searched.matches, searched.next_cursor
            loaded = searched.records
        filters = {
            "intent": intent,
            "status": status,
            "since": since,
            "until": until,
            "replayable": replayable,
            "q": q,
        }
        return render(
            "records.html",
            request,
            items=items,
            details=row_details(where, loaded, prices),
            priced=prices is not None,
            searched=searched,
            scan_limit=SCAN_LIMIT,
            filters=filters,
            statuses=sorted(s.value for s in RecordStatus),
            next_cursor=None if following is None else following.encode(),
            first_page=not cursor,
        )

    @pages.get("/ui/executions/{execution_id}")
    @_shown
    def execution(request: Request, execution_id: str) -> Response:
        authorize(request)
        where = need_store()
        report = where.verify(execution_id)
        signature = _signature(report, signature_keys)
        try:
            record = where.load(execution_id)
        except RecordIntegrityError:
            return render(
                "damaged.html", request, status=409, report=report, signature=signature
            )
        hits = []
        if isinstance(where, CacheHitJournal):
            hits = [
                hit
                for hit in where.cache_hits(intent=record.header.intent_name)
                if hit.source_execution_id == execution_id
            ][:100]
        why = explain(record, where)
        timeline, spans = drawn(where, record, prices)
        sections = {
            "Payload": pretty_json(record.envelope.get("payload")),
            "Envelope": pretty_json(record.envelope),
            "Response": pretty_json(record.final_response),
            "Header": pretty_json(record.header.to_json()),
        }
        application = app_ref or "MODULE:ATTR"
        durable = durable_links(where, record, application)
        return render(
            "execution.html",
            request,
            record=record,
            header=record.header,
            report=report,
            signature=signature,
            explanation=why if why.failed else None,
            durable=durable,
            levers=[]
            if is_session(record)
            else page_levers(record, durable, application),
            can_operate=operator is not None and gate.may_invalidate(request),
            sections=sections,
            hits=hits,
            can_invalidate=record.header.replayable and gate.may_invalidate(request),
            can_signal=record.header.status is RecordStatus.WAITING
            and operator is not None
            and gate.may_invalidate(request),
            mcp=is_session(record),
            app_ref=application,
            timeline=timeline,
            spans=spans,
        )

    @pages.get("/ui/executions/{execution_id}/live")
    def live(request: Request, execution_id: str) -> Response:
        """The timeline of a running execution, for the page to redraw in place."""
        try:
            authorize(request)
            record = need_store().load(execution_id)
        except (StoreError, RequestInvalid, Forbidden, Unauthorized) as exc:
            message = _quiet(exc) if isinstance(exc, StoreError) else str(exc)
            problem = {"code": exc.code, "message": message}
            return JSONResponse(problem, status_for(exc), HEADERS)
        timeline, spans = drawn(need_store(), record, prices)
        return JSONResponse(
            {
                "status": record.header.status.value,
                "running": record.header.status is RecordStatus.IN_PROGRESS,
                "lines": len(record.events) + 1,
                "timeline": render_text(
                    "timeline.html",
                    header=record.header,
                    timeline=timeline,
                    spans=spans,
                ),
            },
            headers=HEADERS,
        )

    if gate.invalidation:

        @pages.post("/ui/executions/{execution_id}/invalidate")
        async def invalidate(request: Request, execution_id: str) -> Response:
            try:
                same_origin(request)
                authorize(request, Access.ROUTE)
                if gate.key_access is None:
                    raise Forbidden("invalidating from a page needs an API key")
                reason = (await form(request)).get("reason", "").strip()
                if not reason:
                    raise RequestInvalid("say why the record is invalidated")
                where = need_store()
                await run_in_threadpool(where.invalidate, execution_id, reason)
            except Unauthorized:
                return login_redirect(request)
            except (StoreError, RequestInvalid, Forbidden) as exc:
                return _error(request, exc)
            return RedirectResponse(f"/ui/executions/{execution_id}", status_code=303)

    @pages.get("/ui/diff")
    @_shown
    def diff(request: Request, a: str = "", b: str = "") -> Response:
        authorize(request)
        where = need_store()
        picked = request.query_params.getlist("id")
        if not (a or b) and len(picked) == 2:
            a, b = picked
        if not (a and b):
            return render("diff.html", request, a=a, b=b, result=None)
        first, second = where.load(a), where.load(b)
        result = diff_records(first, second)
        # the deviation point first: where the runs part ways is what to read
        entries = sorted(result.entries, key=lambda e: not e.deviation_point)
        return render(
            "diff.html",
            request,
            a=a,
            b=b,
            first=first,
            second=second,
            result=result,
            compared=[(e, entry_rows(e)) for e in entries],
        )

    @pages.get("/ui/overview")
    @_shown
    def overview(request: Request) -> Response:
        authorize(request)
        where = need_store()
        stats = where.stats()
        figures = window(where, prices)
        return render(
            "overview.html",
            request,
            stats=stats,
            figures=figures,
            prices=prices,
            days=DAYS,
            rows=ROWS,
            busiest=max([1, *(d.executions + d.hits for d in figures.days)]),
            widest_status=max([1, *stats.by_status.values()]),
            widest_intent=max([1, *stats.by_intent.values()]),
        )

    return pages
