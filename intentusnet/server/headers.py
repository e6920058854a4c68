"""The request headers of durable executions: ``Idempotency-Key`` and ``Prefer``.

``Idempotency-Key`` is the IETF httpapi draft's header
(draft-ietf-httpapi-idempotency-key-header): an RFC 8941 structured-field
*string*, ``Idempotency-Key: "order-7"``. A bare token of visible ASCII,
``Idempotency-Key: order-7``, is accepted too (many clients send one) and
names the same key. The key itself is what ``route_intent(idempotency_key=)``
takes: 1 to 255 printable ASCII characters. Anything else is refused with
``InvalidIdempotencyKey`` (HTTP 400) naming the header and the fault, before
anything runs.

``Prefer`` is RFC 7240's: ``respond-async`` asks for ``202 Accepted`` as soon
as the execution is recorded; every other preference is ignored, as the RFC
allows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..errors import InvalidIdempotencyKey
from ..store.durable import check_idempotency_key

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = [
    "IDEMPOTENCY_KEY",
    "idempotency_key",
    "parse_idempotency_key",
    "prefers_async",
]

#: The header's name, as the draft spells it.
IDEMPOTENCY_KEY: Final = "Idempotency-Key"


def idempotency_key(request: Request) -> str | None:
    """The request's idempotency key, or ``None`` without the header.

    Raises:
        InvalidIdempotencyKey: the header is sent more than once, or its value
            is not a key (see :func:`parse_idempotency_key`).
    """
    values = request.headers.getlist(IDEMPOTENCY_KEY)
    if not values:
        return None
    if len(values) > 1:
        raise InvalidIdempotencyKey(
            f"the {IDEMPOTENCY_KEY} header is sent {len(values)} times; send it once"
        )
    return parse_idempotency_key(values[0])


def parse_idempotency_key(value: str) -> str:
    """The key a header value names: ``"order-7"`` (sf-string) or ``order-7``.

    Raises:
        InvalidIdempotencyKey: naming the header and what is wrong.
    """
    text = value.strip(" \t")
    try:
        key = _sf_string(text) if text.startswith('"') else _token(text)
        return check_idempotency_key(key)
    except InvalidIdempotencyKey as exc:
        raise InvalidIdempotencyKey(f"the {IDEMPOTENCY_KEY} header: {exc}") from None


def _sf_string(text: str) -> str:
    """An RFC 8941 string (section 4.2.5), with no parameters after it."""
    chars: list[str] = []
    index = 1
    while index < len(text):
        char = text[index]
        if char == "\\":
            escaped = text[index + 1 : index + 2]
            if escaped not in ('"', "\\"):
                raise InvalidIdempotencyKey(
                    'in a quoted key, \\ escapes only " and \\, '
                    f"not {escaped or 'the end'!r}"
                )
            chars.append(escaped)
            index += 2
            continue
        if char == '"':
            if index + 1 < len(text):
                raise InvalidIdempotencyKey(
                    "nothing may follow the closing quote (no parameters), "
                    f"found {text[index + 1 : index + 11]!r}"
                )
            return "".join(chars)
        if not " " <= char <= "~":
            raise InvalidIdempotencyKey(
                f"an idempotency key is printable ASCII (space to '~'); "
                f"character {len(chars)} is {char!r}"
            )
        chars.append(char)
        index += 1
    raise InvalidIdempotencyKey("a quoted key has no closing quote")


def _token(text: str) -> str:
    """A bare key: visible ASCII (``!`` to ``~``) but ``"``."""
    for index, char in enumerate(text):
        if not "!" <= char <= "~" or char == '"':
            raise InvalidIdempotencyKey(
                "an unquoted key is visible ASCII ('!' to '~') without '\"'; "
                f"character {index} is {char!r} (quote the key: "
                '"..." with \\" and \\\\ escaped)'
            )
    return text


def prefers_async(request: Request) -> bool:
    """Whether the request's ``Prefer`` headers ask for ``respond-async``."""
    for value in request.headers.getlist("Prefer"):
        for preference in value.split(","):
            name = preference.split(";", 1)[0].split("=", 1)[0]
            if name.strip().lower() == "respond-async":
                return True
    return False
