"""The credentials a request carries: never hashed, never stored.

Headers and query parameters the credential rule names (``credentials``: any
``Authorization``, ``Cookie``, ``*key*``, ``*token*``... and the names a user
adds) are left out of what is hashed and recorded: credential headers of the
request and the response, credential parameters of the URL. The values of
both, and of the headers a ``Redactor`` names, are a call's secrets: replaced
by markers wherever they show up in its record (an error text quoting the URL,
say).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final
from urllib.parse import parse_qsl, unquote_plus, urlencode

from ...routing.redact import Redactor, header_names
from ..credentials import CredentialRule
from ._http import HTTPURL, HTTPRequest, authority

#: Canonical URLs are remembered up to this many.
_URLS_KEPT: Final = 1024


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

    def is_secret(self, name: str) -> bool:
        """Whether a header carries a credential (it is never hashed nor stored)."""
        return self.rule(name)

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
            if name in marked or self.is_secret(name):
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
