"""The four recording transports, written once for both libraries.

``httpx`` and ``httpx2``, sync and async: each transport is a shell over one
``RecordingCore`` (``_serve``): it holds the arguments and the observer
methods, hands the core a request and a function that makes the call, and
turns the :class:`~._response.Response` the core serves into its library's
response. A public transport class names only its library: its base class,
its request and response types, and its :class:`Library`, which reads the
names both libraries share (``Response``, ``Headers``, the byte stream
classes, the default transports) from either module. A response's body stream
must be an instance of its own library's stream classes: the three bodies a
transport serves (a recorded body replayed, a live body passed through, sync
and async) are written once below, and each library's classes are made of them
and its stream bases. The arguments are documented once, on
``intentusnet.integrations.httpx.RecordingTransport``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterator
from types import ModuleType
from typing import TYPE_CHECKING, ClassVar, Generic, Protocol, TypeVar, cast

from ...cache.callrouter import CallRouter
from ...routing.redact import keyed
from ..credentials import DEFAULT_RULE, CredentialRule
from ._key import (
    DEFAULT_HASH_HEADERS,
    HTTPRequest,
    KeyFunction,
    RequestHook,
    RequestKeys,
    Secrets,
    TenantFunction,
)
from ._passthrough import AsyncTee, Tee
from ._response import HTTPResponse, Response, ResponseHook, Responses
from ._serve import RecordingCore, TransportMode

if TYPE_CHECKING:
    from ...cache.replay_cache import ReplayCache
    from ...routing.redact import Redactor
    from ...routing.seams import ExecutionObserver
    from ...store import ExecutionStore

_Req_contra = TypeVar("_Req_contra", contravariant=True)
_Resp_co = TypeVar("_Resp_co", covariant=True)


class Sends(Protocol[_Req_contra, _Resp_co]):
    """The transport a sync recording transport wraps: it makes real calls."""

    def handle_request(self, request: _Req_contra, /) -> _Resp_co: ...
    def close(self) -> None: ...


class AsyncSends(Protocol[_Req_contra, _Resp_co]):
    """The transport an async recording transport wraps."""

    async def handle_async_request(self, request: _Req_contra, /) -> _Resp_co: ...
    async def aclose(self) -> None: ...


class Library:
    """What a recording transport uses of its library, ``httpx`` or ``httpx2``."""

    def __init__(self, module: ModuleType) -> None:
        #: the library's name, recorded as the agent that made the calls
        self.name: str = module.__name__
        self.headers = module.Headers
        self.response = module.Response
        self.byte_stream = module.ByteStream
        sync, async_ = module.SyncByteStream, module.AsyncByteStream
        self.replayed = type("Replayed", (_Replayed, sync, async_), {})
        self.passed = type("Passed", (_Passed, sync), {})
        self.apassed = type("APassed", (_APassed, async_), {})
        #: the transports that make real calls when none is given
        self.transport = module.HTTPTransport
        self.async_transport = module.AsyncHTTPTransport


class _Replayed:
    """A recorded body replayed as a stream of chunks."""

    def __init__(self, chunks: tuple[bytes, ...]) -> None:
        self._chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self._chunks

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for chunk in self._chunks:
            yield chunk


class _Passed:
    """A live body passed to the client as it arrives (recorded once whole)."""

    def __init__(self, tee: Tee) -> None:
        self._tee = tee

    def __iter__(self) -> Iterator[bytes]:
        yield from self._tee

    def close(self) -> None:
        self._tee.close()


class _APassed:
    """The async ``_Passed``."""

    def __init__(self, tee: AsyncTee) -> None:
        self._tee = tee

    async def __aiter__(self) -> AsyncIterator[bytes]:
        async for chunk in self._tee:
            yield chunk

    async def aclose(self) -> None:
        await self._tee.aclose()


#: The library's transport a recording transport wraps.
_W = TypeVar("_W")
#: The library's request and response types.
_Req = TypeVar("_Req", bound=HTTPRequest)
_Resp = TypeVar("_Resp", bound=HTTPResponse)


class RecordingShell(Generic[_W]):
    """The constructor, the observer methods and the responses of a transport.

    A transport class sets ``_library`` (its library's names); the sync and
    async shells set ``_is_async`` and name the default transport they wrap.
    """

    _library: ClassVar[Library]
    _is_async: ClassVar[bool]

    def __init__(
        self,
        store: ExecutionStore,
        mode: TransportMode | str = TransportMode.CACHE,
        wrapped: _W | None = None,
        *,
        cache: ReplayCache | None = None,
        intent: str = "http.request",
        tenant: str | TenantFunction | None = None,
        hash_headers: Collection[str] = DEFAULT_HASH_HEADERS,
        credentials: CredentialRule = DEFAULT_RULE,
        secret_headers: Collection[str] = (),
        secret_params: Collection[str] = (),
        redactor: Redactor | None = None,
        ignore_body_paths: Collection[str] = (),
        before_record_request: RequestHook | None = None,
        before_record_response: ResponseHook | None = None,
        key: KeyFunction | None = None,
    ) -> None:
        checked = TransportMode.parse(mode)
        secrets = Secrets(credentials, [*secret_headers, *secret_params], redactor)
        calls = CallRouter(
            store,
            intent=intent,
            version="1.0",
            agent=self._library.name,
            is_async=self._is_async,
            # Same key as the user's (a random one without): the router's
            # markers of the request's keys in error texts match the user's.
            redactor=keyed(redactor),
        )
        keys = RequestKeys(
            calls,
            secrets,
            tenant=tenant,
            hash_headers=hash_headers,
            ignore_body_paths=ignore_body_paths,
            before_record_request=before_record_request,
            key=key,
        )
        responses = Responses(
            secrets, before_record_response, with_request=key is not None
        )
        self._core = RecordingCore(
            store, checked, cache, keys, responses, self._library.headers
        )
        self.store = store
        self.mode = self._core.mode
        self.cache = self._core.cache
        self._wrapped: _W = wrapped if wrapped is not None else self._default()

    def _default(self) -> _W:
        raise NotImplementedError  # the sync and async shells name theirs

    def add_observer(self, observer: ExecutionObserver) -> None:
        """Tell ``observer`` about every HTTP call this transport answers.

        Its ``call_made`` gets the method, URL, status, both bodies, the cache
        state and the record id (the OpenTelemetry integration makes a span
        with the GenAI attributes of it). Added twice, it is told once.
        Calls an agent makes are also told to the observers of the router
        running it. Added in 0.1.0.
        """
        self._core.observers = self._core.observers.adding(observer)

    def remove_observer(self, observer: ExecutionObserver) -> None:
        """Stop telling ``observer``; one not added is ignored. Added in 0.1.0."""
        self._core.observers = self._core.observers.removing(observer)

    @property
    def observer_errors(self) -> int:
        """How many times one of this transport's own observers raised.

        What an observer raises is logged (the ``intentusnet.observers``
        logger) and counted here; the call is answered as if it had not.
        Added in 0.1.0.
        """
        return self._core.observers.errors.count

    def _response(self, served: Response, request: object) -> object:
        """The library's response to serve (a hit's headers made once, by the core)."""
        library, tee = self._library, served.tee
        if isinstance(tee, Tee):
            stream = library.passed(tee)
        elif isinstance(tee, AsyncTee):
            stream = library.apassed(tee)
        elif served.chunks:
            stream = library.replayed(served.chunks)
        else:
            stream = library.byte_stream(served.content)
        return library.response(
            served.status,
            headers=served.headers if served.made is None else served.made,
            stream=stream,
            request=request,
            extensions=served.extensions,  # the library copies it
        )


class SyncTransport(RecordingShell[Sends[_Req, _Resp]]):
    """A sync recording transport (``RecordingTransport``)."""

    _is_async = False

    def _default(self) -> Sends[_Req, _Resp]:
        made: Sends[_Req, _Resp] = self._library.transport()
        return made

    def handle_request(self, request: _Req) -> _Resp:
        """Answer a request from the records, or call and record it."""
        wrapped = self._wrapped

        def open_() -> tuple[HTTPResponse, Iterator[bytes], Callable[[], None]]:
            response = wrapped.handle_request(request)
            return response, response.iter_bytes(), response.close

        served = self._core.handle(request, request.read(), open_)
        return cast("_Resp", self._response(served, request))

    def close(self) -> None:
        """Close the wrapped transport and the recording router.

        The cache's hit and miss counts are written, so ``cache.stats()`` and
        ``intentusnet stats`` count this transport's calls at once (a cache the
        transport made is closed too; it reopens on use).
        """
        self._wrapped.close()
        self._core.close()


class AsyncTransport(RecordingShell[AsyncSends[_Req, _Resp]]):
    """An async recording transport (``AsyncRecordingTransport``)."""

    _is_async = True

    def _default(self) -> AsyncSends[_Req, _Resp]:
        made: AsyncSends[_Req, _Resp] = self._library.async_transport()
        return made

    async def handle_async_request(self, request: _Req) -> _Resp:
        """Answer a request from the records, or call and record it."""
        wrapped = self._wrapped

        async def open_() -> tuple[
            HTTPResponse, AsyncIterator[bytes], Callable[[], Awaitable[None]]
        ]:
            response = await wrapped.handle_async_request(request)
            return response, response.aiter_bytes(), response.aclose

        body = await request.aread()
        served = await self._core.ahandle(request, body, open_)
        return cast("_Resp", self._response(served, request))

    async def aclose(self) -> None:
        """The async ``close``."""
        await self._wrapped.aclose()
        self._core.close()
