"""httpx2 transports that record HTTP calls and answer repeats from the records.

::

    store = FileExecutionStore()
    client = httpx2.Client(transport=RecordingTransport(store, mode="cache"))
    claude = anthropic.Anthropic(http_client=client)

The twins of ``intentusnet.integrations.httpx`` for clients and SDKs built on
``httpx2`` (the Anthropic SDK among them), with the same arguments, modes and
records: both run one recording core, so a request recorded through one is
answered through the other. Needs the ``httpx2`` extra
(``pip install intentusnet[httpx2]``).
"""

from __future__ import annotations

import httpx2

from .credentials import DEFAULT_RULE, CredentialRule
from .recording import (
    CACHE_HEADER,
    DEFAULT_HASH_HEADERS,
    RECORD_HEADER,
    STEP_HEADER,
    AsyncTransport,
    Library,
    SyncTransport,
    TransportMode,
)

__all__ = [
    "CACHE_HEADER",
    "DEFAULT_HASH_HEADERS",
    "DEFAULT_RULE",
    "RECORD_HEADER",
    "STEP_HEADER",
    "AsyncRecordingTransport",
    "CredentialRule",
    "RecordingTransport",
    "TransportMode",
]

_HTTPX2 = Library(httpx2)


class RecordingTransport(
    SyncTransport[httpx2.Request, httpx2.Response], httpx2.BaseTransport
):
    """An httpx2 transport that records calls and answers repeats from records.

    Takes the arguments of :class:`intentusnet.integrations.httpx.RecordingTransport`
    (documented there and in docs/cache.md), and works the same way over the
    same recording core; ``wrapped`` is an httpx2 transport
    (``httpx2.HTTPTransport()`` by default). Calls recorded through either
    library are answered through the other.

    Raises:
        ValueError: an unknown mode, or a credential header in ``hash_headers``.

    Added in 0.1.0.
    """

    _library = _HTTPX2


class AsyncRecordingTransport(
    AsyncTransport[httpx2.Request, httpx2.Response], httpx2.AsyncBaseTransport
):
    """The async twin of :class:`RecordingTransport`, for ``httpx2.AsyncClient``.

    Takes the same arguments; ``wrapped`` is an async transport
    (``httpx2.AsyncHTTPTransport()`` by default). Added in 0.1.0.
    """

    _library = _HTTPX2
