"""API keys: who may call the service, and whether they may route or only read.

Keys are bearer tokens (``Authorization: Bearer <key>``). They come from the
``INTENTUSNET_API_KEYS`` environment variable (entries separated by commas or
whitespace) and from a file named by ``INTENTUSNET_API_KEYS_FILE`` (one entry a
line, ``#`` starts a comment). An entry ``ro:<key>`` is a read-only key: it can
list, show, verify and replay executions but not route intents. A presented
token is compared with every key in constant time.

With no key configured, the service answers only on loopback addresses
(:func:`check_bind` refuses anything else before a socket is bound).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
import os
import re
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path
from typing import Final

from ..errors import Forbidden, Unauthorized

__all__ = [
    "KEYS_ENV",
    "KEYS_FILE_ENV",
    "Access",
    "KeyRing",
    "check_bind",
    "is_loopback",
]

_log = logging.getLogger("intentusnet.server")

KEYS_ENV: Final = "INTENTUSNET_API_KEYS"
KEYS_FILE_ENV: Final = "INTENTUSNET_API_KEYS_FILE"
#: Shorter keys are refused: a guessable key is worse than none, which at least
#: keeps the service on loopback.
MIN_KEY_LENGTH: Final = 16
_READ_ONLY_PREFIX: Final = "ro:"
_SEPARATORS: Final = re.compile(r"[\s,]+")
_BEARER: Final = re.compile(r"Bearer[ \t]+(\S+)[ \t]*", re.IGNORECASE)


class Access(IntEnum):
    """What a key may do; a higher level includes the lower ones."""

    READ = 1
    ROUTE = 2


@dataclass(frozen=True, slots=True)
class _Key:
    digest: bytes
    access: Access


class KeyRing:
    """The API keys a service accepts, kept as SHA-256 digests.

    Args:
        keys: ``(key, access)`` pairs.

    Raises:
        ValueError: a key is shorter than 16 characters or holds whitespace.
    """

    def __init__(self, keys: Iterable[tuple[str, Access]] = ()) -> None:
        found: list[_Key] = []
        for key, access in keys:
            if len(key) < MIN_KEY_LENGTH or _SEPARATORS.search(key):
                raise ValueError(
                    f"API keys must be at least {MIN_KEY_LENGTH} characters without "
                    f"whitespace or commas (a key of {len(key)} characters was given)"
                )
            found.append(_Key(_digest(key), access))
        self._keys = tuple(found)

    @classmethod
    def parse(cls, text: str) -> KeyRing:
        """Read entries (``key`` or ``ro:key``) separated by commas or whitespace.

        Lines are cut at ``#``, so a key file may hold comments.

        Raises:
            ValueError: as for the constructor.
        """
        entries: list[tuple[str, Access]] = []
        for line in text.splitlines():
            for entry in _SEPARATORS.split(line.split("#", 1)[0]):
                if not entry:
                    continue
                if entry.startswith(_READ_ONLY_PREFIX):
                    entries.append((entry[len(_READ_ONLY_PREFIX) :], Access.READ))
                else:
                    entries.append((entry, Access.ROUTE))
        return cls(entries)

    @classmethod
    def from_env(
        cls, environ: Mapping[str, str] | None = None, keys_file: str | None = None
    ) -> KeyRing:
        """Keys from ``INTENTUSNET_API_KEYS`` and a key file.

        Args:
            environ: the environment to read; ``os.environ`` by default.
            keys_file: the key file; ``INTENTUSNET_API_KEYS_FILE`` by default.

        Raises:
            ValueError: a key is too short.
            OSError: the key file cannot be read.
        """
        env = os.environ if environ is None else environ
        text = env.get(KEYS_ENV, "")
        path = keys_file or env.get(KEYS_FILE_ENV)
        if path:
            file = Path(path)
            mode = file.stat().st_mode
            if mode & (stat.S_IRWXG | stat.S_IRWXO):
                _log.warning(
                    "API key file %s is readable by other users; chmod 600 it", path
                )
            text += "\n" + file.read_text(encoding="utf-8")
        return cls.parse(text)

    def __bool__(self) -> bool:
        return bool(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def access_of(self, token: str) -> Access | None:
        """The access a presented token grants, or ``None`` for an unknown token.

        Every key is compared, matching or not, in constant time.
        """
        presented = _digest(token)
        granted: Access | None = None
        for key in self._keys:
            if hmac.compare_digest(presented, key.digest) and (
                granted is None or key.access > granted
            ):
                granted = key.access
        return granted

    def bearer_access(self, authorization: str | None) -> Access | None:
        """The access an ``Authorization: Bearer <key>`` value grants, if any."""
        match = _BEARER.fullmatch(authorization or "")
        return None if match is None else self.access_of(match.group(1))

    def name_of(self, authorization: str | None) -> str | None:
        """A known bearer key's name: ``api-key:`` and 12 hex digits of its SHA-256.

        What an operator's decision records as who made it; ``None`` for no
        key or an unknown one. Added in 0.1.0.
        """
        match = _BEARER.fullmatch(authorization or "")
        if match is None or self.access_of(match.group(1)) is None:
            return None
        return "api-key:" + _digest(match.group(1)).hex()[:12]

    def authorize(self, authorization: str | None, needed: Access) -> None:
        """Check an ``Authorization`` header value for ``needed`` access.

        Raises:
            Unauthorized: no bearer token, or an unknown one.
            Forbidden: the key may not do this.
        """
        match = _BEARER.fullmatch(authorization or "")
        if match is None:
            raise Unauthorized(
                "this service needs an API key: send 'Authorization: Bearer <key>'"
            )
        access = self.access_of(match.group(1))
        if access is None:
            raise Unauthorized("the API key is not valid")
        if access < needed:
            raise Forbidden(
                "this API key is read-only: it can list, show, verify and replay "
                "executions, not route intents"
            )


def _digest(key: str) -> bytes:
    # Comparing digests keeps the comparison constant-time whatever the lengths.
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine only: ``127.0.0.0/8``, ``::1``, localhost."""
    name = host.strip().strip("[]").lower()
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def check_bind(host: str, keys: KeyRing) -> None:
    """Refuse to serve on a non-loopback address without API keys.

    Raises:
        ValueError: ``host`` is not loopback and no key is configured.
    """
    if not keys and not is_loopback(host):
        raise ValueError(
            f"refusing to serve on {host!r} without an API key: set {KEYS_ENV} or "
            f"{KEYS_FILE_ENV} (or --api-keys-file), or bind to 127.0.0.1"
        )
