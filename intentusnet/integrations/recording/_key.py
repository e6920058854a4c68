"""A request as recorded: its credentials left out, and its cache key.

The recording core reads a request through the small protocols below, which
both ``httpx`` and ``httpx2`` requests satisfy.

Headers and query parameters the credential rule names (``credentials``: any
``Authorization``, ``Cookie``, ``*key*``, ``*token*``... and the names a user
adds) are left out of what is hashed and recorded. Their values, and those of
the headers a ``Redactor`` names, are a call's secrets: replaced by markers
wherever they show up in its record (an error text quoting the URL, say).

A request's payload is what makes it this request: its method, its URL as
recorded, the hashed headers (the ones a ``Redactor`` names as their markers)
and its body: the JSON value (ignored paths blanked, redacted) when it is JSON,
so its hash is that of its canonical form, else the SHA-256 and size of its
bytes (a multipart boundary, random per request, written as ``(boundary)``).
A ``before_record_request`` hook may reshape it, and a key function may give
the value to hash instead. The payload's envelope hash is the cache key.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from hashlib import sha256
from typing import TYPE_CHECKING, Final, Protocol, TypeAlias
from urllib.parse import parse_qsl, unquote_plus, urlencode

from ..._util.jsonvalue import JSONObject, JSONValue, parse_json

# The one JSON path syntax (docs/redaction.md), shared with the Redactor's rules.
from ..._util.paths import Path, parse, rewrite
from ...cache.callrouter import CallRouter
from ...cache.replay_cache import CacheKey
from ...envelope import CacheDirective
from ...errors import IntentusNetError, NotCacheable
from ...routing.redact import Redactor, header_names, redact_body
from ...store.filters import ListFilters
from ..credentials import CredentialRule

if TYPE_CHECKING:
    from ...store import ExecutionStore


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
    """The parts of a request the transports read."""

    @property
    def method(self) -> str: ...
    @property
    def url(self) -> HTTPURL: ...
    @property
    def headers(self) -> HTTPHeaders: ...
    @property
    def extensions(self) -> Mapping[str, object]: ...
    def read(self) -> bytes: ...
    async def aread(self) -> bytes: ...


def authority(url: HTTPURL) -> str:
    """A URL's host and port, as the URL is written (an IPv6 host in brackets)."""
    host = url.raw_host.decode("ascii")
    if ":" in host:
        host = f"[{host}]"
    return host if url.port is None else f"{host}:{url.port}"


#: ``before_record_request(payload) -> payload``: the request as hashed and recorded
#: (method, url, headers, json or bodySha256 and bodySize), after redaction.
RequestHook: TypeAlias = Callable[[JSONObject], JSONObject]
#: ``key(payload) -> value``: the JSON value that keys the cache instead of the
#: request's payload; the envelope's payload is then ``{"key": value}``.
KeyFunction: TypeAlias = Callable[[JSONObject], JSONValue]
#: ``tenant(request) -> tenant``: the tenant of each request (e.g. of its
#: credential headers), for a transport serving many tenants.
TenantFunction: TypeAlias = Callable[[HTTPRequest], str | None]
#: A request's envelope payload, its key, the values redacted from it, the
#: request's own payload (the envelope's, unless a key function made that) and
#: its tenant.
Made: TypeAlias = tuple[JSONObject, CacheKey, list[str], JSONObject, str | None]

#: Request headers that are part of a request's meaning, and so of its hash.
DEFAULT_HASH_HEADERS: Final = (
    "accept",
    "content-type",
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
)
#: What a value at an ignored body path is hashed and recorded as.
IGNORED: Final = "(ignored)"
#: The keys of requests seen before are remembered up to this many.
_KEYS_KEPT: Final = 4096
#: Canonical URLs are remembered up to this many.
_URLS_KEPT: Final = 1024
_BOUNDARY: Final = b"(boundary)"
_BOUNDARY_PARAM: Final = re.compile(rb'(boundary=)("?)([^";\s]+)("?)', re.IGNORECASE)


