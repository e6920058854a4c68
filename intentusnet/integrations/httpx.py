"""httpx transports that record HTTP calls and answer repeats from the records.

::

    store = FileExecutionStore()
    client = httpx.Client(transport=RecordingTransport(store, mode="cache"))

Every request becomes an ``http.request`` envelope whose payload is the method,
the URL (query parameters sorted, secret ones and any user info left out), an
allow-list of headers, and the body: its JSON value when it is JSON (so its
hash is that of its canonical form) or else the SHA-256 and size of its bytes.
Credentials (``Authorization``, ``Cookie``, API-key headers and any header you
name) are never hashed and never stored: they are not in the envelope, and they
are dropped from the recorded response headers. Credential query parameters are
left out of the URL, and the values of both are replaced by markers wherever
they appear in what is recorded (an error message quoting the URL, say). A
``Redactor`` adds JSON body paths and header names, applied before the request
is hashed and before the response is recorded; the client still gets the
response as it came.

Modes (:class:`TransportMode`): ``record`` always makes the call and records it
(its answer becomes the cached one); ``replay`` never makes a call and raises
``CacheMiss`` naming the request when no record answers it; ``cache`` answers
from a record when there is one and otherwise calls and records.

A response is recorded whole (a streamed one is read to its end first) and
replayed as a stream: a ``text/event-stream`` body event by event.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Collection, Iterator
from enum import StrEnum
from hashlib import sha256
from typing import TYPE_CHECKING, Final, NamedTuple, cast
from urllib.parse import parse_qsl, unquote_plus, urlencode

import httpx
import orjson

from .._util.jsonvalue import JSONObject, JSONValue, parse_json
from ..cache.callrouter import AsyncJob, CallRouter, Job, JobResult
from ..cache.replay_cache import CacheKey, ReplayCache
from ..envelope import AgentResponse, CacheDirective, ErrorCode, ErrorInfo
from ..errors import CacheMiss
from ..routing.redact import Redactor, header_names, keyed, redact_body

if TYPE_CHECKING:
    from ..store import ExecutionStore

__all__ = [
    "DEFAULT_HASH_HEADERS",
    "DEFAULT_SECRET_PARAMS",
    "AsyncRecordingTransport",
    "RecordingTransport",
    "TransportMode",
]

#: Request headers that are part of a request's meaning, and so of its hash.
DEFAULT_HASH_HEADERS: Final = (
    "accept",
    "content-type",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
)
#: Query parameters that carry credentials (any case): left out of the hash and
#: the record, and their values replaced wherever they appear in the record.
DEFAULT_SECRET_PARAMS: Final = (
    "api_key",
    "apikey",
    "api-key",
    "key",
    "sig",
    "signature",
    "x-amz-signature",
    "x-amz-credential",
    "x-amz-security-token",
    "client_secret",
    "password",
    "token",
    "access_token",
    "refresh_token",
    "code",
)
_SECRET_NAMES: Final = frozenset(
    {"authorization", "proxy-authorization", "cookie", "set-cookie", "api-key"}
)
_SECRET_PARTS: Final = ("api-key", "api_key", "apikey", "secret", "auth", "password")
#: Response headers that describe the bytes on the wire, not the body recorded
#: (which is decoded), so they are not replayed.
_WIRE_HEADERS: Final = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection"}
)
_INTENT: Final = "http.request"
#: Canonical URLs and prepared responses are remembered up to this many.
_URLS_KEPT: Final = 1024
_READY_KEPT: Final = 1024


class TransportMode(StrEnum):
    """What a recording transport does with a request (added in 0.1.0)."""

    RECORD = "record"
    REPLAY = "replay"
    CACHE = "cache"

    @classmethod
    def parse(cls, value: object) -> TransportMode:
        """Return the mode named by ``value``.

        Raises:
            ValueError: not a mode; the message lists the valid ones.
        """
        for mode in cls:
            if value == mode.value:
                return mode
        valid = ", ".join(repr(mode.value) for mode in cls)
        raise ValueError(f"unknown transport mode {value!r}; use one of {valid}")


def is_secret(name: str, named: Collection[str] = ()) -> bool:
    """Whether a header carries a credential (it is never hashed nor stored)."""
    lowered = name.lower()
    return (
        lowered in _SECRET_NAMES
        or lowered in named
        or lowered.endswith("token")
        or any(part in lowered for part in _SECRET_PARTS)
    )


class _Core:
    """What both transports share: envelopes, records and responses."""

    def __init__(
        self,
        store: ExecutionStore,
        mode: TransportMode | str,
        cache: ReplayCache | None,
        *,
        intent: str,
        tenant: str | None,
        hash_headers: Collection[str],
        secret_headers: Collection[str],
        secret_params: Collection[str],
        redactor: Redactor | None,
        is_async: bool,
    ) -> None:
        self.mode = TransportMode.parse(mode)
        self.store = store
        self.secret = frozenset(name.lower() for name in secret_headers)
        self.redactor = redactor
        #: headers recorded (and, when hashed, hashed) as their markers
        self.marked = frozenset() if redactor is None else header_names(redactor)
        hashed = tuple(dict.fromkeys(name.lower() for name in hash_headers))
        refused = [
            name
            for name in hashed
            if is_secret(name, self.secret) and name not in self.marked
        ]
        if refused:
            raise ValueError(
                f"headers {', '.join(refused)} carry credentials and are never "
                "hashed; leave them out of hash_headers (or name them in the "
                "Redactor's http_headers to hash their markers)"
            )
        self.hash_headers = hashed
        self.hashed_names = frozenset(name.encode("latin-1") for name in hashed)
        self._urls: dict[
            tuple[str, bytes, int | None, bytes], tuple[str, tuple[str, ...]]
        ] = {}
        self._ready: dict[int, tuple[AgentResponse, _Ready]] = {}
        self.secret_params = frozenset(name.lower() for name in secret_params)
        self.cache = cache if cache is not None else ReplayCache(store=store)
        self.cache.bind(store)
        self.use_cache = self.cache.policy.allows(intent)
        self.calls = CallRouter(
            store,
            intent=intent,
            version="1.0",
            tenant=tenant,
            agent="httpx",
            is_async=is_async,
            # Same key as the user's (a random one without): the router's
            # markers of the request's keys in error texts match the user's.
            redactor=keyed(redactor),
        )
        self.directive = (
            CacheDirective.BYPASS
            if self.mode is TransportMode.RECORD or not self.use_cache
            else CacheDirective.DEFAULT
        )

    # -- requests -------------------------------------------------------------------

    def payload(
        self, request: httpx.Request, body: bytes
    ) -> tuple[JSONObject, CacheKey, list[str]]:
        """The envelope payload of a request, its key, and the values redacted.

        The payload is what makes the request this request: method, URL,
        hashed headers (named ones as markers) and the body (redacted).
        """
        hashed, marked, redactor = self.hashed_names, self.marked, self.redactor
        kept: dict[str, list[str]] = {}
        for raw_name, raw_value in request.headers.raw:
            name = raw_name.lower()
            if name in hashed:
                text = name.decode("latin-1")
                value = raw_value.decode("latin-1")
                if redactor is not None and text in marked:
                    value = redactor.marker(value)
                kept.setdefault(text, []).append(value)
        headers: JSONObject = {name: ", ".join(kept[name]) for name in sorted(kept)}
        url = self.url(request.url)
        payload: JSONObject = {"method": request.method, "url": url, "headers": headers}
        found: dict[str, str] = {}
        if body:
            try:
                payload["json"] = self._body(parse_json(body), found)
                return payload, self.calls.key(payload, self.directive), list(found)
            except ValueError:  # not JSON, or not JSON every language reads alike
                payload.pop("json", None)
                payload["bodySha256"] = sha256(body).hexdigest()
                payload["bodySize"] = len(body)
        return payload, self.calls.key(payload, self.directive), list(found)

    def _body(self, body: JSONValue, found: dict[str, str]) -> JSONValue:
        """A request body with the redactor's body paths applied."""
        if self.redactor is None:
            return body
        return redact_body(self.redactor, body, "http.request", found)

    def secrets(self, request: httpx.Request, redacted: list[str]) -> list[str]:
        """The secrets of a request that is being made (not needed for a hit).

        Credential and named headers' values, credential parameters, the URL's
        password and the values redacted from the body: they are replaced by
        markers wherever they show up in the record (an error text, say).
        """
        found = list(redacted)
        marked = self.marked
        for raw_name, raw_value in request.headers.raw:
            name = raw_name.decode("latin-1").lower()
            if name in marked or is_secret(name, self.secret):
                found.extend(_credential_parts(raw_value.decode("latin-1")))
        found.extend(self.url_and_secrets(request.url)[1])
        return found

    def url(self, url: httpx.URL) -> str:
        """The URL without user info, fragment and secret query parameters."""
        return self.url_and_secrets(url)[0]

    def url_and_secrets(self, url: httpx.URL) -> tuple[str, tuple[str, ...]]:
        """The URL as recorded, and the secrets left out of it."""
        memo = (url.scheme, url.raw_host, url.port, url.raw_path)
        known = self._urls.get(memo)
        if known is None:
            known = self._url(url)
            if len(self._urls) >= _URLS_KEPT:
                self._urls.clear()
            self._urls[memo] = known
        if url.password:  # not in the memo's key: looked at every time
            return known[0], (*known[1], url.password)
        return known

    def _url(self, url: httpx.URL) -> tuple[str, tuple[str, ...]]:
        host = url.raw_host.decode("ascii")
        if ":" in host:
            host = f"[{host}]"  # IPv6
        port = "" if url.port is None else f":{url.port}"
        path, _, query = url.raw_path.partition(b"?")
        text = f"{url.scheme}://{host}{port}{path.decode('ascii')}"
        left_out: list[str] = []
        if query:
            secret = self.secret_params
            params: list[tuple[str, str]] = []
            for k, v in parse_qsl(query.decode("ascii"), keep_blank_values=True):
                if k.lower() in secret:
                    left_out.append(v)
                else:
                    params.append((k, v))
            params.sort(key=lambda item: item[0])
            if params:
                text += "?" + urlencode(params)
            # As written in the URL too: an error message may quote it raw.
            left_out.extend(
                part.partition(b"=")[2].decode("ascii")
                for part in query.split(b"&")
                if unquote_plus(part.partition(b"=")[0].decode("ascii")).lower()
                in secret
            )
        return text, tuple(dict.fromkeys(v for v in left_out if v))

    def describe(self, request: httpx.Request) -> str:
        """The request for people: method and URL (secrets left out)."""
        return f"{request.method} {self.url(request.url)}"

    def replay(self, key: CacheKey, request: httpx.Request) -> AgentResponse:
        """The recorded answer to a request, or ``CacheMiss``."""
        found = self.cache.find(key, serve_errors=True)
        if found is None:
            raise CacheMiss(
                self.describe(request), key.envelope_hash, str(self.store.root)
            )
        return found

    # -- responses -----------------------------------------------------------------

    def recorded(
        self, response: httpx.Response, body: bytes
    ) -> tuple[JSONObject, JobResult]:
        """A response as the client gets it, and as it is recorded.

        Recorded, named headers are markers and the body has the redactor's
        paths applied; an error status is an error answer.
        """
        try:
            text: str | None = body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        data: JSONObject = {
            "status": response.status_code,
            "reasonPhrase": response.reason_phrase,
            "httpVersion": response.http_version,
            "headers": [
                [name, value]
                for name, value in response.headers.multi_items()
                if name not in _WIRE_HEADERS and not is_secret(name, self.secret)
            ],
            "body": text if text is not None else base64.b64encode(body).decode(),
            "bodyEncoding": "utf-8" if text is not None else "base64",
        }
        shown = data if self.redactor is None else self._redacted(data, text)
        status = response.status_code
        if status < 400:
            return data, {"response": shown}
        # Not cached unless the policy serves errors: a 401 or a 429 is not
        # the answer to this request next time.
        return data, AgentResponse(
            status="error",
            error=ErrorInfo(
                code=ErrorCode.AGENT_ERROR,
                message=f"HTTP {status} {response.reason_phrase}".rstrip(),
                retryable=status == 429 or status >= 500,
                details={"response": shown},
            ),
        )

    def _redacted(self, data: JSONObject, text: str | None) -> JSONObject:
        """Recorded data of a response: named headers as markers, body redacted."""
        redactor = self.redactor
        assert redactor is not None
        marked = self.marked
        headers = data["headers"]
        assert isinstance(headers, list)
        shown = dict(data)
        shown["headers"] = [
            [name, redactor.marker(value) if name in marked else value]
            for name, value in (pair for pair in headers if isinstance(pair, list))
        ]
        if text is not None:
            try:
                parsed: JSONValue = orjson.loads(text)
            except orjson.JSONDecodeError:
                return shown  # not JSON: there are no paths into it
            redacted = redact_body(redactor, parsed, "http.response", {})
            if redacted is not parsed:
                shown["body"] = orjson.dumps(redacted).decode()
        return shown

    def response(
        self, answer: AgentResponse, request: httpx.Request, *, ran: bool
    ) -> httpx.Response:
        """Turn an answer (fresh or replayed) back into an httpx response.

        ``ran``: this request's own call was made (its exception is raised
        again, where the call failed without a response).
        """
        # A hit returns the same answer object each time: prepare it once.
        found = self._ready.get(id(answer))
        if found is None or found[0] is not answer:
            ready = self._prepare(answer, ran)
            if len(self._ready) >= _READY_KEPT:
                self._ready.clear()
            self._ready[id(answer)] = (answer, ready)
        else:
            ready = found[1]
        return _response(ready, request)

    def live(self, data: JSONObject, request: httpx.Request) -> httpx.Response:
        """The response a fresh call returned, as the client gets it (unredacted)."""
        return _response(_ready(data), request)

    def _prepare(self, answer: AgentResponse, ran: bool) -> _Ready:
        data: object = None
        if answer.payload is not None:
            data = answer.payload.get("response")
        elif answer.error is not None:
            data = answer.error.details.get("response")
        if not isinstance(data, dict):
            # Replay-only mode serves recorded failures, as a cache serving errors does.
            served = self.mode is TransportMode.REPLAY or self.cache.policy.serve_errors
            raise self.calls.failure(answer, ran=ran, from_records=served)
        return _ready(data)


