"""Telling a PostgreSQL URL from a path, and showing a URL without its password.

Below both :mod:`.naming` and :mod:`.file`: the file store refuses a URL for a
root, and :func:`.naming.open_store` (which imports the file store) opens one.
"""

from __future__ import annotations

import os
import re
from typing import Final

#: URL schemes that name a PostgreSQL store (libpq accepts both).
URL_SCHEMES: Final = ("postgresql://", "postgres://")
# The user-info of a URL ("user:password@"), and a password given as a parameter.
# Patterns, not compiled ones: ``re`` compiles them on first use, so opening a
# file store (``intentusnet replay ID``) does not pay for them.
__all__ = ["URL_SCHEMES", "is_url", "public_url", "scrub"]

_USERINFO: Final = r"(?i)^(postgres(?:ql)?://)([^/?#]*)@"
_PASSWORD_PARAM: Final = r"(?i)([?&]password=)[^&#]*"


def is_url(name: str | os.PathLike[str] | None) -> bool:
    """Whether ``name`` is a PostgreSQL URL rather than a path (added in 0.1.0)."""
    return isinstance(name, str) and name.lower().startswith(URL_SCHEMES)


def public_url(url: str) -> str:
    """``url`` without its password, fit for messages and logs (added in 0.1.0).

    >>> public_url("postgresql://app:s3cret@db.internal:5432/records")
    'postgresql://app@db.internal:5432/records'
    """
    match = re.match(_USERINFO, url)
    if match is not None:
        user = match.group(2).partition(":")[0]
        url = f"{match.group(1)}{user}@{url[match.end() :]}"
    return re.sub(_PASSWORD_PARAM, r"\1***", url)


def scrub(message: str, url: str) -> str:
    """``message`` with every form of the URL's password replaced by ``***``."""
    from urllib.parse import unquote

    secrets = []
    match = re.match(_USERINFO, url)
    if match is not None and ":" in match.group(2):
        secrets.append(match.group(2).partition(":")[2])
    secrets += [m.group(0).partition("=")[2] for m in re.finditer(_PASSWORD_PARAM, url)]
    for secret in secrets:
        for form in {secret, unquote(secret)}:
            if form:
                message = message.replace(form, "***")
    return message
