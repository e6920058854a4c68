"""JSON-RPC 2.0 messages as the MCP proxy sees them, and the steps they become.

The proxy reads every message as plain JSON and never validates MCP's own
schemas: a method or a field it does not know is forwarded untouched, so a
newer protocol revision passes through unchanged.
"""

from __future__ import annotations

import re
from typing import Final, Self

import orjson

from ..._util.jsonvalue import JSONObject, JSONValue, as_int, as_str

__all__ = [
    "ANSWERED_WITH",
    "ASKED_BY",
    "CALL_METHODS",
    "FROM_SERVER",
    "LISTED_METHODS",
    "OUTDATES",
    "PROGRESS",
    "STREAM_CLOSED",
    "ClientError",
    "closed_stream",
    "continuation",
    "error",
    "id_key",
    "is_notification",
    "is_request",
    "is_response",
    "parse",
    "progress_token",
    "request_version",
    "step_of",
    "stream_closed",
    "subscription_of",
]

#: The calls keyed by their exact arguments: never served by another call's answer.
CALL_METHODS: Final = frozenset(
    {
        "tools/call",
        "resources/read",
        "prompts/get",
        "completion/complete",
        # MCP's tasks (2025-11): keyed by the task id a recorded call answered
        # with, so a replayed task's polls get its recorded states, in order
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
    }
)
#: The prefix of a request the server makes of the client, recorded as a step
#: (``mcp:from-server:sampling/createMessage``).
FROM_SERVER: Final = "mcp:from-server:"
#: A progress notification the server sent for a call, recorded as a step.
PROGRESS: Final = "mcp:notifications/progress"
#: The step nested in a forwarded call that says in which protocol revision it
#: was asked (and by which client), where the session does not say it.
ASKED_BY: Final = "mcp:asked-by"
#: The step nested in a call the server answered with a JSON-RPC error that
#: says what the step's failure does not: the HTTP status it came with (an
#: HTTP upstream's ``4xx``) and the error's ``data``.
ANSWERED_WITH: Final = "mcp:answered-with"
#: The step nested in a call whose event stream an HTTP upstream closed before
#: its answer (SEP-1699 polling), in order with what the server sent: its
#: arguments are the ``retry`` (milliseconds) the server asked for, or null.
STREAM_CLOSED: Final = "mcp:stream-closed"
#: The message an HTTP upstream queues for the session when the server closes
#: a request's event stream before its answer: the proxy's own, never sent on.
_CLOSED_METHOD: Final = "intentusnet/stream-closed"
#: Requests answered by a stream of notifications rather than a result: their
#: step ends when the client leaves, holding the notifications as its steps.
STREAMS: Final = frozenset({"subscriptions/listen"})
#: Where a notification on a ``subscriptions/listen`` stream names its request.
SUBSCRIPTION_KEY: Final = "io.modelcontextprotocol/subscriptionId"
#: Where a request of the stateless 2026-07-28 revision names its revision.
VERSION_KEY: Final = "io.modelcontextprotocol/protocolVersion"
#: Requests recorded too, so that a replayed session can start and list its
#: tools with no upstream; a replay answers them from the first recorded one
#: when the client's parameters (its name, version) differ.
LISTED_METHODS: Final = frozenset(
    {
        "initialize",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    }
)
#: The notifications from the server that say earlier answers are outdated,
#: recorded as steps of the session (``mcp:notifications/...``), and the
#: steps whose answers each outdates (a ``resources/read`` of its URI only).
OUTDATES: Final[dict[str, tuple[str, ...]]] = {
    "mcp:notifications/tools/list_changed": ("mcp:tools/list",),
    "mcp:notifications/prompts/list_changed": ("mcp:prompts/list",),
    "mcp:notifications/resources/list_changed": (
        "mcp:resources/list",
        "mcp:resources/templates/list",
    ),
    "mcp:notifications/resources/updated": ("mcp:resources/read",),
}
#: JSON-RPC's own error codes.
PARSE_ERROR: Final = -32700
INVALID_REQUEST: Final = -32600
METHOD_NOT_FOUND: Final = -32601
INTERNAL_ERROR: Final = -32603
#: Server error (the implementation-defined range): the record cannot answer.
NOT_RECORDED: Final = -32001
#: Server error: the upstream is gone.
UPSTREAM_GONE: Final = -32002
_ERROR_TEXT: Final = re.compile(r"JSON-RPC error (-?\d+): (.*)", re.DOTALL)


class _AnsweredError(Exception):
    """A JSON-RPC error answer, raised (its text is what ``error_from_text`` reads)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"JSON-RPC error {code}: {message}")
        self.code = code
        self.message = message

    @classmethod
    def of(cls, body: JSONValue) -> Self:
        """The exception of an answer's ``error`` member."""
        given = body if isinstance(body, dict) else {}
        code = given.get("code")
        return cls(
            code if isinstance(code, int) else INTERNAL_ERROR,
            str(given.get("message", "")),
        )


class UpstreamError(_AnsweredError):
    """The upstream answered a call with a JSON-RPC error (recorded as the step's)."""


class ClientError(_AnsweredError):
    """The client answered a server's request with a JSON-RPC error."""


def parse(line: bytes) -> JSONValue:
    """One JSON-RPC message from one line.

    Raises:
        ValueError: the line is not JSON.
    """
    try:
        value: JSONValue = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from None
    return value


def is_request(message: JSONValue) -> bool:
    """A request: a method and an id (an answer is owed)."""
    return isinstance(message, dict) and "method" in message and "id" in message


def is_notification(message: JSONValue) -> bool:
    """A notification: a method and no id (nothing is answered)."""
    return isinstance(message, dict) and "method" in message and "id" not in message


