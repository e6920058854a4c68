"""An MCP session record as people read it: a timeline of its calls.

``intentusnet inspect`` prints it under "Calls" and the explorer's record page
draws it (one bar per call). Everything comes from the record's own steps
(``record_steps``): nothing is computed that the record does not hold. A tool
that failed inside the server answers a result with ``"isError": true``: the
call went through (the step succeeded) but the tool failed, and that is what
is shown.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import orjson

from ...steps.view import record_steps
from .jsonrpc import ASKED_BY, FROM_SERVER

if TYPE_CHECKING:
    from ..._util.jsonvalue import JSONValue
    from ...record.model import ExecutionRecord
    from ...steps.view import RecordedStep

__all__ = [
    "SESSION_INTENT",
    "CallView",
    "brief",
    "call_view",
    "is_session",
    "session_calls",
]

#: The intent of every MCP session record (``proxy.INTENT``).
SESSION_INTENT: Final = "mcp.session"
#: How many characters of a call's arguments are shown.
ARGS_WIDTH: Final = 80


@dataclass(frozen=True, slots=True)
class CallView:
    """One call of an MCP session, as shown.

    Attributes:
        number: the step's number; ``parent`` that of the call it was made
            during (a progress notification, a request of the server's own).
        label: ``tools/call search``, ``resources/read``, ``progress``, ...
        args: the arguments in short (``ARGS_WIDTH`` characters at most).
        start_ms: when it started (from the record's opening).
        duration_ms: how long it took, ``None`` if it never ended.
        outcome: ``success``, ``error`` (a JSON-RPC error, or a tool's
            ``isError``), ``cancelled`` or ``unfinished``.
        error: what went wrong, or ``None``.
        side_effect: recorded as a side effect (never answered from a cache).
        served: answered from an earlier record, not by the server.
    """

    number: int
    parent: int | None
    label: str
    args: str
    start_ms: float
    duration_ms: float | None
    outcome: str
    error: str | None
    side_effect: bool
    served: bool


def brief(value: JSONValue, width: int = ARGS_WIDTH) -> str:
    """``value`` as compact JSON, cut to ``width`` characters with ``…``."""
    text = orjson.dumps(value).decode() if value not in ({}, None) else ""
    return text if len(text) <= width else text[: width - 1] + "…"


def is_session(record: ExecutionRecord) -> bool:
    """The record is a session of ``intentusnet mcp proxy``."""
    return record.header.intent_name == SESSION_INTENT


def call_view(step: RecordedStep, start_ms: float) -> CallView:
    """How one step of a session is shown."""
    name = step.name.removeprefix("mcp:")
    if step.name.startswith(FROM_SERVER):
        label = "server asks " + step.name.removeprefix(FROM_SERVER)
    elif name.startswith("notifications/progress"):
        label = "progress"
    else:
        method, _, named = name.partition(":")
        label = f"{method} {named}" if named else method
    outcome, error = step.outcome, step.error_text or None
    output = step.output
    if step.ok and isinstance(output, dict) and output.get("isError") is True:
        outcome, error = "error", f"tool error: {_first_text(output)}"
    return CallView(
        number=step.number,
        parent=step.parent,
        label=label,
        args=brief(step.args),
        start_ms=start_ms,
        duration_ms=step.duration_ms,
        outcome=outcome,
        error=error,
        side_effect=step.side_effect,
        served=step.source == "record",
    )


def session_calls(record: ExecutionRecord) -> list[CallView]:
    """The calls of an MCP session record, in the order they started.

    A call's ``mcp:asked-by`` (its revision, its client) is not shown.
    """
    at = {event.seq: event.at_ms for event in record.events}
    return [
        call_view(step, at.get(step.start_seq, 0.0))
        for step in record_steps(record)
        if step.name.startswith("mcp:") and step.name != ASKED_BY
    ]


def _first_text(result: dict[str, JSONValue]) -> str:
    content = result.get("content")
    for item in content if isinstance(content, list) else ():
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            return str(item["text"])
    return "isError"
