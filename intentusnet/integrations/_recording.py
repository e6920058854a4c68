"""The recording core every HTTP transport shares (httpx and httpx2).

A transport hands :class:`RecordingCore` the request and a function that makes
the call; the core builds the request's envelope, answers it from the records
or makes the call through a ``CallRouter`` and records it, and gives back a
:class:`Ready`: the response in plain values, which the transport turns into its
library's response. Requests and responses are seen through the small
protocols below, which both ``httpx`` and ``httpx2`` objects satisfy.
"""

from __future__ import annotations

import asyncio
import base64
import queue
import re
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from enum import StrEnum
from hashlib import sha256
from typing import (
    TYPE_CHECKING,
    Any,
    Final,
    Generic,
    NamedTuple,
    Protocol,
    TypeAlias,
    TypeVar,
    cast,
)
from urllib.parse import parse_qsl, unquote_plus, urlencode, urlsplit

import orjson

from .._util.choices import choice
from .._util.jsonvalue import JSONObject, JSONValue, parse_json

# The one JSON path syntax (docs/redaction.md), shared with the Redactor's rules.
from .._util.paths import Path, parse, rewrite
from ..cache.callrouter import AsyncJob, CallRouter, Job, JobResult, running_execution
from ..cache.replay_cache import CacheKey, ReplayCache
from ..envelope import AgentResponse, CacheDirective, ErrorCode, ErrorInfo
from ..errors import CacheMiss, IntentusNetError, NotCacheable
from ..routing.agents import add_secrets, current_context, open_step
from ..routing.redact import Redactor, header_names, keyed, redact_body
from ._observed import Observed, Observers, observers_of_call, tell_call
from ._passthrough import AsyncTee, Interrupted, Tee
from .usage import read_usage

if TYPE_CHECKING:
    from ..routing.execution import PendingStep
    from ..store import ExecutionStore


class HTTPURL(Protocol):
    """The parts of a URL the core reads (``httpx.URL``, ``httpx2.URL``)."""

    @property
    def scheme(self) -> str: ...
    @property
    def raw_host(self) -> bytes: ...
    @property
    def port(self) -> int | None: ...
    @property
    def raw_path(self) -> bytes: ...
    @property
    def password(self) -> str | None: ...


class HTTPHeaders(Protocol):
    """The parts of a header collection the core reads."""

    @property
    def raw(self) -> list[tuple[bytes, bytes]]: ...
    def multi_items(self) -> list[tuple[str, str]]: ...
    def get(self, key: str, /) -> str | None: ...
    def __delitem__(self, key: str, /) -> None: ...


class HTTPRequest(Protocol):
    """The parts of a request the core reads."""

    @property
    def method(self) -> str: ...
    @property
    def url(self) -> HTTPURL: ...
    @property
    def headers(self) -> HTTPHeaders: ...