def _ready(data: JSONObject) -> _Ready:
    """What a recorded response becomes, once, before being served."""
    body = data.get("body") or ""
    content = (
        base64.b64decode(str(body))
        if data.get("bodyEncoding") == "base64"
        else str(body).encode("utf-8")
    )
    pairs = cast("list[list[str]]", data.get("headers") or [])
    headers = [(str(k), str(v)) for k, v in pairs]
    streamed = _is_event_stream(headers)
    if not streamed:
        headers.append(("content-length", str(len(content))))
    return _Ready(
        status=int(cast("int", data.get("status") or 200)),
        headers=httpx.Headers(headers),
        content=content,
        chunks=_events(content) if streamed else (),
        extensions={
            "http_version": str(data.get("httpVersion") or "HTTP/1.1").encode(),
            "reason_phrase": str(data.get("reasonPhrase") or "").encode(),
        },
    )


def _response(ready: _Ready, request: httpx.Request) -> httpx.Response:
    stream = (
        _Replayed(ready.chunks) if ready.chunks else httpx.ByteStream(ready.content)
    )
    return httpx.Response(
        ready.status,
        headers=ready.headers,
        stream=stream,
        request=request,
        extensions=ready.extensions,
    )


def _credential_parts(value: str) -> list[str]:
    """A credential header's value, and the parts an error text may quote alone.

    ``Bearer sk-...`` gives its token too; a cookie header each cookie's value.
    """
    parts = [value]
    scheme, _, token = value.partition(" ")
    if token and scheme.isalpha():
        parts.append(token.strip())
    for cookie in value.split(";"):
        parts.append(cookie.partition("=")[2].strip())
    return [part for part in parts if part]


