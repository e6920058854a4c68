"""Python clients of the HTTP service: ``IntentusClient`` and ``AsyncIntentusClient``.

Both speak to ``intentusnet serve`` over httpx and answer with the library's
own types: ``route`` returns an ``AgentResponse`` (agent faults are data, as
in-process), ``get_execution`` an ``ExecutionRecord``, ``replay`` a
``ReplayResult``. Errors are raised as the library's own exceptions —
``RecordNotFound``, ``ReplayNotAllowed``, ``ReplayHashMismatch``,
``EnvelopeValidationError`` ... — so code behaves the same in-process and over
HTTP. What only a service can refuse raises a ``ServiceError`` subclass
(``Unauthorized``, ``Forbidden``, ``RequestTooLarge``, ``ServiceUnavailable``).

``route(envelope, idempotency_key=KEY)`` sends the ``Idempotency-Key`` header:
the agent runs once per key. ``submit(envelope, idempotency_key=None)`` asks
for an asynchronous answer and returns a handle (:mod:`.submission`) whose
``result(timeout=)`` waits for it.

Example::

    with IntentusClient("http://127.0.0.1:8765", api_key=key) as client:
        answer = client.route({"intent": {"name": "echo"}, "payload": {"x": 1}})
        result = client.replay(answer.metadata.execution_id)
        later = client.submit(envelope, idempotency_key="order-7").result()
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping
from typing import TYPE_CHECKING, Generic, TypeVar

import httpx

from .._util.jsonvalue import JSONObject, JSONValue
from ..envelope import AgentResponse, IntentEnvelope
from ..store.filters import ListFilters
from . import wire as wire
from .submission import AsyncSubmission, Submission, accepted, intent_headers
from .wire import ExecutionPage

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord, RecordSummary, VerifyReport
    from ..replay import ReplayResult

__all__ = ["AsyncIntentusClient", "ExecutionPage", "IntentusClient"]

_Envelope = IntentEnvelope | Mapping[str, JSONValue]


def _headers(api_key: str | None, extra: Mapping[str, str] | None) -> dict[str, str]:
    headers = {"Accept": "application/json", **(extra or {})}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


_JSON = {"Content-Type": "application/json"}


_C = TypeVar("_C", httpx.Client, httpx.AsyncClient)


class _Requests(Generic[_C]):
    """What both clients send: the request of each call."""

    base_url: str
    _timeout: float
    _http: _C

    def _request(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        params: dict[str, str] | None = None,
        headers: dict[str, str] | None = None,
        waits: float = 0.0,
    ) -> httpx.Request:
        """The request to send.

        ``waits``: seconds the service may take beyond the client's timeout
        (a long poll).
        """
        return self._http.build_request(
            method,
            url,
            content=content,
            params=params,
            headers={**(_JSON if content is not None else {}), **(headers or {})},
            timeout=self._timeout + waits,
        )

    def _intent(
        self, envelope: _Envelope, idempotency_key: str | None, respond_async: bool
    ) -> httpx.Request:
        """A ``POST /v1/intents`` request."""
        body = wire.envelope_body(envelope)
        headers = intent_headers(idempotency_key, respond_async=respond_async)
        return self._request("POST", "/v1/intents", content=body, headers=headers)

    def _poll_request(self, execution_id: str, wait: float) -> httpx.Request:
        """The newest record of an execution, waiting up to ``wait`` s for its end."""
        path = wire.execution_path(execution_id)
        params = {"wait": f"{wait:.3f}"}
        return self._request("GET", path, params=params, waits=wait)


def _answered(response: httpx.Response) -> httpx.Response:
    """A success answer; else its error raised."""
    if not response.is_success:
        raise wire.error_from(response)
    return response


class IntentusClient(_Requests[httpx.Client]):
    """A blocking client of the IntentusNet HTTP service.

    Args:
        base_url: e.g. ``http://127.0.0.1:8765``.
        api_key: sent as a bearer token.
        timeout: seconds to wait for each answer.
        headers: sent with every request.
        transport: an httpx transport (e.g. ``httpx.MockTransport`` in tests).
        trust_env: let httpx read proxy settings from the environment.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
        trust_env: bool = True,
    ) -> None:
        self.base_url = base_url
        self._timeout = timeout
        self._http = httpx.Client(
            base_url=base_url,
            headers=_headers(api_key, headers),
            timeout=timeout,
            transport=transport,
            trust_env=trust_env,
        )

    def __enter__(self) -> IntentusClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def _send(self, request: httpx.Request) -> httpx.Response:
        """Send; return a success answer, else raise its error."""
        try:
            response = self._http.send(request)
        except httpx.HTTPError as exc:
            raise wire.transport_error(exc, self.base_url) from exc
        return _answered(response)

    def _call(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        params: dict[str, str] | None = None,
    ) -> JSONObject:
        request = self._request(method, url, content=content, params=params)
        return wire.json_object(self._send(request))

    def route(
        self, envelope: _Envelope, *, idempotency_key: str | None = None
    ) -> AgentResponse:
        """Route an intent; agent faults come back as data, as in-process.

        Args:
            envelope: the intent.
            idempotency_key: sent as ``Idempotency-Key``: the agent runs once
                per key; a repeated key gets that execution's answer (as
                ``route_intent(idempotency_key=)``). Added in 0.1.0.

        Raises:
            EnvelopeValidationError: the envelope is not valid (checked before
                sending, and by the service).
            InvalidIdempotencyKey: the key is malformed (checked before sending).
            IdempotencyConflict: the key was used with another envelope.
            IdempotencyTimeout: the key's execution still ran after the wait.
            ServiceError: the service refused the request or was unreachable.
        """
        response = self._send(self._intent(envelope, idempotency_key, False))
        return wire.agent_response(wire.json_object(response))

    def submit(
        self, envelope: _Envelope, idempotency_key: str | None = None
    ) -> Submission:
        """Submit an intent; return once it is recorded, before its agent ends.

        The service answers as soon as the execution's record is in its store
        (``Prefer: respond-async``): a worker killed after that does not lose
        it, recovery finishes it. ``result(timeout=)`` on the handle waits for
        the answer. Added in 0.1.0.

        Raises:
            As :meth:`route`.
        """
        response = self._send(self._intent(envelope, idempotency_key, True))
        data = wire.json_object(response)
        if response.status_code == 202:
            return Submission(accepted(data), self._poll)
        answer = wire.agent_response(data)
        return Submission(answer.metadata.execution_id, self._poll, answer)

    def _poll(self, execution_id: str, wait: float) -> JSONObject:
        return wire.json_object(self._send(self._poll_request(execution_id, wait)))

    def get_execution(self, execution_id: str) -> ExecutionRecord:
        """Load one record, verified by the service.

        Raises:
            RecordNotFound, InvalidExecutionId, RecordIntegrityError: as the store.
        """
        return wire.record(self._call("GET", wire.execution_path(execution_id)))

    def get_execution_by_key(self, key: str) -> ExecutionRecord:
        """The newest record of the execution sent with idempotency key ``key``.

        Resume links are followed, as ``get_execution`` follows them. Added in
        0.1.0.

        Raises:
            InvalidIdempotencyKey: the key is malformed (no request is sent).
            RecordNotFound: no execution has this key.
        """
        return wire.record(self._call("GET", wire.key_path(key)))

    def list_executions(
        self,
        filters: ListFilters = ListFilters(),
        *,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of record summaries, newest first.

        The filters are ``store.list()``'s, asked of the service's store;
        ``filters.limit`` is the page's size (at most 1000; the service's
        default 50 without one). ``cursor`` is a page's ``next_cursor``.

        Raises:
            RequestInvalid: a filter or cursor the service refuses, naming
                the parameter.
        """
        params = wire.list_params(filters, cursor)
        return wire.page(self._call("GET", "/v1/executions", params=params))

    def iter_executions(
        self, filters: ListFilters = ListFilters(limit=100)
    ) -> Iterator[RecordSummary]:
        """Every matching record summary, newest first, page after page.

        ``filters.limit`` is the size of each page (100 by default).
        """
        cursor: str | None = None
        while True:
            page = self.list_executions(filters, cursor=cursor)
            yield from page.items
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def replay(
        self,
        execution_id: str,
        envelope: _Envelope | None = None,
        force: bool = False,
    ) -> ReplayResult:
        """The recorded answer of an execution; no agent runs.

        Raises:
            ReplayNotAllowed: the record is not replayable and ``force`` is False.
            ReplayHashMismatch: ``envelope`` does not hash as the recorded one.
            RecordNotFound, InvalidExecutionId, RecordIntegrityError: as the store.
        """
        path = wire.execution_path(execution_id, "/replay")
        body = wire.replay_body(envelope, force)
        return wire.replay_result(self._call("POST", path, content=body))

    def verify(self, execution_id: str) -> VerifyReport:
        """Check a record's hash chain; ``valid`` says whether it holds."""
        path = wire.execution_path(execution_id, "/verify")
        return wire.verify_report(self._call("GET", path))

    def health(self) -> JSONObject:
        """The service's ``/healthz`` answer."""
        return self._call("GET", "/healthz")


