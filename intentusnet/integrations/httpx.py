"""httpx transports that record HTTP calls and answer repeats from the records.

::

    store = FileExecutionStore()
    client = httpx.Client(transport=RecordingTransport(store, mode="cache"))

Every request becomes an ``http.request`` envelope whose payload is the method,
the URL (query parameters sorted, secret ones and any user info left out), an
allow-list of headers, and the body: its JSON value when it is JSON (so its
hash is that of its canonical form) or else the SHA-256 and size of its bytes.
Credentials (headers and query parameters the ``CredentialRule`` names:
``Authorization``, ``Cookie``, ``*key*``, ``*token*``... and any name you add)
are never hashed and never stored: they are not in the envelope, and they are
dropped from the recorded response headers. Credential query parameters are
left out of the URL, and the values of both are replaced by markers wherever
they appear in what is recorded (an error message quoting the URL, say). A
``Redactor`` adds JSON body paths and header names, applied before the request
is hashed and before the response is recorded; the client still gets the
response as it came.

Modes (:class:`TransportMode`): ``record`` always makes the call and records it
(its answer becomes the cached one); ``replay`` never makes a call and raises
``CacheMiss`` naming the request when no record answers it; ``cache`` answers
from a record when there is one and otherwise calls and records.

Every response carries ``x-intentusnet-cache: hit|miss|bypass`` and
``x-intentusnet-record`` (its record id), in its headers and its extensions; a
request header ``x-intentusnet-cache: bypass|no-store`` sets one call's cache
directive and is taken off before the request is hashed or sent.

A response is recorded whole and replayed as a stream: a ``text/event-stream``
body event by event. On a miss, an event stream is passed to the client as it
arrives and recorded once the client has read it to its end; one cut short is
recorded as a failure, never served. The work is done by the core in
``recording``, shared with the httpx2 transports.
"""

from __future__ import annotations

import httpx

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

_HTTPX = Library(httpx)


class RecordingTransport(
    SyncTransport[httpx.Request, httpx.Response], httpx.BaseTransport
):
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
        tenant: recorded and hashed with every call; or a function of the
            request giving its tenant (``request -> str | None``), for one
            transport serving many tenants (the gateway keys it by the
            caller's credential). The function form was added in 0.1.0.
        hash_headers: request headers hashed and recorded (lower case);
            credential headers are refused here unless the redactor names
            them (then their markers are hashed).
        credentials: which header and query-parameter names carry
            credentials, never hashed nor stored (:class:`CredentialRule`;
            docs/redaction.md); :data:`DEFAULT_RULE` by default. Added in 0.1.0.
        secret_headers: more header names (or patterns) never hashed nor
            stored, added to ``credentials``.
        secret_params: more query-parameter names (or patterns) never hashed
            nor stored, added to ``credentials`` (one rule for both).
        redactor: JSON body paths and header names recorded as markers,
            applied before the request is hashed and before the response is
            recorded (docs/redaction.md). Added in 0.1.0.
        ignore_body_paths: JSON body paths (the redaction path syntax, e.g.
            ``user``, ``metadata``, ``messages[*].name``) whose values do not
            count: hashed and recorded as ``"(ignored)"``, so requests that
            differ only there are one request. Added in 0.1.0.
        before_record_request: ``payload -> payload``, the request as it is
            hashed and recorded (method, url, headers, json or bodySha256 and
            bodySize), after redaction and ignored paths. Added in 0.1.0.
        before_record_response: ``data -> data``, the response as it is
            recorded and later replayed (status, reasonPhrase, httpVersion,
            headers, body, bodyEncoding); the live client gets the response
            as it came. Added in 0.1.0.
        key: ``payload -> value``, a key function: it gets the request's
            payload (as ``before_record_request`` gives it back) and returns
            the JSON value that keys the cache instead. The envelope's payload
            is then ``{"key": value}`` (so its hash is that of the value) and
            the request is recorded beside the answer; requests with equal
            values are one request. A key function that raises, or returns a
            value JSON cannot carry, fails the request with ``NotCacheable``.
            Added in 0.1.0.

    Raises:
        ValueError: an unknown mode, or a credential header in ``hash_headers``.
        TypeError: ``key`` is not callable, or ``tenant`` is neither a string
            nor a callable.

    Added in 0.1.0.
    """

    _library = _HTTPX


class AsyncRecordingTransport(
    AsyncTransport[httpx.Request, httpx.Response], httpx.AsyncBaseTransport
):
    """The async twin of :class:`RecordingTransport`, for ``httpx.AsyncClient``.

    Takes the same arguments; ``wrapped`` is an async transport
    (``httpx.AsyncHTTPTransport()`` by default). Added in 0.1.0.
    """

    _library = _HTTPX