class _Ready(NamedTuple):
    """What a recorded response becomes, once, before being served."""

    status: int
    headers: httpx.Headers
    content: bytes
    chunks: tuple[bytes, ...]
    extensions: dict[str, bytes]


def _events(content: bytes) -> tuple[bytes, ...]:
    """Split a server-sent event stream after each event (a blank line)."""
    chunks: list[bytes] = []
    start = 0
    while (end := content.find(b"\n\n", start)) >= 0:
        chunks.append(content[start : end + 2])
        start = end + 2
    if start < len(content):
        chunks.append(content[start:])
    return tuple(chunks)


def _is_event_stream(headers: list[tuple[str, str]]) -> bool:
    return any(
        k.lower() == "content-type" and v.startswith("text/event-stream")
        for k, v in headers
    )


class _Replayed(httpx.SyncByteStream, httpx.AsyncByteStream):
    """A recorded body replayed as a stream of chunks."""

    def __init__(self, chunks: tuple[bytes, ...]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class RecordingTransport(httpx.BaseTransport):
    """An httpx transport that records calls and answers repeats from records.

    Args:
        store: where calls are recorded.
        mode: ``"record"``, ``"replay"`` or ``"cache"`` (see
            :class:`TransportMode`).
        wrapped: the transport that makes real calls;
            ``httpx.HTTPTransport()`` by default.
        cache: the ``ReplayCache`` to use (bound to ``store``); a new one by
            default. Its policy applies (errors, intents, max age).
        intent: the intent calls are recorded under.
        tenant: recorded and hashed with every call.
        hash_headers: request headers hashed and recorded (lower case);
            credential headers are refused here unless the redactor names
            them (then their markers are hashed).
        secret_headers: more header names never hashed nor stored.
        secret_params: query parameters (any case) never hashed nor stored;
            :data:`DEFAULT_SECRET_PARAMS` by default.
        redactor: JSON body paths and header names recorded as markers,
            applied before the request is hashed and before the response is
            recorded (docs/redaction.md). Added in 0.1.0.

    Raises:
        ValueError: an unknown mode, or a credential header in ``hash_headers``.

    Added in 0.1.0.
    """

    def __init__(
        self,
        store: ExecutionStore,
        mode: TransportMode | str = TransportMode.CACHE,
        wrapped: httpx.BaseTransport | None = None,
        *,
        cache: ReplayCache | None = None,
        intent: str = _INTENT,
        tenant: str | None = None,
        hash_headers: Collection[str] = DEFAULT_HASH_HEADERS,
        secret_headers: Collection[str] = (),
        secret_params: Collection[str] = DEFAULT_SECRET_PARAMS,
        redactor: Redactor | None = None,
    ) -> None:
        self._core = _Core(
            store,
            mode,
            cache,
            intent=intent,
            tenant=tenant,
            hash_headers=hash_headers,
            secret_headers=secret_headers,
            secret_params=secret_params,
            redactor=redactor,
            is_async=False,
        )
        self.mode = self._core.mode
        self.cache = self._core.cache
        self._wrapped = wrapped if wrapped is not None else httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Answer a request from the records, or call and record it."""
        core = self._core
        payload, key, redacted = core.payload(request, request.read())
        if core.mode is TransportMode.REPLAY:
            return core.response(core.replay(key, request), request, ran=False)
        wrapped = self._wrapped
        live: list[JSONObject] = []  # the response as it came, when we called
        ran = False

        def job() -> JobResult:
            nonlocal ran
            ran = True
            response = wrapped.handle_request(request)
            try:
                body = response.read()
            finally:
                response.close()
            data, recorded = core.recorded(response, body)
            live.append(data)
            return recorded

        run: Job = job
        answer = core.cache.answer(
            key, lambda: core.calls.run(payload, run, core.secrets(request, redacted))
        )
        if live:
            return core.live(live[0], request)
        return core.response(answer, request, ran=ran)

    def close(self) -> None:
        """Close the wrapped transport and the recording router."""
        self._wrapped.close()
        self._core.calls.close()


class AsyncRecordingTransport(httpx.AsyncBaseTransport):
    """The async twin of :class:`RecordingTransport`, for ``httpx.AsyncClient``.

    Takes the same arguments; ``wrapped`` is an async transport
    (``httpx.AsyncHTTPTransport()`` by default). Added in 0.1.0.
    """

    def __init__(
        self,
        store: ExecutionStore,
        mode: TransportMode | str = TransportMode.CACHE,
        wrapped: httpx.AsyncBaseTransport | None = None,
        *,
        cache: ReplayCache | None = None,
        intent: str = _INTENT,
        tenant: str | None = None,
        hash_headers: Collection[str] = DEFAULT_HASH_HEADERS,
        secret_headers: Collection[str] = (),
        secret_params: Collection[str] = DEFAULT_SECRET_PARAMS,
        redactor: Redactor | None = None,
    ) -> None:
        self._core = _Core(
            store,
            mode,
            cache,
            intent=intent,
            tenant=tenant,
            hash_headers=hash_headers,
            secret_headers=secret_headers,
            secret_params=secret_params,
            redactor=redactor,
            is_async=True,
        )
        self.mode = self._core.mode
        self.cache = self._core.cache
        self._wrapped = wrapped if wrapped is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Answer a request from the records, or call and record it."""
        core = self._core
        payload, key, redacted = core.payload(request, await request.aread())
        if core.mode is TransportMode.REPLAY:
            return core.response(core.replay(key, request), request, ran=False)
        wrapped = self._wrapped
        live: list[JSONObject] = []
        ran = False

        async def job() -> JobResult:
            nonlocal ran
            ran = True
            response = await wrapped.handle_async_request(request)
            try:
                body = await response.aread()
            finally:
                await response.aclose()
            data, recorded = core.recorded(response, body)
            live.append(data)
            return recorded

        run: AsyncJob = job
        answer = await core.cache.aanswer(
            key, lambda: core.calls.arun(payload, run, core.secrets(request, redacted))
        )
        if live:
            return core.live(live[0], request)
        return core.response(answer, request, ran=ran)

    async def aclose(self) -> None:
        """Close the wrapped transport and the recording router."""
        await self._wrapped.aclose()
        self._core.calls.close()