def is_response(message: JSONValue) -> bool:
    """A response: an id and a result or an error, no method."""
    return (
        isinstance(message, dict)
        and "method" not in message
        and "id" in message
        and ("result" in message or "error" in message)
    )


def error(
    request_id: JSONValue, code: int, message: str, data: JSONValue = None
) -> JSONObject:
    """A JSON-RPC error response."""
    body: JSONObject = {"code": code, "message": message}
    if data is not None:
        body["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": body}


def result(request_id: JSONValue, value: JSONValue) -> JSONObject:
    """A JSON-RPC result response."""
    return {"jsonrpc": "2.0", "id": request_id, "result": value}


def error_from_text(text: str) -> tuple[int, str]:
    """The code and message of a recorded ``UpstreamError`` (or any failure)."""
    found = _ERROR_TEXT.search(text)
    if found is None:
        return INTERNAL_ERROR, text
    return int(found.group(1)), found.group(2)


def step_of(method: str, params: JSONValue) -> tuple[str, JSONObject]:
    """The step a request becomes: its name and the arguments it is keyed by.

    ``tools/call`` is ``mcp:tools/call:TOOL`` keyed by the tool's arguments,
    ``prompts/get`` is ``mcp:prompts/get:PROMPT`` keyed by the prompt's,
    ``resources/read`` is ``mcp:resources/read`` keyed by ``{"uri": ...}``, and
    any other request (the listings, ``completion/complete``, ``tasks/*``,
    ``ping``, ``logging/setLevel``, ``subscriptions/listen``, a method this
    module does not know) is ``mcp:METHOD`` keyed by its parameters less
    ``_meta``.
    """
    given = params if isinstance(params, dict) else {}
    if method in ("tools/call", "prompts/get"):
        name = given.get("name")
        arguments = given.get("arguments")
        return (
            f"mcp:{method}:{name}",
            dict(arguments) if isinstance(arguments, dict) else {},
        )
    if method == "resources/read":
        return "mcp:resources/read", {"uri": given.get("uri")}
    return f"mcp:{method}", {k: v for k, v in given.items() if k != "_meta"}


def is_other(method: str) -> bool:
    """A request recorded as a step that is neither a call nor a listing.

    A replay answers it from the record when it can, as it was answered
    without one otherwise (``ping``: an empty result; anything else: the
    method is not found).
    """
    return (
        method not in LISTED_METHODS
        and method not in CALL_METHODS
        and method not in ("tools/call", "prompts/get", "resources/read")
    )


def destructive_tools(listing: JSONValue) -> set[str]:
    """The tools a ``tools/list`` result marks ``destructiveHint: true``.

    Only an explicit ``true`` counts: MCP's default (destructive unless told
    otherwise) would make every unannotated tool uncacheable.
    """
    found: set[str] = set()
    tools = listing.get("tools") if isinstance(listing, dict) else None
    for tool in tools if isinstance(tools, list) else ():
        if not isinstance(tool, dict):
            continue
        notes = tool.get("annotations")
        name = tool.get("name")
        if (
            isinstance(notes, dict)
            and notes.get("destructiveHint") is True
            and isinstance(name, str)
        ):
            found.add(name)
    return found


def request_version(message: JSONValue) -> str | None:
    """The protocol revision a request names in its ``_meta`` (2026-07-28), if any."""
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return as_str(meta.get(VERSION_KEY)) if isinstance(meta, dict) else None


def progress_token(message: JSONValue) -> JSONValue:
    """The progress token a request asks for, or a progress notification names."""
    if not isinstance(message, dict):
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    if message.get("method") == "notifications/progress":
        return params.get("progressToken")
    meta = params.get("_meta")
    return meta.get("progressToken") if isinstance(meta, dict) else None


def subscription_of(message: JSONValue) -> JSONValue:
    """The ``subscriptions/listen`` request a notification was sent for, if any.

    Its id, as the notification's ``_meta`` names it (2026-07-28).
    """
    params = message.get("params") if isinstance(message, dict) else None
    meta = params.get("_meta") if isinstance(params, dict) else None
    return meta.get(SUBSCRIPTION_KEY) if isinstance(meta, dict) else None


def continuation(message: JSONValue) -> JSONObject | None:
    """What a later round of a multi-round-trip request answers, if it is one.

    A request retried with the client's ``inputResponses`` to an
    ``InputRequiredResult`` and the server's ``requestState`` (2026-07-28):
    those two, as given. ``None`` for a first round (or any other request).
    """
    params = message.get("params") if isinstance(message, dict) else None
    if not isinstance(params, dict):
        return None
    found: JSONObject = {k: params[k] for k in _ROUNDS if k in params}
    return found or None


#: The parameters a later round of a multi-round-trip request carries.
_ROUNDS: Final = ("inputResponses", "requestState")


def stream_closed(request_id: JSONValue, retry_ms: int | None) -> JSONObject:
    """The upstream's word that it closed ``request_id``'s event stream early.

    An HTTP upstream queues it in order with the server's messages; the
    session records it (``STREAM_CLOSED``) and closes its client's stream
    there too, and never forwards it.
    """
    params: JSONObject = {"requestId": request_id, "retry": retry_ms}
    return {"jsonrpc": "2.0", "method": _CLOSED_METHOD, "params": params}


def closed_stream(message: JSONValue) -> tuple[JSONValue, int | None] | None:
    """The request and ``retry`` of a ``stream_closed`` message; None for others."""
    if not isinstance(message, dict) or message.get("method") != _CLOSED_METHOD:
        return None
    params = message.get("params")
    if not isinstance(params, dict):
        return None
    return params.get("requestId"), as_int(params.get("retry"))


def id_key(request_id: JSONValue) -> bytes:
    """A request id as a dict key: 1 and "1" are different ids, keyed by JSON text."""
    return orjson.dumps(request_id)
