"""The router as an HTTP service: ``create_app(router)`` builds a FastAPI app.

Endpoints (all JSON, versioned under ``/v1``)::

    POST /v1/intents                         an envelope in, an AgentResponse out
                                             (Idempotency-Key; Prefer: respond-async)
    GET  /v1/executions                      record summaries, newest first, paged
    GET  /v1/executions/{id}                 one execution's newest record (?wait=)
    POST /v1/executions/{id}/replay          its recorded answer, no agent runs
    GET  /v1/executions/{id}/verify          its hash chain, checked
    POST /v1/executions/{id}/resume          resume it now (interrupted)
    POST /v1/executions/{id}/resolution      an operator's resolution (parked)
    POST /v1/executions/{id}/cancel          cancel it
    POST /v1/executions/{id}/fork            today's code from a step on
    GET  /v1/idempotency-keys/{key}          the execution a key names (?wait=)
    GET  /v1/savings                         LLM calls, tokens and cost caching saved
    GET  /healthz                            liveness, no key needed
    GET  /metrics                            Prometheus text
    GET  /docs                               interactive API docs (offline assets)
    GET  /ui                                 the record explorer (HTML pages)

Routing runs on the server's event loop (``router.route``); store reads run on
worker threads. An execution, once started, runs to its end even if its caller
goes away, and shutdown waits for every execution in flight, so no record is
left unfinished by a graceful stop. With ``recovery``, a thread of the service
finishes interrupted executions (``server/recovery.py``); asynchronous submit and
waiting for an answer are in ``server/executions.py``.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, TypeVar, cast

import orjson
from fastapi import APIRouter, FastAPI, Path, Query
from fastapi_offline import FastAPIOffline
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from .. import __version__
from .._util.ids import ID_PART_PATTERN
from .._util.jsonvalue import JSONObject, JSONValue
from ..envelope import AgentResponse, ErrorCode, IntentEnvelope
from ..errors import MalformedRequest
from ..hashing import HASH_PATTERN
from ..http.remote import aclose_pools
from ..http.submission import MAX_WAIT_S
from ..record.model import RecordStatus
from ..replay import ReplayEngine
from ..routing.durable import FINISHED
from ..store.durable import MAX_KEY_LENGTH
from ..store.filters import ListFilters
from .auth import Access, KeyRing
from .bodies import DEFAULT_MAX_BODY, read_json
from .executions import keyed_execution, location, newest_record, submit
from .headers import IDEMPOTENCY_KEY, idempotency_key, prefers_async
from .levers import Levers
from .metrics import CONTENT_TYPE
from .openapi import body, build_openapi, ok, problem, ref
from .pagination import MAX_LIMIT, Cursor, page
from .problems import install_handlers, invalid_request
from .schemas import ForkRequest, ReplayRequest, ResolutionRequest
from .service import Service
from .ui import Gate, Operator, add_ui

if TYPE_CHECKING:
    from ..cache.prices import PriceTable

    # intentusnet.KeyRing: public keys checking signatures (not API keys)
    from ..record.signing import KeyRing as SignatureKeys
    from ..routing.recovery import Recovery
    from ..routing.router import IntentRouter
    from ..store import ExecutionStore

__all__ = ["create_app"]

_Body = TypeVar("_Body", bound=BaseModel)
_ID = Annotated[str, Path(description="The execution id.", max_length=256)]
#: ``?wait=``: how long getExecution and getExecutionByKey may hold the answer.
_Wait = Annotated[
    float,
    Query(
        ge=0,
        le=MAX_WAIT_S,
        description="Seconds (at most 60) to wait for the execution to finish "
        "(completed, failed, needs_attention or cancelled) before answering.",
    ),
]


def _server_paths(store: ExecutionStore | None) -> list[str]:
    """The store's directory as its messages may spell it, longest first."""
    if store is None or store.directory is None:
        return []
    given = os.fspath(store.directory)
    spelled = {given, os.path.abspath(given), os.path.realpath(given)}
    # A bare relative name ("records") tells nothing and would match words.
    return sorted((p for p in spelled if os.sep in p), key=len, reverse=True)


