"""A test's cassette: a store of HTTP calls the pytest plugin records and replays.

The pytest plugin (``intentusnet.integrations.pytest_plugin``, docs/pytest.md)
gives each test that asks for one an :class:`HTTPCassette`: a
``FileExecutionStore`` under the test's directory. While the test runs, every
request an ``httpx`` or ``httpx2`` transport makes goes through the cassette's
recording transports (the ones of ``intentusnet.integrations.httpx`` and
``httpx2``), which answer it from the cassette or make it and record it, as
the test's :class:`RecordMode` says.

The cassette's directory holds only its record files (text that diffs well):
the store's catalog and the replay cache's index are derived data, rebuilt in
the plugin's cache directory for each test.

The cassette is handed each request by the transport class's own method
(``httpx.HTTPTransport.handle_request`` and its async and ``httpx2`` twins),
which the plugin replaces for the test; the call itself is made by the method
it replaced, on the transport the client built.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import Awaitable, Callable, Mapping
from enum import StrEnum
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, NamedTuple, Protocol, TypeAlias, cast

from .._util.choices import choice
from ..errors import CacheMiss, RequestNotRecorded
from ..store.file import CATALOG_NAME, FileExecutionStore
from ..store.memory import MemoryExecutionStore
from .recording import AsyncTransport, SyncTransport, TransportMode

if TYPE_CHECKING:
    from ..cache.replay_cache import ReplayCache
    from ..store import ExecutionStore

__all__ = ["TRANSPORT_OPTIONS", "HTTPCassette", "HTTPInteraction", "RecordMode"]

#: The recording transports' options a marker or ``intentusnet_config`` may set.
TRANSPORT_OPTIONS: Final = frozenset(
    {
        "intent",
        "tenant",
        "hash_headers",
        "credentials",
        "secret_headers",
        "secret_params",
        "redactor",
        "ignore_body_paths",
        "before_record_request",
        "before_record_response",
    }
)
#: Longest cassette name kept whole; longer ones are cut and given a hash.
_NAME_KEPT: Final = 120
#: A recording transport a cassette made (for httpx or httpx2, sync or async).
_Transport: TypeAlias = "SyncTransport[Any, Any] | AsyncTransport[Any, Any]"


class RecordMode(StrEnum):
    """What a test's cassette does with a request, as in pytest-recording.

    ``once``: record when the cassette holds no records yet, else only replay
    (a new request fails); ``new_episodes``: replay what is recorded, record
    what is not; ``none``: only replay (a new request fails); ``all``: make
    and record every request, never replay; ``rewrite``: delete the
    cassette, then record it anew (as ``once`` on a new cassette). Added in
    0.1.0.
    """

    ONCE = "once"
    NEW_EPISODES = "new_episodes"
    NONE = "none"
    ALL = "all"
    REWRITE = "rewrite"

    @classmethod
    def parse(cls, value: object) -> RecordMode:
        """Return the mode named by ``value``.

        Raises:
            ValueError: not a mode; the message lists the valid ones.
        """
        return choice(cls, value, "record mode")


class HTTPInteraction(NamedTuple):
    """One request a test made through its cassette. Added in 0.1.0."""

    #: the request's method
    method: str
    #: the request's URL as the test sent it (kept in memory only)
    url: str
    #: ``hit`` (answered from the cassette), ``miss`` (made and recorded) or
    #: ``bypass`` (made and recorded without reading the cassette)
    cache: str
    #: the record it was answered from, or recorded as
    record: str | None


def cassette_name(test_name: str, class_name: str | None = None) -> str:
    """A test's cassette directory name: safe on every file system.

    ``Class.test_name[param-id]``, with every character but letters, digits,
    ``_ . - [ ]`` replaced by ``-``; a name longer than 120 characters is cut
    and ends with 8 hex digits of its hash, so two long names stay apart.
    """
    name = f"{class_name}.{test_name}" if class_name else test_name
    safe = re.sub(r"[^A-Za-z0-9_.\[\]-]", "-", name).lstrip(".") or "-"
    if len(safe) > _NAME_KEPT:
        digest = sha256(name.encode()).hexdigest()[:8]
        safe = f"{safe[: _NAME_KEPT - 9]}-{digest}"
    return safe


class HTTPCassette:
    """The HTTP calls of one test: recorded into, and replayed from, a store.

    The ``intentusnet_cassette`` fixture gives a test its cassette; its
    attributes tell what happened to the test's requests.

    Args:
        path: the cassette's directory (a ``FileExecutionStore`` root).
        record_mode: see :class:`RecordMode`.
        cache_dir: where the cassette's derived data is made: the replay
            cache's index and the store's catalog (kept out of the cassette;
            give a new directory for each use, as the plugin does).
        options: the recording transports' options (``TRANSPORT_OPTIONS``),
            e.g. ``ignore_body_paths`` or ``before_record_request``.

    Raises:
        ValueError: an unknown record mode or option.

    Added in 0.1.0.
    """

    def __init__(
        self,
        path: str | Path,
        record_mode: RecordMode | str = RecordMode.NONE,
        *,
        cache_dir: str | Path,
        options: Mapping[str, object] | None = None,
    ) -> None:
        self.path = Path(path)
        self.record_mode = RecordMode.parse(record_mode)
        options = dict(options or {})
        unknown = sorted(set(options) - TRANSPORT_OPTIONS)
        if unknown:
            raise ValueError(
                f"unknown cassette option {', '.join(unknown)}; the options are "
                f"record_mode, {', '.join(sorted(TRANSPORT_OPTIONS))}"
            )
        self.options = options
        self._cache_dir = Path(cache_dir)
        if self.record_mode is RecordMode.REWRITE:
            shutil.rmtree(self.path, ignore_errors=True)
        files = FileExecutionStore(self.path, catalog_dir=self._cache_dir / "catalog")
        #: the cassette held records when the test began
        self.existed = next(iter(files.iter_ids()), None) is not None
        #: the requests this test made through the cassette, in order
        self.interactions: list[HTTPInteraction] = []
        mode = self.record_mode
        #: what the recording transports do: ``replay``, ``record`` or ``cache``
        self.transport_mode: TransportMode
        if mode is RecordMode.NONE or (mode is RecordMode.ONCE and self.existed):
            self.transport_mode = TransportMode.REPLAY
        elif mode is RecordMode.ALL:
            self.transport_mode = TransportMode.RECORD
        else:  # once on a new cassette, new_episodes, rewrite
            self.transport_mode = TransportMode.CACHE
        if self.transport_mode is not TransportMode.REPLAY:
            _drop_catalog(self.path)
        empty = self.transport_mode is TransportMode.REPLAY and not self.existed
        self._files = files
        #: the cassette's store (an empty one in memory when there is nothing to
        #: replay and nothing may be recorded: no directory is made)
        self.store: ExecutionStore = MemoryExecutionStore() if empty else files
        self._cache: ReplayCache | None = None
        self._transports: dict[str, _Transport] = {}
        self._through: dict[str, _Through] = {}

    def __repr__(self) -> str:
        return f"HTTPCassette({str(self.path)!r}, {self.record_mode.value!r})"

    @property
    def hits(self) -> int:
        """Requests answered from the cassette."""
        return sum(1 for i in self.interactions if i.cache == "hit")

    @property
    def misses(self) -> int:
        """Requests made over the network and recorded (``miss`` or ``bypass``)."""
        return sum(1 for i in self.interactions if i.cache != "hit")

    def record_ids(self) -> list[str]:
        """The ids of every record the cassette holds, this test's included."""
        return sorted(self.store.iter_ids())

    # -- requests --------------------------------------------------------------------

    def send(
        self,
        library: str,
        original: Callable[[object, object], object],
        transport: object,
        request: object,
    ) -> object:
        """Answer a request a sync transport was handed, or make it and record it.

        ``library`` is ``"httpx"`` or ``"httpx2"``; ``original`` the transport
        class's own ``handle_request``, called on ``transport`` to make the
        call.

        Raises:
            RequestNotRecorded: the record mode may not make this request.
        """
        __tracebackhide__ = True  # the test's traceback ends in its own call
        recorder, through = self._recorder(library, original, is_async=False)
        through.requests[id(request)] = transport
        try:
            response = cast("SyncTransport[Any, Any]", recorder).handle_request(request)
        except CacheMiss as exc:
            raise self._refused(exc) from None
        finally:
            through.requests.pop(id(request), None)
        self._note(request, response)
        return response

    async def asend(
        self,
        library: str,
        original: Callable[[object, object], Awaitable[object]],
        transport: object,
        request: object,
    ) -> object:
        """The async ``send``, for ``handle_async_request``."""
        __tracebackhide__ = True
        recorder, through = self._recorder(library, original, is_async=True)
        through.requests[id(request)] = transport
        try:
            response = await cast(
                "AsyncTransport[Any, Any]", recorder
            ).handle_async_request(request)
        except CacheMiss as exc:
            raise self._refused(exc) from None
        finally:
            through.requests.pop(id(request), None)
        self._note(request, response)
        return response

    def _refused(self, exc: CacheMiss) -> RequestNotRecorded:
        return RequestNotRecorded(
            exc.request, exc.envelope_hash, str(self.path), self.record_mode.value
        )

    def _note(self, request: object, response: Any) -> None:
        asked = cast("_Request", request)
        extensions: Mapping[str, object] = response.extensions
        self.interactions.append(
            HTTPInteraction(
                asked.method,
                str(asked.url),
                str(extensions.get("intentusnet_cache")),
                cast("str | None", extensions.get("intentusnet_record")),
            )
        )

    def _recorder(
        self, library: str, original: Callable[..., object], *, is_async: bool
    ) -> tuple[_Transport, _Through]:
        """The recording transport for one library, sync or async (made once)."""
        key = f"{library}:{'async' if is_async else 'sync'}"
        found = self._transports.get(key)
        if found is not None:
            return found, self._through[key]
        if self._cache is None:
            from ..cache.replay_cache import ReplayCache

            # Replaying touches nothing in the cassette: no hit journal, and
            # the cache's index lives outside it.
            self._cache = ReplayCache(
                self._cache_dir / "replay-cache", store=self.store, record_hits=False
            )
        through = _Through(original)
        # The transports call only handle_request / handle_async_request and
        # close / aclose on what they wrap, which _Through has for both libraries.
        via: Any
        if library == "httpx":
            from . import httpx as via
        else:
            from . import httpx2 as via
        factory = via.AsyncRecordingTransport if is_async else via.RecordingTransport
        made: _Transport = factory(
            self.store,
            self.transport_mode,
            through,
            cache=self._cache,
            **self.options,  # names checked by __init__
        )
        self._transports[key] = made
        self._through[key] = through
        return made, through

    def close(self) -> None:
        """Close the cassette's transports, cache and store (the test is over)."""
        transports, self._transports = self._transports, {}
        for transport in transports.values():
            if isinstance(transport, AsyncTransport):
                asyncio.run(transport.aclose())
            else:
                transport.close()
        if self._cache is not None:
            self._cache.close()
        self._files.close()


def _drop_catalog(path: Path) -> None:
    """Delete the catalog that older cassettes kept in their directory.

    Derived data: the cassette's catalog is rebuilt elsewhere, and one left
    here would miss what is recorded now. Its logs of opened records go too.
    """
    for suffix in ("", "-wal", "-shm", "-journal"):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path / f"{CATALOG_NAME}{suffix}")
    shutil.rmtree(path / "opened", ignore_errors=True)


class _Through:
    """What a cassette's transport wraps: the replaced method, on the right transport.

    The recording transport makes a call by handing the request to this; it
    calls the transport class's own method on the transport the client built
    (looked up by the request, which the transport passes on as it was given).
    """

    def __init__(self, original: Callable[..., object]) -> None:
        self.original = original
        self.requests: dict[int, object] = {}

    def handle_request(self, request: object) -> object:
        return self.original(self.requests[id(request)], request)

    async def handle_async_request(self, request: object) -> object:
        return await cast(
            "Awaitable[object]", self.original(self.requests[id(request)], request)
        )

    def close(self) -> None:
        """The client closes its own transport."""

    async def aclose(self) -> None:
        """The client closes its own transport."""


class _Request(Protocol):
    @property
    def method(self) -> str: ...
    @property
    def url(self) -> object: ...