class Secrets:
    """A transport's secret headers and parameters, and the URLs it records.

    Args:
        rule: which header and parameter names carry credentials.
        more: more names (or patterns) that do, added to the rule.
        redactor: its header names are recorded (and hashed) as markers.
    """

    def __init__(
        self,
        rule: CredentialRule,
        more: Collection[str],
        redactor: Redactor | None,
    ) -> None:
        #: the names never hashed nor stored (headers and parameters alike)
        self.rule = CredentialRule([*rule.more, *more], rule.less) if more else rule
        self.redactor = redactor
        #: headers recorded (and, when hashed, hashed) as their markers
        self.marked = frozenset() if redactor is None else header_names(redactor)
        self._urls: dict[
            tuple[str, bytes, int | None, bytes], tuple[str, tuple[str, ...]]
        ] = {}

    def of_request(self, request: HTTPRequest, redacted: list[str]) -> list[str]:
        """The secrets of a request that is being made (not needed for a hit).

        Credential and named headers' values, credential parameters, the URL's
        password and the values redacted from the body: they are replaced by
        markers wherever they show up in the record (an error text, say).
        """
        found = list(redacted)
        marked = self.marked
        for raw_name, raw_value in request.headers.raw:
            name = raw_name.decode("latin-1").lower()
            if name in marked or self.rule(name):
                found.extend(_credential_parts(raw_value.decode("latin-1")))
        found.extend(self.url_and_secrets(request.url)[1])
        return found

    def describe(self, request: HTTPRequest) -> str:
        """The request for people: method and URL (secrets left out)."""
        return f"{request.method} {self.url(request.url)}"

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
        path, _, query = url.raw_path.partition(b"?")
        text = f"{url.scheme}://{authority(url)}{path.decode('ascii')}"
        left_out: list[str] = []
        if query:
            secret = self.rule
            params: list[tuple[str, str]] = []
            for k, v in parse_qsl(query.decode("ascii"), keep_blank_values=True):
                if secret(k):
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
                if secret(unquote_plus(part.partition(b"=")[0].decode("ascii")))
            )
        return text, tuple(dict.fromkeys(v for v in left_out if v))


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


class RequestKeys:
    """A transport's way of keying requests (its arguments checked once, here).

    Raises:
        TypeError: ``key`` is not callable; ``tenant`` is neither a string nor
            a callable.
        ValueError: an ignored body path is not a path, or ``hash_headers``
            names a credential header the redactor does not name.
    """

    def __init__(
        self,
        calls: CallRouter,
        secrets: Secrets,
        *,
        tenant: str | TenantFunction | None,
        hash_headers: Collection[str],
        ignore_body_paths: Collection[str],
        before_record_request: RequestHook | None,
        key: KeyFunction | None,
    ) -> None:
        if key is not None and not callable(key):
            raise TypeError(f"key must be a callable (payload -> JSON), not {key!r}")
        if tenant is not None and not isinstance(tenant, str) and not callable(tenant):
            raise TypeError(
                f"tenant must be a string or a callable (request -> tenant), "
                f"not {tenant!r}"
            )
        self.function = key
        self.tenant = tenant
        #: JSON body paths whose values do not count (hashed as IGNORED)
        self.ignored: tuple[Path, ...] = tuple(parse(p) for p in ignore_body_paths)
        self.before_request = before_record_request
        self.calls = calls
        self.secrets = secrets
        hashed = tuple(dict.fromkeys(name.lower() for name in hash_headers))
        refused = [
            name for name in hashed if secrets.rule(name) and name not in secrets.marked
        ]
        if refused:
            raise ValueError(
                f"headers {', '.join(refused)} carry credentials and are never "
                "hashed; leave them out of hash_headers (or name them in the "
                "Redactor's http_headers to hash their markers)"
            )
        self.hashed_names = frozenset(name.encode("latin-1") for name in hashed)
        self._seen_names = self.hashed_names | {b"content-type"}
        #: envelope hashes of requests seen before, by their bytes (see ``keyed``)
        self._keys: dict[tuple[object, ...], str] = {}

    def keyed(
        self,
        request: HTTPRequest,
        body: bytes,
        directive: CacheDirective = CacheDirective.DEFAULT,
    ) -> tuple[CacheKey, Made | None]:
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
            self.tenant_of(request),
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

    def tenant_of(self, request: HTTPRequest) -> str | None:
        """The tenant a request is made for: the transport's, or its function's."""
        tenant = self.tenant
        return tenant if tenant is None or isinstance(tenant, str) else tenant(request)

    def payload(
        self,
        request: HTTPRequest,
        body: bytes,
        directive: CacheDirective = CacheDirective.DEFAULT,
    ) -> Made:
        """A request's envelope payload, its key, the values redacted, the request.

        The multipart boundary is written as ``(boundary)`` in the content type
        hashed too. The module's docstring says what the payload holds.
        """
        hashed, secrets = self.hashed_names, self.secrets
        tenant = self.tenant_of(request)
        marked, redactor = secrets.marked, secrets.redactor
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
        url = secrets.url(request.url)
        payload: JSONObject = {"method": request.method, "url": url, "headers": headers}
        found: dict[str, str] = {}
        if body:
            try:
                payload["json"] = self._body(parse_json(body), found)
                return self._keyed(payload, directive, found, tenant)
            except ValueError:  # not JSON, or not JSON every language reads alike
                payload.pop("json", None)
                if boundary:
                    body = body.replace(b"--" + boundary, b"--" + _BOUNDARY)
                payload["bodySha256"] = sha256(body).hexdigest()
                payload["bodySize"] = len(body)
        return self._keyed(payload, directive, found, tenant)

    def _keyed(
        self,
        payload: JSONObject,
        directive: CacheDirective,
        found: dict[str, str],
        tenant: str | None,
    ) -> Made:
        if self.before_request is not None:
            payload = self.before_request(payload)
        if self.function is None:
            key = self.calls.key(payload, directive, tenant)
            return payload, key, list(found), payload, tenant
        keyed, key = self._key_of(payload, directive, tenant)
        return keyed, key, list(found), payload, tenant

    def _key_of(
        self, payload: JSONObject, directive: CacheDirective, tenant: str | None
    ) -> tuple[JSONObject, CacheKey]:
        """The envelope payload a key function makes, ``{"key": value}``; its key.

        Raises:
            NotCacheable: the key function raised, or returned a value JSON
                cannot carry (the message names the request and the path).
        """
        function = self.function
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
            return keyed, self.calls.key(keyed, directive, tenant)
        except IntentusNetError as exc:
            raise NotCacheable(
                f"the key function {name} returned a value that cannot key the "
                f"cache for {where}: {exc}",
                "key",
            ) from exc

    def _body(self, body: JSONValue, found: dict[str, str]) -> JSONValue:
        """A request body with ignored paths blanked and the redactor's applied."""
        if self.ignored:
            body = rewrite(body, self.ignored, lambda _: IGNORED, whole=False)
        redactor = self.secrets.redactor
        if redactor is None:
            return body
        return redact_body(redactor, body, "http.request", found)


