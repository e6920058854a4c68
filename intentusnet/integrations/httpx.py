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
are dropped from the recorded response headers.

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
from typing import TYPE_CHECKING, Final, NamedTuple
from urllib.parse import parse_qsl, urlencode

import httpx

from .._util.jsonvalue import JSONObject, parse_json
from ..cache.callrouter import AsyncJob, CallRouter, Job, JobResult
from ..cache.replay_cache import CacheKey, ReplayCache
from ..envelope import AgentResponse, CacheDirective, ErrorCode, ErrorInfo
from ..errors import CacheMiss

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
#: Query parameters that carry credentials: left out of the hash and the record.
DEFAULT_SECRET_PARAMS: Final = ("api_key", "apikey", "access_token")
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
        is_async: bool,
    ) -> None:
        self.mode = TransportMode.parse(mode)
        self.store = store
        self.secret = frozenset(name.lower() for name in secret_headers)
        hashed = tuple(dict.fromkeys(name.lower() for name in hash_headers))
        refused = [name for name in hashed if is_secret(name, self.secret)]
        if refused:
            raise ValueError(
                f"headers {', '.join(refused)} carry credentials and are never "
                "hashed; leave them out of hash_headers"
            )
        self.hash_headers = hashed
        self.hashed_names = frozenset(name.encode("latin-1") for name in hashed)
        self._urls: dict[tuple[str, bytes, int | None, bytes], str] = {}
        self._ready: dict[int, tuple[AgentResponse, _Ready]] = {}
        self.secret_params = frozenset(secret_params)
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
        )
        self.directive = (
            CacheDirective.BYPASS
            if self.mode is TransportMode.RECORD or not self.use_cache
            else CacheDirective.DEFAULT
        )

    # -- requests -------------------------------------------------------------------

    def payload(
        self, request: httpx.Request, body: bytes
    ) -> tuple[JSONObject, CacheKey]:
        """The envelope payload of a request (what makes it this request), its key."""
        hashed = self.hashed_names
        kept: dict[str, list[str]] = {}
        for raw_name, raw_value in request.headers.raw:
            name = raw_name.lower()
            if name in hashed:
                kept.setdefault(name.decode("latin-1"), []).append(
                    raw_value.decode("latin-1")
                )
        headers: JSONObject = {name: ", ".join(kept[name]) for name in sorted(kept)}
        payload: JSONObject = {
            "method": request.method,
            "url": self.url(request.url),
            "headers": headers,
        }
        if body:
            try:
                payload["json"] = parse_json(body)
                return payload, self.calls.key(payload, self.directive)
            except ValueError:  # not JSON, or not JSON every language reads alike
                payload.pop("json", None)
                payload["bodySha256"] = sha256(body).hexdigest()
                payload["bodySize"] = len(body)
        return payload, self.calls.key(payload, self.directive)

    def url(self, url: httpx.URL) -> str:
        """The URL without user info, fragment and secret query parameters."""
        memo = (url.scheme, url.raw_host, url.port, url.raw_path)
        known = self._urls.get(memo)
        if known is not None:
            return known
        host = url.raw_host.decode("ascii")
        if ":" in host:
            host = f"[{host}]"  # IPv6
        port = "" if url.port is None else f":{url.port}"
        path, _, query = url.raw_path.partition(b"?")
        text = f"{url.scheme}://{host}{port}{path.decode('ascii')}"
        if query:
            secret = self.secret_params
            params = sorted(
                (
                    (k, v)
                    for k, v in parse_qsl(query.decode("ascii"), keep_blank_values=True)
                    if k.lower() not in secret
                ),
                key=lambda item: item[0],
            )
            if params:
                text += "?" + urlencode(params)
        if len(self._urls) >= _URLS_KEPT:
            self._urls.clear()
        self._urls[memo] = text
        return text

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

    def recorded(self, response: httpx.Response, body: bytes) -> JobResult:
        """What is recorded of a response; an error status is an error answer."""
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
        status = response.status_code
        if status < 400:
            return {"response": data}
        # Not cached unless the policy serves errors: a 401 or a 429 is not
        # the answer to this request next time.
        return AgentResponse(
            status="error",
            error=ErrorInfo(
                code=ErrorCode.AGENT_ERROR,
                message=f"HTTP {status} {response.reason_phrase}".rstrip(),
                retryable=status == 429 or status >= 500,
                details={"response": data},
            ),
        )

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
        body = data.get("body") or ""
        content = (
            base64.b64decode(str(body))
            if data.get("bodyEncoding") == "base64"
            else str(body).encode("utf-8")
        )
        headers = [(str(k), str(v)) for k, v in data.get("headers") or []]
        streamed = _is_event_stream(headers)
        if not streamed:
            headers.append(("content-length", str(len(content))))
        return _Ready(
            status=int(data.get("status") or 200),
            headers=httpx.Headers(headers),
            content=content,
            chunks=_events(content) if streamed else (),
            extensions={
                "http_version": str(data.get("httpVersion") or "HTTP/1.1").encode(),
                "reason_phrase": str(data.get("reasonPhrase") or "").encode(),
            },
        )


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
            credential headers are refused here.
        secret_headers: more header names never hashed nor stored.
        secret_params: query parameters never hashed nor stored.

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
            is_async=False,
        )
        self.mode = self._core.mode
        self.cache = self._core.cache
        self._wrapped = wrapped if wrapped is not None else httpx.HTTPTransport()

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        """Answer a request from the records, or call and record it."""
        core = self._core
        payload, key = core.payload(request, request.read())
        if core.mode is TransportMode.REPLAY:
            return core.response(core.replay(key, request), request, ran=False)
        wrapped = self._wrapped
        ran = False

        def job() -> JobResult:
            nonlocal ran
            ran = True
            response = wrapped.handle_request(request)
            try:
                body = response.read()
            finally:
                response.close()
            return core.recorded(response, body)

        run: Job = job
        answer = core.cache.answer(key, lambda: core.calls.run(payload, run))
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
            is_async=True,
        )
        self.mode = self._core.mode
        self.cache = self._core.cache
        self._wrapped = wrapped if wrapped is not None else httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Answer a request from the records, or call and record it."""
        core = self._core
        payload, key = core.payload(request, await request.aread())
        if core.mode is TransportMode.REPLAY:
            return core.response(core.replay(key, request), request, ran=False)
        wrapped = self._wrapped
        ran = False

        async def job() -> JobResult:
            nonlocal ran
            ran = True
            response = await wrapped.handle_async_request(request)
            try:
                body = await response.aread()
            finally:
                await response.aclose()
            return core.recorded(response, body)

        run: AsyncJob = job
        answer = await core.cache.aanswer(key, lambda: core.calls.arun(payload, run))
        return core.response(answer, request, ran=ran)

    async def aclose(self) -> None:
        """Close the wrapped transport and the recording router."""
        await self._wrapped.aclose()
        self._core.calls.close()