class HTTPResponse(Protocol):
    """The parts of a response the core reads."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def http_version(self) -> str: ...
    @property
    def headers(self) -> HTTPHeaders: ...


#: Makes the call: the response's head, its (decoded) body chunks, and how to
#: close it.
Open: TypeAlias = Callable[[], tuple[HTTPResponse, Iterator[bytes], Callable[[], None]]]
AsyncOpen: TypeAlias = Callable[
    [],
    Awaitable[tuple[HTTPResponse, AsyncIterator[bytes], Callable[[], Awaitable[None]]]],
]

#: ``before_record_request(payload) -> payload``: the request as hashed and recorded
#: (method, url, headers, json or bodySha256 and bodySize), after redaction.
RequestHook: TypeAlias = Callable[[JSONObject], JSONObject]
#: ``key(payload) -> value``: the JSON value that keys the cache instead of the
#: request's payload; the envelope's payload is then ``{"key": value}``.
KeyFunction: TypeAlias = Callable[[JSONObject], JSONValue]
#: ``before_record_response(data) -> data``: the response as recorded and later
#: replayed (status, reasonPhrase, httpVersion, headers, body, bodyEncoding).
ResponseHook: TypeAlias = Callable[[JSONObject], JSONObject]

#: On a response: ``hit``, ``miss`` or ``bypass``. On a request: ``bypass`` or
#: ``no-store`` for this call (stripped before the request is hashed or sent).
#: Added in 0.1.0.
CACHE_HEADER: Final = "x-intentusnet-cache"
#: On a response: the id of the record it was answered from, or recorded as
#: (inside an agent too; in a re-run serving the agent's step, the re-run's).
#: Added in 0.1.0.
RECORD_HEADER: Final = "x-intentusnet-record"
#: On a response to a request made inside an agent: the number of the step it
#: is recorded as in the agent's execution (``AgentContext.execution_id``).
#: Added in 0.1.0.
STEP_HEADER: Final = "x-intentusnet-step"
_ASKED: Final = {
    "default": CacheDirective.DEFAULT,
    "bypass": CacheDirective.BYPASS,
    "no-store": CacheDirective.NO_STORE,
    "no_store": CacheDirective.NO_STORE,
}

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
#: The keys of requests seen before are remembered up to this many.
_KEYS_KEPT: Final = 4096


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
        return choice(cls, value, "transport mode")


def is_secret(name: str, named: Collection[str] = ()) -> bool:
    """Whether a header carries a credential (it is never hashed nor stored)."""
    lowered = name.lower()
    return (
        lowered in _SECRET_NAMES
        or lowered in named
        or lowered.endswith("token")
        or any(part in lowered for part in _SECRET_PARTS)
    )


class RecordingCore:
    """What every recording transport shares: envelopes, records and responses.

    It sees requests and responses through the small protocols above, so the
    httpx and httpx2 transports run this one code and cannot drift apart.
    """

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
        agent: str,
        ignore_body_paths: Collection[str] = (),
        before_record_request: RequestHook | None = None,
        before_record_response: ResponseHook | None = None,
        key: KeyFunction | None = None,
    ) -> None:
        self.mode = TransportMode.parse(mode)
        if key is not None and not callable(key):
            raise TypeError(f"key must be a callable (payload -> JSON), not {key!r}")
        self.key_function = key
        #: JSON body paths whose values do not count (hashed as IGNORED)
        self.ignored: tuple[Path, ...] = tuple(parse(p) for p in ignore_body_paths)
        self.before_request = before_record_request
        self.before_response = before_record_response
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
        self._ready: dict[int, tuple[AgentResponse, Served]] = {}
        #: envelope hashes of requests seen before, by their bytes (see ``keyed``)
        self._keys: dict[tuple[object, ...], str] = {}
        self._seen_names = self.hashed_names | {b"content-type"}
        self._tasks: set[asyncio.Future[AgentResponse]] = set()
        self.secret_params = frozenset(name.lower() for name in secret_params)
        self._own_cache = cache is None
        self.cache = cache if cache is not None else ReplayCache(store=store)
        self.cache.bind(store)
        self.use_cache = self.cache.policy.allows(intent)
        self.calls = CallRouter(
            store,
            intent=intent,
            version="1.0",
            tenant=tenant,
            agent=agent,
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
        #: told about every call (``add_observer`` on the transports)
        self.observers = Observers()

    # -- requests -------------------------------------------------------------------

    def asked(self, request: HTTPRequest) -> CacheDirective:
        """The directive for this request: the transport's, or what its header asks.

        The header is taken off the request, so it is neither hashed nor sent.

        Raises:
            ValueError: the header names no directive; the message lists them.
        """
        value = request.headers.get(CACHE_HEADER)
        if value is None:
            return self.directive
        del request.headers[CACHE_HEADER]
        asked = _ASKED.get(value.strip().lower())
        if asked is None:
            raise ValueError(
                f"unknown {CACHE_HEADER} request header {value!r}; "
                "use one of 'bypass', 'no-store', 'default'"
            )
        return self.directive if self.directive is CacheDirective.BYPASS else asked

    def keyed(
        self,
        request: HTTPRequest,
        body: bytes,
        directive: CacheDirective = CacheDirective.DEFAULT,
    ) -> tuple[CacheKey, _Made | None]:
        """A request's key; with its payload, unless the key was known.

        A request whose bytes (method, URL, hashed headers and content type,
        body) are those of one keyed before has that one's key: its body is
        neither parsed nor canonicalised again, so a hit does little more than
        the lookup. The payload is made when a call needs it (``payload``).
        With a ``before_record_request`` hook every request is keyed anew: the
        hook sees each one.
        """
        if self.before_request is not None:
            made = self.payload(request, body, directive)
            return made[1], made
        url = request.url
        names = self._seen_names
        seen = (
            request.method,
            url.scheme,
            url.raw_host,
            url.port,
            url.raw_path,
            *(pair for pair in request.headers.raw if pair[0].lower() in names),
            sha256(body).digest(),
        )
        known = self._keys.get(seen)
        if known is not None:
            calls = self.calls
            return CacheKey(known, calls.intent, calls.version, directive), None
        made = self.payload(request, body, directive)
        if len(self._keys) >= _KEYS_KEPT:
            self._keys.clear()
        self._keys[seen] = made[1].envelope_hash
        return made[1], made

    def payload(
        self,
        request: HTTPRequest,
        body: bytes,
        directive: CacheDirective = CacheDirective.DEFAULT,
    ) -> tuple[JSONObject, CacheKey, list[str], JSONObject]:
        """A request's envelope payload, its key, the values redacted, the request.

        The request's payload is what makes the request this request: method,
        URL, hashed headers (named ones as markers) and the body (redacted). A
        multipart body's boundary, random per request, is written as
        ``(boundary)`` in the body hashed and in its content type. It is the
        envelope's payload too, unless a key function gives the value to hash.
        """
        hashed, marked, redactor = self.hashed_names, self.marked, self.redactor
        kept: dict[str, list[str]] = {}
        boundary = b""
        for raw_name, raw_value in request.headers.raw:
            name = raw_name.lower()
            if name == b"content-type" and raw_value[:10].lower() == b"multipart/":
                boundary, raw_value = _boundary(raw_value)
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
                return self._keyed(payload, directive, found)
            except ValueError:  # not JSON, or not JSON every language reads alike
                payload.pop("json", None)
                if boundary:
                    body = body.replace(b"--" + boundary, b"--" + _BOUNDARY)
                payload["bodySha256"] = sha256(body).hexdigest()
                payload["bodySize"] = len(body)
        return self._keyed(payload, directive, found)

    def _keyed(
        self, payload: JSONObject, directive: CacheDirective, found: dict[str, str]
    ) -> tuple[JSONObject, CacheKey, list[str], JSONObject]:
        if self.before_request is not None:
            payload = self.before_request(payload)
        if self.key_function is None:
            return payload, self.calls.key(payload, directive), list(found), payload
        keyed, key = self._key_of(payload, directive)
        return keyed, key, list(found), payload

    def _key_of(
        self, payload: JSONObject, directive: CacheDirective
    ) -> tuple[JSONObject, CacheKey]:
        """The envelope payload a key function makes, ``{"key": value}``; its key.

        Raises:
            NotCacheable: the key function raised, or returned a value JSON
                cannot carry (the message names the request and the path).
        """
        function = self.key_function
        assert function is not None
        where = f"{payload.get('method')} {payload.get('url')}"
        name = getattr(function, "__qualname__", repr(function))
        try:
            keyed: JSONObject = {"key": function(payload)}
        except Exception as exc:
            raise NotCacheable(
                f"the key function {name} failed for {where}: "
                f"{type(exc).__name__}: {exc}",
                "key",
            ) from exc
        try:
            return keyed, self.calls.key(keyed, directive)
        except IntentusNetError as exc:
            raise NotCacheable(
                f"the key function {name} returned a value that cannot key the "
                f"cache for {where}: {exc}",
                "key",
            ) from exc

    def _body(self, body: JSONValue, found: dict[str, str]) -> JSONValue:
        """A request body with ignored paths blanked and the redactor's applied."""
        if self.ignored:
            body = rewrite(body, self.ignored, _ignore, whole=False)
        if self.redactor is None:
            return body
        return redact_body(self.redactor, body, "http.request", found)

    def secrets(self, request: HTTPRequest, redacted: list[str]) -> list[str]:
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

    def url(self, url: HTTPURL) -> str:
        """The URL without user info, fragment and secret query parameters."""
        return self.url_and_secrets(url)[0]

    def url_and_secrets(self, url: HTTPURL) -> tuple[str, tuple[str, ...]]:
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

    def _url(self, url: HTTPURL) -> tuple[str, tuple[str, ...]]:
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

    def describe(self, request: HTTPRequest) -> str:
        """The request for people: method and URL (secrets left out)."""
        return f"{request.method} {self.url(request.url)}"

    def replay(self, key: CacheKey, request: HTTPRequest) -> AgentResponse:
        """The recorded answer to a request, or ``CacheMiss``."""
        found = self.cache.find(key, serve_errors=True)
        if found is None:
            raise CacheMiss(
                self.describe(request), key.envelope_hash, str(self.store.root)
            )
        return found

    # -- responses -----------------------------------------------------------------

    def recorded(
        self, response: HTTPResponse, body: bytes, request: JSONObject
    ) -> tuple[JSONObject, JobResult]:
        """A response as the client gets it, and as it is recorded.

        Recorded, named headers are markers and the body has the redactor's
        paths applied; an error status is an error answer. ``request`` is the
        request's payload: recorded beside the response when a key function
        made the envelope's, and read with the response for its token usage.
        """
        try:
            text: str | None = body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        data: JSONObject = {
            "status": response.status_code,
            "reasonPhrase": response.reason_phrase,
            "httpVersion": response.http_version,
            "headers": [[name, value] for name, value in self._headers(response)],
            "body": text if text is not None else base64.b64encode(body).decode(),
            "bodyEncoding": "utf-8" if text is not None else "base64",
        }
        shown = data if self.redactor is None else self._redacted(data, text)
        if self.before_response is not None:
            shown = self.before_response(shown)
        status = response.status_code
        answer: JSONObject = {"response": shown}
        if self.key_function is not None:
            answer = {"request": request, "response": shown}
        if status < 400:
            usage = _usage(request, shown)
            if usage is not None:
                answer["usage"] = usage
            return data, answer
        # Not cached unless the policy serves errors: a 401 or a 429 is not
        # the answer to this request next time.
        return data, AgentResponse(
            status="error",
            error=ErrorInfo(
                code=ErrorCode.AGENT_ERROR,
                message=f"HTTP {status} {response.reason_phrase}".rstrip(),
                retryable=status == 429 or status >= 500,
                details=answer,
            ),
        )

    def _headers(self, response: HTTPResponse) -> list[tuple[str, str]]:
        """A response's headers as recorded and served: no credentials, no framing."""
        return [
            (name, value)
            for name, value in response.headers.multi_items()
            if name not in _WIRE_HEADERS and not is_secret(name, self.secret)
        ]

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

    def ready(self, answer: AgentResponse, *, ran: bool) -> Served:
        """A recorded answer as the response to serve: a hit.

        ``ran``: this request's own call was made (its exception is raised
        again, where the call failed without a response).
        """
        # A hit returns the same answer object each time: prepare it once.
        found = self._ready.get(id(answer))
        if found is not None and found[0] is answer:
            return found[1]
        ready = Served(self._prepare(answer, ran), "hit", _record_of(answer))
        if len(self._ready) >= _READY_KEPT:
            self._ready.clear()
        self._ready[id(answer)] = (answer, ready)
        return ready

    # -- the flow ------------------------------------------------------------------

    def handle(self, request: HTTPRequest, body: bytes, open_: Open) -> Served:
        """``answer_request``, then tell the observers about the call."""
        started = time.time_ns()
        observed = observers_of_call(self.observers())
        served = self.answer_request(request, body, open_)
        if observed[0]:
            self._tell(request, body, served, started, observed)
        return served

    async def ahandle(
        self, request: HTTPRequest, body: bytes, open_: AsyncOpen
    ) -> Served:
        """The async ``handle``."""
        started = time.time_ns()
        observed = observers_of_call(self.observers())
        served = await self.aanswer_request(request, body, open_)
        if observed[0]:
            self._tell(request, body, served, started, observed)
        return served

    def _tell(
        self,
        request: HTTPRequest,
        body: bytes,
        served: Served,
        started: int,
        observed: Observed,
    ) -> None:
        ready = served.ready
        tell_call(
            (request.method, self.url(request.url), body),
            (ready.status, ready.headers, ready.content),
            served.cache,
            served.record,
            started,
            observed,
        )

    def answer_request(self, request: HTTPRequest, body: bytes, open_: Open) -> Served:
        """Answer a request from the records, or make it with ``open_`` and record it.

        The response served after a call is the one that came (unredacted). On
        a miss, an event stream is passed through: the routing runs on a
        thread, and the client reads the body as it arrives while the call's
        job waits to record it whole. Inside an agent the request is also a
        step of the agent's execution (:meth:`agent_step`).
        """
        directive = self.asked(request)
        key, made, step = self.opened(request, body, directive)
        if step is None:
            return self._answer(request, body, key, made, open_, None)
        if step.pending.served:
            return self._step_served(step)
        try:
            return self._answer(request, body, key, made, open_, step)
        except BaseException as exc:
            step.failed(exc)
            raise

    def _answer(
        self,
        request: HTTPRequest,
        body: bytes,
        key: CacheKey,
        made: _Made | None,
        open_: Open,
        step: AgentStep | None,
    ) -> Served:
        """The one way a request is answered: replay mode, a hit, or the call."""
        if self.mode is TransportMode.REPLAY:
            return self.served(self.replay(key, request), None, ran=False, step=step)
        if key.directive is not CacheDirective.BYPASS:
            found = self.cache.hit(key)  # a hit needs no thread
            if found is not None:
                return self.served(found, None, ran=False, step=step)
        payload, key, redacted, sent = made or self.payload(
            request, body, key.directive
        )
        parent = None if step is None else step.execution_id
        hand: queue.SimpleQueue[tuple[str, object]] = queue.SimpleQueue()
        settled = threading.Event()  # set once the routing is over
        live: list[JSONObject] = []  # the response as it came, when we called
        ran = passed = False  # the call was made; its body is passed through

        def job() -> JobResult:
            nonlocal ran, passed
            ran = True
            response, chunks, close = open_()
            if not _passes(response):
                try:
                    content = b"".join(chunks)
                finally:
                    close()
                data, recorded = self.recorded(response, content, sent)
                live.append(data)
                return recorded
            tee = Tee(chunks, close, settled)
            outcome = tee.outcome  # waited on without keeping the tee alive
            passed = True
            hand.put(("stream", (response, tee, running_execution.get())))
            del tee
            return self._whole(request, response, outcome.body(), sent)

        run: Job = job
        secrets = self.secrets

        def route() -> AgentResponse:
            try:
                answer = self.cache.answer(
                    key,
                    lambda: self.calls.run(
                        payload, run, secrets(request, redacted), key.directive, parent
                    ),
                    missed=key.directive is not CacheDirective.BYPASS,
                )
            except BaseException as exc:
                if passed and step is not None:
                    step.failed(exc)
                raise
            if passed and step is not None:  # the stream was read to its end
                self._step_answered(step, answer)
            return answer

        threading.Thread(
            target=_outcome,
            args=(route, hand, settled),
            daemon=True,
            name="intentusnet-call",
        ).start()
        kind, value = hand.get()
        if kind == "stream":
            return self.streamed(*cast("_Handed", value), key.directive, step)
        if isinstance(value, BaseException):
            raise value
        answer = cast("AgentResponse", value)
        live_data = live[0] if live else None
        return self.served(
            answer, live_data, ran=ran, directive=key.directive, step=step
        )

    async def aanswer_request(
        self, request: HTTPRequest, body: bytes, open_: AsyncOpen
    ) -> Served:
        """The async ``answer_request``: routing runs as a task when it may stream."""
        directive = self.asked(request)
        key, made, step = self.opened(request, body, directive)
        if step is None:
            return await self._aanswer(request, body, key, made, open_, None)
        if step.pending.served:
            return self._step_served(step)
        try:
            return await self._aanswer(request, body, key, made, open_, step)
        except BaseException as exc:
            step.failed(exc)
            raise

    async def _aanswer(
        self,
        request: HTTPRequest,
        body: bytes,
        key: CacheKey,
        made: _Made | None,
        open_: AsyncOpen,
        step: AgentStep | None,
    ) -> Served:
        """The async ``_answer``."""
        if self.mode is TransportMode.REPLAY:
            return self.served(self.replay(key, request), None, ran=False, step=step)
        if key.directive is not CacheDirective.BYPASS:
            found = self.cache.hit(key)  # a hit needs no task
            if found is not None:
                return self.served(found, None, ran=False, step=step)
        payload, key, redacted, sent = made or self.payload(
            request, body, key.directive
        )
        parent = None if step is None else step.execution_id
        hand: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        handed: list[_Handed] = []  # emptied when taken: nothing else keeps the tee
        asettled = asyncio.Event()
        live: list[JSONObject] = []
        ran = passed = False

        async def job() -> JobResult:
            nonlocal ran, passed
            ran = True
            response, chunks, aclose = await open_()
            if not _passes(response):
                try:
                    content = b"".join([chunk async for chunk in chunks])
                finally:
                    await aclose()
                data, recorded = self.recorded(response, content, sent)
                live.append(data)
                return recorded
            tee = AsyncTee(chunks, aclose, asettled)
            outcome = tee.outcome  # waited on without keeping the tee alive
            passed = True
            handed.append((response, tee, running_execution.get()))
            hand.set_result(None)
            del tee
            return self._whole(request, response, await outcome.body(), sent)

        run: AsyncJob = job
        secrets = self.secrets

        async def route() -> AgentResponse:
            try:
                answer = await self.cache.aanswer(
                    key,
                    lambda: self.calls.arun(
                        payload, run, secrets(request, redacted), key.directive, parent
                    ),
                    missed=key.directive is not CacheDirective.BYPASS,
                )
            except BaseException as exc:
                if passed and step is not None:
                    step.failed(exc)
                raise
            if passed and step is not None:  # the stream was read to its end
                self._step_answered(step, answer)
            return answer

        task = asyncio.ensure_future(route())
        self._tasks.add(task)  # kept until done: it records the stream
        task.add_done_callback(self._task_done)
        task.add_done_callback(lambda _: asettled.set())
        either: set[asyncio.Future[Any]] = {task, hand}
        await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
        if hand.done():
            return self.streamed(*handed.pop(), key.directive, step)
        answer = task.result()
        live_data = live[0] if live else None
        return self.served(
            answer, live_data, ran=ran, directive=key.directive, step=step
        )

    # -- inside an agent -------------------------------------------------------------

    def step_name(self, request: HTTPRequest) -> str:
        """The step a request made inside an agent is recorded as.

        ``http METHOD HOST[:PORT]PATH``: no scheme, no query (the arguments
        hold the whole URL), the port only when the URL names one.
        """
        url = request.url
        host = url.raw_host.decode("ascii")
        if ":" in host:
            host = f"[{host}]"  # IPv6
        port = "" if url.port is None else f":{url.port}"
        path = url.raw_path.partition(b"?")[0].decode("ascii")
        return f"http {request.method} {host}{port}{path}"

    def opened(
        self, request: HTTPRequest, body: bytes, directive: CacheDirective
    ) -> tuple[CacheKey, _Made | None, AgentStep | None]:
        """A request's key and payload, and its step when an agent makes it.

        Raises:
            CassetteMiss: a re-run's record does not hold the request.
        """
        key, made = self.keyed(request, body, directive)
        if current_context() is None:
            return key, made, None
        made = made or self.payload(request, body, directive)
        payload, key, redacted, _ = made
        return key, made, self.agent_step(request, payload, redacted)

    def agent_step(
        self, request: HTTPRequest, payload: JSONObject, redacted: list[str]
    ) -> AgentStep | None:
        """The step this request opens in the running agent's execution.

        ``None`` outside an agent, or when its execution records no steps. The
        step's arguments are the request's envelope payload.

        Raises:
            CassetteMiss: a re-run's record does not hold the request.
        """
        ctx = current_context()
        if ctx is None:
            return None
        step = open_step(ctx, self.step_name(request), payload)
        if step is None:
            return None
        if not step.served:  # a request being made: its keys are secrets
            add_secrets(ctx, self.secrets(request, redacted))
        return AgentStep(ctx.execution_id, step)

    def _step_served(self, step: AgentStep) -> Served:
        """A re-run's answer: the recorded response (or the recorded failure)."""
        output = step.pending.serve()
        if not isinstance(output, dict):
            raise ValueError(
                f"step {step.number} of record {step.execution_id} is not an "
                "HTTP response"
            )
        return Served(_ready(output), "hit", step.execution_id, step=step.number)

    def _step_answered(self, step: AgentStep, answer: AgentResponse) -> None:
        """End a passed-through response's step once it is recorded, or failed."""
        try:
            data = self._data(answer, ran=True)
        except Exception as exc:  # the stream was cut short, say
            step.failed(exc)
            return
        step.succeeded(data, _record_of(answer))

    def _task_done(self, task: asyncio.Future[AgentResponse]) -> None:
        self._tasks.discard(task)
        if not task.cancelled():
            task.exception()  # after a stream was handed over, nobody awaits it

    def _whole(
        self,
        request: HTTPRequest,
        response: HTTPResponse,
        content: bytes | None,
        request_payload: JSONObject,
    ) -> JobResult:
        """A passed-through body, recorded once the client has read all of it."""
        if content is None:
            raise Interrupted(
                f"the response to {self.describe(request)} was closed or failed "
                "before its end; it is not recorded as an answer"
            )
        return self.recorded(response, content, request_payload)[1]

    def streamed(
        self,
        response: HTTPResponse,
        tee: Tee | AsyncTee,
        record: str | None,
        directive: CacheDirective,
        step: AgentStep | None = None,
    ) -> Served:
        """A live response passed through as it arrives (always a miss).

        Its ``step``, if an agent made the request, is ended once the body has
        been read to its end and recorded (or failed).
        """
        ready = Ready(
            status=response.status_code,
            headers=tuple((str(k), str(v)) for k, v in self._headers(response)),
            content=b"",
            chunks=(),
            extensions={
                "http_version": response.http_version.encode(),
                "reason_phrase": response.reason_phrase.encode(),
            },
        )
        number = None if step is None else step.number
        return Served(ready, _state(directive), record, tee, number)

    def served(
        self,
        answer: AgentResponse,
        live: JSONObject | None,
        *,
        ran: bool,
        directive: CacheDirective = CacheDirective.DEFAULT,
        step: AgentStep | None = None,
    ) -> Served:
        """What to serve for an answer: the live response if a call was made.

        With the ``step`` of an agent that made the request, the step ends with
        the response as recorded, and that is what the agent gets (a re-run
        serves it the same bytes); the step names the record that answered.
        """
        if step is not None:
            data = self._data(answer, ran=ran)  # a failure is raised: not ended
            record = _record_of(answer)
            step.succeeded(data, record)
            state = "hit" if live is None else _state(directive)
            return Served(_ready(data), state, record, step=step.number)
        if live is None:
            return self.ready(answer, ran=ran)
        return Served(_ready(live), _state(directive), answer.metadata.execution_id)

    def close(self) -> None:
        """Stop the recording router; write the cache's counts (close it if ours).

        A cache the user gave is shared: only its counts are written.
        """
        self.calls.close()
        if self._own_cache:
            self.cache.close()  # writes the counts; reopens on use
        else:
            self.cache.flush_stats()

    def _prepare(self, answer: AgentResponse, ran: bool) -> Ready:
        return _ready(self._data(answer, ran))

    def _data(self, answer: AgentResponse, ran: bool) -> JSONObject:
        """A recorded answer's response data (its failure raised, if it has none)."""
        data: object = None
        if answer.payload is not None:
            data = answer.payload.get("response")
        elif answer.error is not None:
            data = answer.error.details.get("response")
        if not isinstance(data, dict):
            # Replay-only mode serves recorded failures, as a cache serving errors does.
            served = self.mode is TransportMode.REPLAY or self.cache.policy.serve_errors
            raise self.calls.failure(answer, ran=ran, from_records=served)
        return cast(JSONObject, data)