def _boundary(content_type: bytes) -> tuple[bytes, bytes]:
    """A multipart content type's boundary, and the type with it normalised."""
    match = _BOUNDARY_PARAM.search(content_type)
    if match is None:
        return b"", content_type
    normal = match.group(1) + match.group(2) + _BOUNDARY + match.group(4)
    return match.group(3), content_type.replace(match.group(0), normal)


#: The newest recorded requests whose tenants are tried.
SCANNED: Final = 100


def tenant_hint(
    store: ExecutionStore,
    keys: RequestKeys,
    request: HTTPRequest,
    body: bytes,
    directive: CacheDirective,
) -> str:
    """What to add to a replay miss's message: a record of it for another tenant.

    An empty text when no recorded request is this one for another tenant, or
    when the transport has a tenant function.
    """
    if callable(keys.tenant):
        return ""
    payload, _, _, _, tenant = keys.payload(request, body, directive)
    calls = keys.calls
    tried: set[str | None] = {tenant}
    for summary in store.list(ListFilters(intent=calls.intent, limit=SCANNED)):
        try:
            context = store.load(summary.execution_id).envelope.get("context")
        except (IntentusNetError, OSError):  # unreadable: no tenant to try
            continue
        other = context.get("tenant") if isinstance(context, dict) else None
        if (other is not None and not isinstance(other, str)) or other in tried:
            continue
        tried.add(other)
        hashed = calls.key(payload, directive, other).envelope_hash
        if hashed == summary.envelope_hash or store.list(
            ListFilters(envelope_hash=hashed, limit=1)
        ):
            return (
                f"; this request is recorded for tenant {other!r}, not for this "
                f"transport's {tenant!r}: give the transport the tenant it was "
                "recorded with (a gateway's: tenant_of(tenant_key(path), ...), "
                "docs/gateway.md)"
            )
    return ""
