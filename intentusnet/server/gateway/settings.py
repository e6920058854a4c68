"""What a gateway is made of: its upstreams, its mode, its tenancy and limits.

An upstream is ``NAME=URL``: requests to ``/NAME/rest`` go to ``URL/rest``.
Tenancy scopes the cache per credential: a request's tenant is a keyed
HMAC-SHA256 of the credential headers it carries (:func:`tenant_of`), made with
the gateway's tenant key, so the credential itself is never hashed unkeyed,
stored nor logged; the tenant is hashed with every request, as the transports'
``tenant`` argument is.
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

from ...cache.prices import PriceTable
from ...integrations.httpx import TransportMode
from ...routing.redact import Redactor
from ..auth import KeyRing
from .upstream import Upstream

__all__ = [
    "CREDENTIAL_HEADERS",
    "DEFAULT_MAX_BODY",
    "DEFAULT_MAX_CONCURRENCY",
    "TENANT_KEY_FILE",
    "GatewaySettings",
    "Pace",
    "tenant_key",
    "tenant_of",
]

#: Request headers whose values say who is calling (any case): their keyed
#: HMAC is the request's tenant.
CREDENTIAL_HEADERS: Final = ("authorization", "x-api-key", "api-key", "x-goog-api-key")
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


def tenant_of(key: bytes, headers: Iterable[tuple[bytes, bytes]]) -> str | None:
    """A request's tenant: the keyed HMAC of its credential headers, or ``None``.

    ``headers`` are the request's raw ``(name, value)`` pairs. A request
    carrying no credential header has no tenant (like a transport's default).
    The transports take the same value as their ``tenant`` argument, so a
    Python client keyed the same way shares the gateway's records.
    """
    mac = hmac.new(key, digestmod=hashlib.sha256)
    found = False
    for name, value in sorted(
        (name.lower(), value)
        for name, value in headers
        if name.lower().decode("latin-1") in CREDENTIAL_HEADERS
    ):
        found = True
        mac.update(name + b"\0" + value + b"\0")
    return f"credential:{mac.hexdigest()[:32]}" if found else None


def tenant_key(path: Path, *, create: bool) -> bytes:
    """The tenant key in ``path``: made (random, mode 0600) if missing and allowed.

    Raises:
        ValueError: the file holds fewer than 16 bytes.
        FileNotFoundError: it is missing and may not be made.
    """
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