class AsyncIntentusClient(_Requests[httpx.AsyncClient]):
    """The asyncio twin of :class:`IntentusClient`: same methods, awaited."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        timeout: float = 30.0,
        headers: Mapping[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        trust_env: bool = True,
    ) -> None:
        self.base_url = base_url
        self._timeout = timeout
        self._http = httpx.AsyncClient(
            base_url=base_url,
            headers=_headers(api_key, headers),
            timeout=timeout,
            transport=transport,
            trust_env=trust_env,
        )

    async def __aenter__(self) -> AsyncIntentusClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def _send(self, request: httpx.Request) -> httpx.Response:
        """Send (see ``IntentusClient._send``)."""
        try:
            response = await self._http.send(request)
        except httpx.HTTPError as exc:
            raise wire.transport_error(exc, self.base_url) from exc
        return _answered(response)

    async def _call(
        self,
        method: str,
        url: str,
        *,
        content: bytes | None = None,
        params: dict[str, str] | None = None,
    ) -> JSONObject:
        request = self._request(method, url, content=content, params=params)
        return wire.json_object(await self._send(request))

    async def route(
        self, envelope: _Envelope, *, idempotency_key: str | None = None
    ) -> AgentResponse:
        """Route an intent (see ``IntentusClient.route``)."""
        response = await self._send(self._intent(envelope, idempotency_key, False))
        return wire.agent_response(wire.json_object(response))

    async def submit(
        self, envelope: _Envelope, idempotency_key: str | None = None
    ) -> AsyncSubmission:
        """Submit an intent (see ``IntentusClient.submit``). Added in 0.1.0."""
        response = await self._send(self._intent(envelope, idempotency_key, True))
        data = wire.json_object(response)
        if response.status_code == 202:
            return AsyncSubmission(accepted(data), self._poll)
        answer = wire.agent_response(data)
        return AsyncSubmission(answer.metadata.execution_id, self._poll, answer)

    async def _poll(self, execution_id: str, wait: float) -> JSONObject:
        request = self._poll_request(execution_id, wait)
        return wire.json_object(await self._send(request))

    async def get_execution(self, execution_id: str) -> ExecutionRecord:
        """Load one record (see ``IntentusClient.get_execution``)."""
        return wire.record(await self._call("GET", wire.execution_path(execution_id)))

    async def get_execution_by_key(self, key: str) -> ExecutionRecord:
        """The key's execution (see ``IntentusClient.get_execution_by_key``)."""
        return wire.record(await self._call("GET", wire.key_path(key)))

    async def list_executions(
        self,
        filters: ListFilters = ListFilters(),
        *,
        cursor: str | None = None,
    ) -> ExecutionPage:
        """One page of record summaries (see ``IntentusClient.list_executions``)."""
        params = wire.list_params(filters, cursor)
        return wire.page(await self._call("GET", "/v1/executions", params=params))

    async def iter_executions(
        self, filters: ListFilters = ListFilters(limit=100)
    ) -> AsyncIterator[RecordSummary]:
        """Every matching record summary, newest first, page after page.

        ``filters.limit`` is the size of each page (100 by default).
        """
        cursor: str | None = None
        while True:
            page = await self.list_executions(filters, cursor=cursor)
            for item in page.items:
                yield item
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def replay(
        self,
        execution_id: str,
        envelope: _Envelope | None = None,
        force: bool = False,
    ) -> ReplayResult:
        """The recorded answer of an execution (see ``IntentusClient.replay``)."""
        path = wire.execution_path(execution_id, "/replay")
        body = wire.replay_body(envelope, force)
        return wire.replay_result(await self._call("POST", path, content=body))

    async def verify(self, execution_id: str) -> VerifyReport:
        """Check a record's hash chain (see ``IntentusClient.verify``)."""
        path = wire.execution_path(execution_id, "/verify")
        return wire.verify_report(await self._call("GET", path))

    async def health(self) -> JSONObject:
        """The service's ``/healthz`` answer."""
        return await self._call("GET", "/healthz")
