"""An API the gateway forwards to, given as ``NAME=URL`` (``--upstream``).

Standard library only: ``intentusnet gateway`` reads its ``--upstream`` options
with it before it imports the gateway's app, so a mistyped one is said at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

__all__ = ["Upstream", "upstreams_of"]

_NAME: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class Upstream:
    """An API the gateway forwards to: ``/NAME/rest`` goes to ``URL/rest``."""

    name: str
    url: str

    @classmethod
    def parse(cls, text: str) -> Upstream:
        """Read ``NAME=URL``.

        Raises:
            ValueError: not of that form; a name other than letters, digits,
                ``.``, ``_`` and ``-``; a URL not ``http(s)://host[/path]``
                or one with a query, a fragment or user info.
        """
        name, equals, url = text.partition("=")
        name, url = name.strip(), url.strip()
        if not equals or not _NAME.fullmatch(name) or name in (".", ".."):
            raise ValueError(
                f"--upstream takes NAME=URL with a NAME of letters, digits, '.', '_' "
                f"and '-' (e.g. openai=https://api.openai.com), not "
                f"{_without_user_info(text)!r}"
            )
        parts = urlsplit(url)
        if (
            parts.scheme not in ("http", "https")
            or not parts.hostname
            or parts.query
            or parts.fragment
            or "@" in parts.netloc
        ):
            raise ValueError(
                f"upstream {name!r}: {_without_user_info(url)!r} is not an http(s) "
                "URL without query, fragment or user info (a key goes in the "
                "client's headers, never in the upstream's URL)"
            )
        return cls(name, url.rstrip("/"))


def _without_user_info(text: str) -> str:
    """``text`` with a URL's user info and query hidden (``//***@``, ``?***``).

    A refused ``--upstream`` is quoted back to the user: never its password,
    nor a key in its query.
    """
    return re.sub(r"\?[^#]*", "?***", re.sub(r"//[^/?#]*@", "//***@", text))


def upstreams_of(texts: Iterable[str]) -> dict[str, Upstream]:
    """The upstreams given as ``NAME=URL`` texts, by name.

    Raises:
        ValueError: a malformed upstream, a name given twice, or none at all.
    """
    found: dict[str, Upstream] = {}
    for text in texts:
        upstream = Upstream.parse(text)
        if upstream.name in found:
            raise ValueError(f"upstream {upstream.name!r} is given twice")
        found[upstream.name] = upstream
    if not found:
        raise ValueError("give at least one --upstream NAME=URL")
    return found