_BOUNDARY: Final = b"(boundary)"
_BOUNDARY_PARAM: Final = re.compile(rb'(boundary=)("?)([^";\s]+)("?)', re.IGNORECASE)


def _boundary(content_type: bytes) -> tuple[bytes, bytes]:
    """A multipart content type's boundary, and the type with it normalised."""
    match = _BOUNDARY_PARAM.search(content_type)
    if match is None:
        return b"", content_type
    normal = match.group(1) + match.group(2) + _BOUNDARY + match.group(4)
    return match.group(3), content_type.replace(match.group(0), normal)


#: What a value at an ignored body path is hashed and recorded as.
IGNORED: Final = "(ignored)"


def _ignore(value: JSONValue) -> JSONValue:
    return IGNORED


#: A request's payload, key and the values redacted from it (``payload``).
_Made: TypeAlias = tuple[JSONObject, CacheKey, list[str], JSONObject]
#: A live response handed to the client: its head, its body, its record id.
_Handed: TypeAlias = tuple[HTTPResponse, "Tee | AsyncTee", str | None]


def _usage(request: JSONObject, shown: JSONObject) -> JSONObject | None:
    """The token usage an LLM API's recorded answer reports (see ``usage``)."""
    body = shown.get("body")
    if shown.get("bodyEncoding") != "utf-8" or not isinstance(body, str):
        return None
    url = request.get("url")
    pairs = shown.get("headers")
    content_type = next(
        (
            str(pair[1])
            for pair in (pairs if isinstance(pairs, list) else [])
            if isinstance(pair, list) and str(pair[0]).lower() == "content-type"
        ),
        None,
    )
    sent = request.get("json")
    found = read_usage(
        urlsplit(url).path if isinstance(url, str) else "",
        b"" if sent is None else orjson.dumps(sent),
        body.encode("utf-8"),
        content_type,
    )
    return None if found is None else cast("JSONObject", found.as_json())


