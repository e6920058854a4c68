"""Reading request bodies: bounded in size, parsed with exact integers.

The limit is checked against ``Content-Length`` before anything is read, and
again while a chunked body streams in, so an oversized body is refused without
being held in memory. The parser (``parse_json``) keeps integers exact, so a
30-digit integer is refused as the library refuses it, never rounded to a
float; it refuses nesting deeper than about 200 levels, so hostile nesting
cannot exhaust the stack.
"""

from __future__ import annotations

from typing import Final

from starlette.requests import ClientDisconnect, Request

from .._util.jsonvalue import JSONValue, parse_json
from ..errors import ClientDisconnected, MalformedRequest, RequestTooLarge

__all__ = ["DEFAULT_MAX_BODY", "read_json"]

#: Default request body limit: 1 MiB.
DEFAULT_MAX_BODY: Final = 1024 * 1024


def _too_large(limit: int) -> RequestTooLarge:
    return RequestTooLarge(f"the request body is larger than {limit} bytes")


async def read_json(request: Request, limit: int) -> JSONValue | None:
    """Read the body as JSON, whatever its ``Content-Type``; ``None`` if empty.

    Raises:
        RequestTooLarge: the body is over ``limit`` bytes.
        MalformedRequest: the body is not JSON (or ``Content-Length`` is bad).
        ClientDisconnected: the client hung up before sending the whole body.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        if not declared.isdigit():
            raise MalformedRequest("Content-Length is not a number")
        if int(declared) > limit:
            raise _too_large(limit)
    chunks: list[bytes] = []
    size = 0
    try:
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
    except ClientDisconnect:
        of = f" of {declared}" if declared is not None else ""
        raise ClientDisconnected(
            f"the client hung up after sending {size}{of} bytes of the request body"
        ) from None
    data = b"".join(chunks)
    if not data.strip():
        return None
    try:
        return parse_json(data)
    except ValueError as exc:
        raise MalformedRequest(f"the request body is not valid JSON: {exc}") from None
