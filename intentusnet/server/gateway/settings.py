"""What a gateway is made of: its upstreams, its mode, its tenancy and limits.

An upstream is ``NAME=URL``: requests to ``/NAME/rest`` go to ``URL/rest``.
Tenancy scopes the cache per credential: a request's tenant is a keyed
HMAC-SHA256 of every credential-bearing part it carries, headers and query
parameters the credential rule names (:func:`tenant_of`), made with the
gateway's tenant key, so the credential itself is never hashed unkeyed, stored
nor logged; the tenant is hashed with every request, as the transports'
``tenant`` argument is. A request carrying none has the anonymous tenant.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Final
from urllib.parse import parse_qsl

from ...cache.prices import PriceTable
from ...integrations.credentials import DEFAULT_RULE, CredentialRule
from ...integrations.httpx import TransportMode
from ...routing.redact import Redactor
from ..auth import KeyRing
from .upstream import Upstream

__all__ = [
    "ANONYMOUS",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_CONCURRENCY",
    "TENANT_KEY_FILE",
    "GatewaySettings",
    "Pace",
    "tenant_key",
    "tenant_of",
]

#: The tenant of every request that carries no credential.
ANONYMOUS: Final = "credential:none"
#: The tenant key's file in a file store's directory, made on first use.
TENANT_KEY_FILE: Final = "gateway-tenant.key"
#: Requests larger than this are refused (413) unless the settings say otherwise.
DEFAULT_MAX_BODY: Final = 16 * 1024 * 1024
#: Requests answered at once beyond which more are refused (503).
DEFAULT_MAX_CONCURRENCY: Final = 256
_MIN_KEY: Final = 16


class Pace(StrEnum):
    """How a recorded event stream is answered: at once, or at its recorded pace."""

    FAST = "fast"
    RECORDED = "recorded"


@dataclass(frozen=True)
class GatewaySettings:
    """A gateway's settings (``intentusnet gateway`` makes them of its options).

    Attributes:
        upstreams: the APIs forwarded to, by name.
        mode: the transports' mode: record, replay or cache.
        tenant_key: the key of the tenants' HMAC; ``None`` shares the cache
            across credentials (``--shared-cache``).
        max_body: larger request bodies are refused (413).
        timeout: seconds an upstream may take to answer (and between chunks).
        redactor: body paths and headers recorded as markers.
        keys: the gateway's own API keys, sent in ``x-intentusnet-key``
            (none configured: no key is asked for). A read-only key's
            requests are answered from the records only, as in replay mode.
        max_concurrency: requests answered at once at most (more get 503);
            ``None``: no limit.
        prices: the price table ``/metrics`` prices saved tokens with.
        pace: ``recorded``: a recorded event stream is answered at the pace its
            events came when it was recorded; ``fast`` (the default): at once.
        credentials: which header and query-parameter names carry
            credentials: never recorded, and the request's tenant.
    """

    upstreams: Mapping[str, Upstream]
    mode: TransportMode = TransportMode.CACHE
    tenant_key: bytes | None = None
    max_body: int = DEFAULT_MAX_BODY
    timeout: float = 600.0
    redactor: Redactor | None = None
    keys: KeyRing = field(default_factory=KeyRing)
    max_concurrency: int | None = DEFAULT_MAX_CONCURRENCY
    prices: PriceTable | None = None
    pace: Pace = Pace.FAST
    credentials: CredentialRule = DEFAULT_RULE


def tenant_of(
    key: bytes,
    headers: Iterable[tuple[bytes, bytes]],
    query: str = "",
    rule: CredentialRule = DEFAULT_RULE,
) -> str:
    """A request's tenant: the keyed HMAC of its credentials, or :data:`ANONYMOUS`.

    ``key`` is the tenant key's bytes exactly as the gateway uses them: as
    :func:`tenant_key` reads its file, without the trailing newline (read the
    file with it, not as it is: with the newline it is another key, so
    another tenant). ``headers`` are the request's raw ``(name, value)`` pairs, as
    sent (``(b"authorization", b"Bearer sk-...")``), ``query`` its query
    string; every header and parameter ``rule`` names counts, in any order.
    A request carrying none has the anonymous tenant, shared by such requests
    only. The transports take the same value as their ``tenant`` argument, so
    a Python client keyed the same way shares the gateway's records.
    """
    mac = hmac.new(key, digestmod=hashlib.sha256)
    found = False
    for name, value in sorted(
        (name.lower(), value) for name, value in headers if rule(name.decode("latin-1"))
    ):
        found = True
        mac.update(name + b"\0" + value + b"\0")
    for param, text in sorted(
        (param.lower(), text)
        for param, text in parse_qsl(query, keep_blank_values=True)
        if rule(param)
    ):
        found = True
        mac.update(f"?{param}\0{text}\0".encode())
    return f"credential:{mac.hexdigest()[:32]}" if found else ANONYMOUS


def tenant_key(path: str | Path, *, create: bool = False) -> bytes:
    """The tenant key in file ``path``, as the gateway hashes with it.

    The key is the file's bytes with the whitespace around them stripped: the
    file the gateway makes holds 64 hex digits and a newline, and the key is
    the 64 digits. ``create``: make the file (random, mode 0600) if it is
    missing, as the gateway does on its first start.

    Raises:
        ValueError: the file holds fewer than 16 bytes.
        FileNotFoundError: it is missing and may not be made.
    """
    path = Path(path)
    if not path.exists() and create:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as file:
            file.write(secrets.token_hex(32) + "\n")
    key = path.read_bytes().strip()
    if len(key) < _MIN_KEY:
        raise ValueError(
            f"the tenant key in {str(path)!r} is shorter than {_MIN_KEY} bytes"
        )
    return key