class AgentStep:
    """A request's step in the execution of the agent that made it.

    Ended once: with the response as recorded and the record that answered
    it, or with the failure.
    """

    __slots__ = ("ended", "execution_id", "pending")

    def __init__(self, execution_id: str, pending: PendingStep) -> None:
        self.execution_id = execution_id
        self.pending = pending
        self.ended = False

    @property
    def number(self) -> int:
        """The step's number in the agent's execution."""
        return self.pending.number

    def succeeded(self, data: JSONObject, record: str | None) -> None:
        """End the step with the response ``data``, answered by ``record``."""
        self.ended = True  # first: a write that fails is not ended again
        self.pending.succeeded(data, child=record)

    def failed(self, exc: BaseException) -> None:
        """End the step with ``exc``, unless it has ended."""
        if not self.ended:
            self.ended = True
            self.pending.failed(exc)


def _record_of(answer: AgentResponse) -> str | None:
    """The record an answer comes from: the one it was served from, for a hit."""
    metadata = answer.metadata
    return metadata.original_execution_id or metadata.execution_id


def _state(directive: CacheDirective) -> str:
    """The cache state of a call made: ``bypass`` when the cache was not read."""
    return "bypass" if directive is CacheDirective.BYPASS else "miss"


def _passes(response: HTTPResponse) -> bool:
    """Whether a live response is passed through as it arrives: an event stream."""
    kind = next(
        (v for k, v in response.headers.multi_items() if k.lower() == "content-type"),
        "",
    )
    return response.status_code < 400 and kind.startswith("text/event-stream")


