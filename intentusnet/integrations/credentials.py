"""The one rule for what is a credential: header and query-parameter names.

A name is compared in its *normal form*: lower case, with every character
other than a letter or a digit left out, so ``X-Goog-Signature``,
``x_goog_signature`` and ``XGOOGSIGNATURE`` are one name, ``xgoogsignature``.
An entry of the rule is a name (``api-key``) or a pattern with ``*`` at its
start, its end or both (``*token*``, ``auth*``, ``*tokens``), normalised alike.

A name carries a credential when, in this order:

1. it matches an entry of the rule's ``less`` (given by the user): no;
2. it matches an entry of the rule's ``more`` (given by the user): yes;
3. it matches :data:`NOT_CREDENTIALS` (counts, rate limits, page tokens): no;
4. it matches :data:`CREDENTIAL_NAMES` or :data:`CREDENTIAL_PATTERNS`: yes.

The same rule decides for headers and query parameters. The recording
transports never hash nor store what it names (headers, parameters, response
headers) and replace its values by markers wherever they show up in a record;
the gateway makes a request's tenant of every part it names
(docs/redaction.md, docs/gateway.md).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from typing import Final

__all__ = [
    "CREDENTIAL_NAMES",
    "CREDENTIAL_PATTERNS",
    "DEFAULT_RULE",
    "NOT_CREDENTIALS",
    "CredentialRule",
    "normal_name",
]

#: Names that carry credentials and that no pattern matches (any case, any
#: separators): a cookie, a proxy's credentials, a URL signature, an OAuth code.
CREDENTIAL_NAMES: Final = ("cookie", "set-cookie", "proxy-authorization", "sig", "code")
#: Any name matching one of these carries a credential (unless excepted).
CREDENTIAL_PATTERNS: Final = (
    "*token*",
    "*secret*",
    "*signature*",
    "*password*",
    "*assertion*",
    "*credential*",
    "auth*",
    "*key*",
)
#: Names the patterns match that carry no credential: token counts and rate
#: limits (response headers an SDK reads), page tokens, idempotency keys.
NOT_CREDENTIALS: Final = (
    "*ratelimit*",
    "*tokens",
    "page_token",
    "next_page_token",
    "idempotency-key",
    "x-idempotency-key",
    "keyword*",
)
#: Normal forms decided are remembered up to this many per rule.
_KEPT: Final = 4096
_NOT_NORMAL: Final = re.compile(r"[^a-z0-9]+")


def normal_name(name: str) -> str:
    """A name's normal form: lower case, letters and digits only."""
    return _NOT_NORMAL.sub("", name.lower())


class _Entries:
    """Names and patterns, normalised: what a name is checked against."""

    def __init__(self, entries: Iterable[str], where: str) -> None:
        exact: set[str] = set()
        parts: list[tuple[bool, str, bool]] = []
        for entry in entries:
            if not isinstance(entry, str):
                raise TypeError(f"{where}: {entry!r} is not a name or a pattern")
            star_start, star_end = entry.startswith("*"), entry.endswith("*")
            core = entry.strip("*")
            normal = normal_name(core)
            if "*" in core or not normal:
                raise ValueError(
                    f"{where}: {entry!r} is not a name nor a pattern with '*' at its "
                    "start or end (e.g. 'x-org-key', '*token*', 'auth*')"
                )
            if star_start or star_end:
                parts.append((star_start, normal, star_end))
            else:
                exact.add(normal)
        self.exact = frozenset(exact)
        self.patterns = tuple(parts)

    def match(self, normal: str) -> bool:
        if normal in self.exact:
            return True
        for any_start, core, any_end in self.patterns:
            if any_start and any_end:
                if core in normal:
                    return True
            elif any_start:
                if normal.endswith(core):
                    return True
            elif normal.startswith(core):
                return True
        return False


_DEFAULTS: Final = _Entries((*CREDENTIAL_NAMES, *CREDENTIAL_PATTERNS), "credentials")
_EXCEPTED: Final = _Entries(NOT_CREDENTIALS, "not credentials")


class CredentialRule:
    """Which header and query-parameter names carry credentials. Added in 0.1.0.

    Args:
        more: names or patterns that carry credentials too (they win over
            :data:`NOT_CREDENTIALS`).
        less: names or patterns that carry none, whatever else matches (a
            ``code`` parameter that is a country code, say).

    Raises:
        ValueError: an entry that is empty, or has ``*`` elsewhere than at
            its start or end.
        TypeError: an entry that is not a string, or a single string given
            where a list belongs.
    """

    __slots__ = ("_known", "_less", "_more", "less", "more")

    def __init__(self, more: Collection[str] = (), less: Collection[str] = ()) -> None:
        for given, where in ((more, "more"), (less, "less")):
            if isinstance(given, str | bytes):
                raise TypeError(f"{where} takes a list of names, not a single string")
        #: the entries given, as given
        self.more = tuple(more)
        self.less = tuple(less)
        self._more = _Entries(self.more, "more")
        self._less = _Entries(self.less, "less")
        self._known: dict[str, bool] = {}

    def __repr__(self) -> str:
        return f"CredentialRule(more={list(self.more)!r}, less={list(self.less)!r})"

    def __call__(self, name: str) -> bool:
        """Whether a header or query parameter of this name carries a credential."""
        known = self._known.get(name)
        if known is None:
            known = self._decide(normal_name(name))
            if len(self._known) >= _KEPT:
                self._known.clear()
            self._known[name] = known
        return known

    def _decide(self, normal: str) -> bool:
        if self._less.match(normal):
            return False
        if self._more.match(normal):
            return True
        return not _EXCEPTED.match(normal) and _DEFAULTS.match(normal)


#: The rule with nothing added nor taken away.
DEFAULT_RULE: Final = CredentialRule()