def _json(
    data: JSONObject, status: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        orjson.dumps(data),
        status_code=status,
        media_type="application/json",
        headers=headers,
    )


def create_app(
    router: IntentRouter,
    *,
    store: ExecutionStore | None = None,
    keys: KeyRing | None = None,
    max_body_bytes: int = DEFAULT_MAX_BODY,
    drain_timeout: float = 30.0,
    close_router: bool = False,
    ui: bool = True,
    prices: PriceTable | None = None,
    signature_keys: SignatureKeys | None = None,
    recovery: Recovery | None = None,
    app_ref: str | None = None,
) -> FastAPI:
    """Build the HTTP service around ``router``.

    Args:
        router: routes the intents; its store is where executions are read.
        store: read executions here instead of ``router.store``.
        keys: the API keys accepted; none means loopback callers only.
        max_body_bytes: larger request bodies are refused with 413.
        drain_timeout: at shutdown, how long to wait for executions in flight.
        close_router: close the router when the app shuts down.
        ui: serve the record explorer under ``/ui`` (added in 0.1.0); its
            pages need a read key, as ``GET /v1/executions`` does (a browser
            signs in at ``/ui/login``); a key that may route may invalidate.
        prices: prices per million tokens by model, for the cost LLM calls
            spent and hits avoided in ``GET /v1/savings`` and ``/metrics``, and
            in the explorer (a record's calls, the list and the overview;
            added in 0.1.0).
        signature_keys: the trusted public keys (an ``intentusnet.KeyRing``)
            the explorer checks each record's
            signatures with (added in 0.1.0); without them a signed record's
            key is named, not checked.
        recovery: run while the app serves, on a thread, scanning every
            second: interrupted executions of the router are finished, and
            ``/metrics`` counts them (``intentusnet_executions_resumed_total``,
            ...). Several processes may each run one. Added in 0.1.0.
        app_ref: the ``MODULE:ATTR`` the router came from, which the
            explorer's commands name (``rerun --app``). Added in 0.1.0.
    """
    if max_body_bytes < 1:
        raise ValueError("max_body_bytes must be positive")
    service = Service(
        router,
        store if store is not None else router.store,
        keys or KeyRing(),
        max_body_bytes,
        prices,
        recovery,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if service.recovery is not None:
            service.recovery.start()
        yield
        await service.drain(drain_timeout)
        service.metrics.close()
        await aclose_pools()
        if close_router:
            router.close()
        close = getattr(service.store, "close", None)
        if callable(close):
            close()

    # Interactive API docs at /docs from assets fastapi-offline ships: no CDN.
    app = FastAPIOffline(
        title="IntentusNet",
        version=__version__,
        lifespan=lifespan,
        docs_url="/docs",
        redoc_url=None,
        static_url="/docs/static",
        redirect_slashes=False,
    )
    app.state.intentusnet = service
    install_handlers(app, service.metrics, hidden=_server_paths(service.store))
    app.openapi = lambda: build_openapi(app)  # type: ignore[method-assign]
    levers = Levers(router, service.store)
    _add_routes(app, service, levers)
    if ui:
        gate = Gate(
            service.authorize,
            service.keys.access_of if service.keys else None,
            invalidation=True,
        )
        operator = (
            Operator(levers, service.who, app_ref or "MODULE:ATTR")
            if levers.usable
            else None
        )
        add_ui(
            app,
            service.store,
            gate,
            signature_keys,
            app_ref=app_ref,
            prices=prices,
            operator=operator,
        )
    return app


def _add_routes(app: FastAPI, service: Service, levers: Levers) -> None:
    # Each endpoint checks the caller's key first, as the explorer's pages do:
    # the header is read once, by the KeyRing, and FastAPI solves no dependency
    # for it. The OpenAPI document names the scheme for every operation that
    # can answer 401.
    auth: dict[int | str, dict[str, Any]] = {
        401: problem("No API key, or an unknown one."),
        403: problem("Not allowed."),
    }

    async def _read(request: Request, model: type[_Body]) -> _Body:
        """The JSON body (``{}`` when empty) as ``model``, or a 422 problem."""
        body = await read_json(request, service.max_body_bytes)
        try:
            return model.model_validate({} if body is None else body)
        except ValidationError as exc:
            raise invalid_request(exc.errors(include_url=False), "body.") from None

    @app.post(
        "/v1/intents",
        tags=["intents"],
        summary="Route an intent",
        operation_id="routeIntent",
        responses={
            200: ok("AgentResponse", "The answer; agent faults are data here."),
            202: {
                "description": "Prefer: respond-async: recorded, running "
                "(Accepted); or the execution waits (a durable sleep, a signal): "
                "its AgentResponse, a WAITING error saying for what and until when.",
                "content": {
                    "application/json": {
                        "schema": {"oneOf": [ref("Accepted"), ref("AgentResponse")]}
                    }
                },
                "headers": {
                    "Location": {
                        "description": "/v1/executions/{id}",
                        "schema": {"type": "string"},
                    },
                    "Preference-Applied": {
                        "description": "respond-async",
                        "schema": {"type": "string"},
                    },
                },
            },
            400: problem("The body is not JSON, or Idempotency-Key is malformed."),
            **auth,
            409: problem("The key's execution still runs after the wait."),
            413: problem("The body is too large."),
            422: problem(
                "The envelope is not valid, or the key was used with another envelope."
            ),
            503: problem("The service is shutting down."),
        },
        openapi_extra={
            "parameters": [
                {
                    "name": IDEMPOTENCY_KEY,
                    "in": "header",
                    "required": False,
                    "description": "The request's idempotency key: a structured-"
                    'field string ("order-7") or a bare token, 1-255 printable '
                    "ASCII characters. The agent runs once per key.",
                    # the key and the structured-field string's two quotes
                    "schema": {"type": "string", "maxLength": MAX_KEY_LENGTH + 2},
                },
                {
                    "name": "Prefer",
                    "in": "header",
                    "required": False,
                    "description": "respond-async: answer 202 with Location as "
                    "soon as the execution is recorded.",
                    "schema": {"type": "string"},
                },
            ],
            "requestBody": body("IntentEnvelope"),
        },
    )
    async def route_intent(request: Request) -> Response:
        service.authorize(request, Access.ROUTE)
        key = idempotency_key(request)
        body = await read_json(request, service.max_body_bytes)
        if body is None:
            raise MalformedRequest("the request body is empty; send an IntentEnvelope")
        envelope = IntentEnvelope.model_validate(body)
        if not prefers_async(request) or service.store is None:
            # Without a store there is nothing to read later: answer now.
            return _answer(await service.route(envelope, key))
        answer = await submit(lambda opened: service.start(envelope, key, opened))
        if not isinstance(answer, str):
            return _answer(answer)  # it came first: respond-async not applied
        where = location(answer)
        return _json(
            {"executionId": answer, "location": where},
            202,
            {"Location": where, "Preference-Applied": "respond-async"},
        )

    def _answer(answer: AgentResponse) -> Response:
        """An answer; ``202`` with ``Location`` for an execution that waits."""
        error = answer.error
        if error is None or error.code is not ErrorCode.WAITING:
            return _json(answer.to_wire())
        where = location(answer.metadata.execution_id or "")
        return _json(answer.to_wire(), 202, {"Location": where})

    executions = APIRouter(tags=["executions"])

    @executions.get(
        "/v1/executions",
        summary="List execution records, newest first",
        operation_id="listExecutions",
        responses={
            200: ok("ExecutionPage", "One page of record summaries."),
            **auth,
            422: problem("A parameter is not valid."),
        },
    )
    async def list_executions(
        request: Request,
        intent: Annotated[str | None, Query(max_length=256)] = None,
        status: RecordStatus | None = None,
        since: Annotated[
            datetime | None, Query(description="Created at or after (ISO 8601).")
        ] = None,
        until: Annotated[
            datetime | None,
            Query(description="Created before (ISO 8601, exclusive)."),
        ] = None,
        replayable: Annotated[
            bool | None,
            Query(description="true: only replayable records; false: only the rest."),
        ] = None,
        id_prefix: Annotated[
            str | None,
            Query(
                pattern=f"^{ID_PART_PATTERN}$",
                description="The start of the execution id: 1-128 of A-Z a-z 0-9 _ . -",
            ),
        ] = None,
        envelope_hash: Annotated[
            str | None,
            Query(
                pattern=f"^{HASH_PATTERN}$",
                description="A whole envelope hash: sha256: and 64 lowercase "
                "hex digits.",
            ),
        ] = None,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
        cursor: Annotated[
            str | None, Query(max_length=1024, description="nextCursor of a page.")
        ] = None,
    ) -> Response:
        service.authorize(request, Access.READ)
        after = None if cursor is None else Cursor.decode(cursor)
        if service.store is None:
            return _json({"items": [], "nextCursor": None})
        store = service.store
        filters = ListFilters(
            intent=intent,
            status=status,
            since=since,
            until=until,
            replayable=replayable,
            id_prefix=id_prefix,
            envelope_hash=envelope_hash,
            limit=limit,
        )
        items, following = await run_in_threadpool(page, store, filters, after)
        return _json(
            {
                "items": [summary.to_json() for summary in items],
                "nextCursor": None if following is None else following.encode(),
            }
        )

    async def _newest(
        execution_id: str, *, follow: bool, wait: float, named: bool = True
    ) -> Response:
        """The newest record of an execution's resume chain, as the API answers it.

        ``Content-Location`` names the record shown when it is not the one the
        request named (``named``); ``Retry-After`` says the wait ran out.
        """
        record = await newest_record(
            service.router,
            service.require_store(),
            execution_id,
            follow=follow,
            wait=wait,
            stopping=lambda: service.draining,
        )
        headers = {}
        if not named or record.execution_id != execution_id:
            headers["Content-Location"] = location(record.execution_id)
        if wait and record.header.status not in FINISHED:
            headers["Retry-After"] = "1"
        return _json(record.to_json(), headers=headers)

    @executions.get(
        "/v1/executions/{execution_id}",
        summary="Show an execution: its newest record, optionally waiting for it",
        operation_id="getExecution",
        responses={
            200: ok(
                "ExecutionRecord",
                "The record, verified while loaded: header.status, and the "
                "answer in finalResponse once finished. Content-Location names "
                "the record when it is not the one asked for (a resume).",
            ),
            **auth,
            404: problem("No such record, or an invalid id."),
            409: problem("The record is damaged."),
            422: problem("A parameter is not valid."),
        },
    )
    async def get_execution(
        request: Request,
        execution_id: _ID,
        wait: _Wait = 0,
        follow: Annotated[
            bool,
            Query(
                description="Follow resume links to the newest record of the "
                "execution; false: exactly the record asked for."
            ),
        ] = True,
    ) -> Response:
        service.authorize(request, Access.READ)
        return await _newest(execution_id, follow=follow, wait=wait)

    @executions.get(
        "/v1/idempotency-keys/{key:path}",
        summary="Show the execution an idempotency key names: its newest record",
        operation_id="getExecutionByKey",
        responses={
            200: ok(
                "ExecutionRecord",
                "The newest record of the execution the key names, as "
                "getExecution answers (?wait= too); Content-Location names it.",
            ),
            **auth,
            400: problem("The key is not 1-255 printable ASCII characters."),
            404: problem("No execution has this key (or its record is gone)."),
            422: problem("A parameter is not valid."),
        },
    )
    async def get_execution_by_key(
        request: Request,
        key: Annotated[
            str,
            Path(
                description="The Idempotency-Key the execution was sent with, "
                "percent-encoded.",
                # checked by the service (400 invalid_idempotency_key), not here
                json_schema_extra={"maxLength": MAX_KEY_LENGTH},
            ),
        ],
        wait: _Wait = 0,
    ) -> Response:
        service.authorize(request, Access.READ)
        store = service.require_store()
        execution_id = await run_in_threadpool(keyed_execution, store, key)
        return await _newest(execution_id, follow=True, wait=wait, named=False)

    @executions.post(
        "/v1/executions/{execution_id}/replay",
        summary="Replay an execution: its recorded answer, without running agents",
        operation_id="replayExecution",
        responses={
            200: ok("ReplayResult", "The recorded answer."),
            400: problem("The body is not JSON."),
            **auth,
            404: problem("No such record, or an invalid id."),
            409: problem("The record is not replayable (use force) or is damaged."),
            413: problem("The body is too large."),
            422: problem("Invalid body, or the envelope does not hash as recorded."),
        },
        openapi_extra={"requestBody": body("ReplayRequest", required=False)},
    )
    async def replay_execution(request: Request, execution_id: _ID) -> Response:
        service.authorize(request, Access.READ)
        wanted = await _read(request, ReplayRequest)
        envelope = (
            None
            if wanted.envelope is None
            else IntentEnvelope.model_validate(wanted.envelope)
        )
        store = service.require_store()

        def replay() -> JSONObject:
            engine = ReplayEngine.from_store(store, execution_id)
            return engine.replay(env=envelope, force=wanted.force).to_json()

        result = await run_in_threadpool(replay)
        service.metrics.replayed()
        return _json(result)

    @executions.post(
        "/v1/executions/{execution_id}/resolution",
        summary="Resolve a parked execution's side effect in doubt",
        operation_id="resolveExecution",
        responses={
            200: ok("Decision", "Recorded; recovery (or resume) finishes it."),
            400: problem("The body is not JSON."),
            **auth,
            404: problem("No such record, or an invalid id."),
            409: problem(
                "Not parked on a side effect in doubt, another step, or another "
                "operator decided first (resolve_refused, with its reason)."
            ),
            413: problem("The body is too large."),
            422: problem("Invalid body: no step, happened not a boolean, ..."),
        },
        openapi_extra={"requestBody": body("ResolutionRequest")},
    )
    async def resolve_execution(request: Request, execution_id: _ID) -> Response:
        service.authorize(request, Access.ROUTE)
        wanted = await _read(request, ResolutionRequest)
        decided = await run_in_threadpool(
            levers.resolve,
            execution_id,
            step=wanted.step,
            happened=wanted.happened,
            output=cast(JSONValue, wanted.output),
            by=service.who(request),
            via="http",
        )
        return _json({"executionId": execution_id, "decision": decided})

    @executions.post(
        "/v1/executions/{execution_id}/cancel",
        summary="Cancel an execution: closed now, or stopped at its next step",
        operation_id="cancelExecution",
        responses={
            200: ok("Cancellation", "Recorded, or requested of its router."),
            **auth,
            404: problem("No such record, or an invalid id."),
            409: problem(
                "It finished, or another cancel came first (cancel_refused, "
                "with its reason)."
            ),
        },
    )
    async def cancel_execution(request: Request, execution_id: _ID) -> Response:
        service.authorize(request, Access.ROUTE)
        record, closed = await run_in_threadpool(
            levers.cancel, execution_id, by=service.who(request), via="http"
        )
        return _json({"executionId": execution_id, "record": record, "closed": closed})

    @executions.post(
        "/v1/executions/{execution_id}/fork",
        summary="Fork an execution: today's code from a step on, as a new execution",
        operation_id="forkExecution",
        responses={
            200: ok("Fork", "The fork ran; its record, and how it answered."),
            400: problem("The body is not JSON."),
            **auth,
            404: problem("No such record, or an invalid id."),
            409: problem(
                "A step before the one named cannot be served (cassette_miss, "
                "side_effect_mismatch), or the chain is broken (resume_refused)."
            ),
            413: problem("The body is too large."),
            422: problem(
                "Invalid body, or no such step (invalid_rerun_option): nothing "
                "was written."
            ),
        },
        openapi_extra={"requestBody": body("ForkRequest")},
    )
    async def fork_execution(request: Request, execution_id: _ID) -> Response:
        service.authorize(request, Access.ROUTE)
        wanted = await _read(request, ForkRequest)
        answer = await run_in_threadpool(levers.fork, execution_id, wanted.from_step)
        return _json(answer, headers={"Location": location(str(answer["executionId"]))})

    @executions.post(
        "/v1/executions/{execution_id}/resume",
        summary="Resume an interrupted execution now, in this service",
        operation_id="resumeExecution",
        responses={
            200: ok("AgentResponse", "The resumed execution's answer."),
            **auth,
            404: problem("No such record, or an invalid id."),
            409: problem(
                "Not interrupted: finished, parked, or a live process runs it "
                "(resume_refused, with its reason)."
            ),
        },
    )
    async def resume_execution(request: Request, execution_id: _ID) -> Response:
        service.authorize(request, Access.ROUTE)
        answer = await run_in_threadpool(levers.resume, execution_id)
        return _json(answer.to_wire())

    @executions.post(
        "/v1/executions/{execution_id}/signals/{name}",
        summary="Send a signal (a JSON body) to an execution that waits for it",
        operation_id="signalExecution",
        responses={
            200: ok("SignalSent", "Kept for the execution; a wait takes it."),
            **auth,
            400: problem("The body is not JSON (malformed_request)."),
            404: problem("No such record, or an invalid id."),
            409: problem(
                "It finished, or keeps the most signals it may (signal_refused, "
                "with its reason)."
            ),
            413: problem("The body is over the service's body limit."),
            422: problem("A blank name, or a payload over 64 KiB (invalid_signal)."),
        },
    )
    async def signal_execution(
        request: Request,
        execution_id: _ID,
        name: Annotated[str, Path(max_length=200)],
    ) -> Response:
        service.authorize(request, Access.ROUTE)
        payload = await read_json(request, service.max_body_bytes)
        sent = await run_in_threadpool(
            levers.signal,
            execution_id,
            name,
            payload,
            by=service.who(request),
            via="http",
        )
        return _json({"executionId": execution_id, "name": name, "signal": sent})

    @executions.get(
        "/v1/executions/{execution_id}/verify",
        summary="Verify the hash chain of an execution record",
        operation_id="verifyExecution",
        responses={
            200: ok("VerifyReport", "The report; `valid` says whether it holds."),
            **auth,
            404: problem("No such record, or an invalid id."),
            409: problem("The record cannot be read at all."),
        },
    )
    async def verify_execution(request: Request, execution_id: _ID) -> Response:
        service.authorize(request, Access.READ)
        store = service.require_store()
        report = await run_in_threadpool(store.verify, execution_id)
        return _json(report.to_json())

    app.include_router(executions)

    @app.get(
        "/healthz",
        tags=["service"],
        summary="Liveness: 200 while the service takes work",
        operation_id="health",
        responses={
            200: ok("Health", "Taking work."),
            503: ok("Health", "Shutting down."),
        },
    )
    async def health() -> Response:
        state = "draining" if service.draining else "ok"
        return _json(
            {"status": state, "version": __version__}, 503 if service.draining else 200
        )

    @app.get(
        "/metrics",
        tags=["service"],
        summary="Metrics in the Prometheus text format",
        operation_id="metrics",
        responses={
            200: {
                "description": "Prometheus text exposition format 0.0.4.",
                "content": {"text/plain": {"schema": {"type": "string"}}},
            },
            **auth,
        },
    )
    async def metrics(request: Request) -> Response:
        service.authorize(request, Access.READ)
        # Off the event loop: what caching saved is read from the store.
        text = await run_in_threadpool(service.metrics.render)
        return Response(text, media_type=CONTENT_TYPE)

    @app.get(
        "/v1/savings",
        tags=["service"],
        summary="What caching saved: LLM calls, tokens and cost, by model",
        operation_id="savings",
        responses={
            200: ok("Savings", "Calls, tokens spent and avoided, costs."),
            **auth,
            404: problem("This service records no executions."),
        },
    )
    async def savings(request: Request) -> Response:
        service.authorize(request, Access.READ)
        report = await run_in_threadpool(service.savings)
        return _json(report.to_json())