def _outcome(
    route: Callable[[], AgentResponse],
    hand: queue.SimpleQueue[tuple[str, object]],
    settled: threading.Event,
) -> None:
    """Run ``route`` on a thread; its answer or exception goes to ``hand``."""
    try:
        hand.put(("done", route()))
    except BaseException as exc:  # handed to the caller, who raises it
        hand.put(("done", exc))
    finally:
        settled.set()


def _ready(data: JSONObject) -> Ready:
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
    return Ready(
        status=int(cast("int", data.get("status") or 200)),
        headers=tuple(headers),
        content=content,
        chunks=_events(content) if streamed else (),
        extensions={
            "http_version": str(data.get("httpVersion") or "HTTP/1.1").encode(),
            "reason_phrase": str(data.get("reasonPhrase") or "").encode(),
        },
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


class Served(NamedTuple):
    """A response to serve, whether it is a hit, and its record."""

    ready: Ready
    #: ``hit`` (from a record), ``miss`` (called and recorded) or ``bypass``
    #: (called and recorded without reading the cache)
    cache: str
    record: str | None
    #: a live body passed through as it arrives (``ready`` has no body then)
    tee: Tee | AsyncTee | None = None
    #: inside an agent: the step of the agent's execution it is recorded as
    step: int | None = None

    def headers(self) -> list[tuple[str, str]]:
        """The response's headers: the cache state, the record id, the step."""
        headers = [*self.ready.headers, (CACHE_HEADER, self.cache)]
        if self.record is not None:
            headers.append((RECORD_HEADER, self.record))
        if self.step is not None:
            headers.append((STEP_HEADER, str(self.step)))
        return headers

    def extensions(self) -> dict[str, object]:
        """The response's extensions: the cache state, the record id, the step."""
        return {
            **self.ready.extensions,
            "intentusnet_cache": self.cache,
            "intentusnet_record": self.record,
            "intentusnet_step": self.step,
        }


_H = TypeVar("_H")


class HitHeaders(Generic[_H]):
    """A hit's headers in a transport's own type, made once per served answer.

    A hit serves the same ``Served`` each time, so its headers are built on
    the first hit only. Only hits outside agents are kept (a live stream's
    ``Served`` holds its tee, which a memo must not keep alive; a step's is
    new each time), at most ``kept`` of them.
    """

    def __init__(
        self, make: Callable[[list[tuple[str, str]]], _H], kept: int = 1024
    ) -> None:
        self._make = make
        self._kept = kept
        self._memo: dict[int, tuple[Served, _H]] = {}

    def __call__(self, served: Served) -> _H | list[tuple[str, str]]:
        """The headers to serve ``served`` with."""
        if served.cache != "hit" or served.step is not None:
            return served.headers()  # a step's answer is made anew each time
        found = self._memo.get(id(served))
        if found is not None and found[0] is served:
            return found[1]
        headers = self._make(served.headers())
        if len(self._memo) >= self._kept:
            self._memo.clear()
        self._memo[id(served)] = (served, headers)
        return headers


class Ready(NamedTuple):
    """A response to serve, in plain values each transport turns into its own.

    ``chunks`` is the body split into server-sent events when it is an event
    stream (replayed event by event), else empty.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
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
