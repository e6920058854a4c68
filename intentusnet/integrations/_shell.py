"""What the four recording transports share: their arguments and their observers.

``httpx`` and ``httpx2``, sync and async: each transport is this shell over one
``RecordingCore``, plus the few lines that speak its library (the base class,
the default transport it wraps, the response type). The arguments are
documented once, on ``intentusnet.integrations.httpx.RecordingTransport``.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from ._recording import (
    _INTENT,
    DEFAULT_HASH_HEADERS,
    DEFAULT_SECRET_PARAMS,
    HitHeaders,
    KeyFunction,
    RecordingCore,
    RequestHook,
    ResponseHook,
    TransportMode,
)

if TYPE_CHECKING:
    from ..cache.replay_cache import ReplayCache
    from ..routing.redact import Redactor
    from ..routing.seams import ExecutionObserver
    from ..store import ExecutionStore

__all__ = ["RecordingShell"]

#: The library's transport a recording transport wraps.
_W = TypeVar("_W")


class RecordingShell(Generic[_W]):
    """The constructor and the observer methods of a recording transport.

    A transport class sets ``_library`` (its library's name, recorded as the
    agent), ``_is_async``, ``_headers_type`` (its library's ``Headers``) and
    ``_default_wrapped`` (the transport that makes real calls when none is
    given).
    """

    _library: ClassVar[str]
    _is_async: ClassVar[bool]
    _headers_type: ClassVar[type[Any]]

    def __init__(
        self,
        store: ExecutionStore,
        mode: TransportMode | str = TransportMode.CACHE,
        wrapped: _W | None = None,
        *,
        cache: ReplayCache | None = None,
        intent: str = _INTENT,
        tenant: str | None = None,
        hash_headers: Collection[str] = DEFAULT_HASH_HEADERS,
        secret_headers: Collection[str] = (),
        secret_params: Collection[str] = DEFAULT_SECRET_PARAMS,
        redactor: Redactor | None = None,
        ignore_body_paths: Collection[str] = (),
        before_record_request: RequestHook | None = None,
        before_record_response: ResponseHook | None = None,
        key: KeyFunction | None = None,
    ) -> None:
        self._core = RecordingCore(
            store,
            mode,
            cache,
            intent=intent,
            tenant=tenant,
            hash_headers=hash_headers,
            secret_headers=secret_headers,
            secret_params=secret_params,
            redactor=redactor,
            ignore_body_paths=ignore_body_paths,
            before_record_request=before_record_request,
            before_record_response=before_record_response,
            key=key,
            is_async=self._is_async,
            agent=self._library,
        )
        self.mode = self._core.mode
        self.cache = self._core.cache
        self._headers: HitHeaders[Any] = HitHeaders(self._headers_type)
        self._wrapped: _W = wrapped if wrapped is not None else self._default_wrapped()

    def _default_wrapped(self) -> _W:
        raise NotImplementedError  # each transport names its library's

    def add_observer(self, observer: ExecutionObserver) -> None:
        """Tell ``observer`` about every HTTP call this transport answers.

        Its ``call_made`` gets the method, URL, status, both bodies, the cache
        state and the record id (the OpenTelemetry integration makes a span
        with the GenAI attributes of it). Added twice, it is told once.
        Calls an agent makes are also told to the observers of the router
        running it. Added in 0.1.0.
        """
        self._core.observers.add(observer)

    def remove_observer(self, observer: ExecutionObserver) -> None:
        """Stop telling ``observer``; one not added is ignored. Added in 0.1.0."""
        self._core.observers.remove(observer)
