"""What ``inspect`` shows: a record's header, its events as a timeline, its answer.

Each event becomes one row (offset, type, agent, duration, outcome, detail);
failed attempts carry their error and recorded traceback. This is a view of the
record's own data: nothing is computed that the record does not hold.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .._util.jsonvalue import JSONObject, JSONValue, as_float
from .output import emit_json, ms, status_text

if TYPE_CHECKING:
    from ..record.model import ExecutionEvent, ExecutionRecord

_OUTCOME_COLOURS = {"success": "green", "error": "red", "timeout": "red"}


def _text(data: JSONObject, key: str) -> str | None:
    value = data.get(key)
    return None if value is None else str(value)


def _object(data: JSONObject, key: str) -> JSONObject | None:
    value = data.get(key)
    return value if isinstance(value, dict) else None


def _detail(event: ExecutionEvent) -> str | None:
    data, kind = event.data, event.type.value
    if kind == "ROUTER_DECISION":
        candidates = data.get("candidates")
        names = ", ".join(map(str, candidates)) if isinstance(candidates, list) else ""
        reason = data.get("reason")
        return f"{data.get('strategy')} [{names}]" + (f" ({reason})" if reason else "")
    if kind == "FALLBACK_TRIGGERED":
        return f"{data.get('from')} -> {data.get('to')} ({data.get('reason')})"
    if kind == "FINAL_RESPONSE":
        response = _object(data, "response") or {}
        return f"status {response.get('status')}"
    if kind == "CACHE_HIT":
        return f"from {data.get('sourceExecutionId')}"
    if kind == "INVALIDATED":
        return _text(data, "reason")
    if kind == "SIGNATURE":
        seq = as_float(data.get("seq"))
        line = "?" if seq is None else f"{seq + 1:.0f}"
        return f"{data.get('keyId')} signs lines 1-{line}"
    if kind == "RECORDING_FAILURE":
        return _text(data, "error")
    if kind == "INTENT_RECEIVED":
        return _text(data, "requestId")
    if kind.startswith("STEP_"):
        return _step_detail(data)
    attempt = data.get("attempt")
    return None if attempt is None else f"attempt {attempt}"


_STEP_SOURCES = {"record": " [from record]", "miss": " [no recording]"}


def _step_detail(data: JSONObject) -> str:
    text = f"{data.get('name')} (step {data.get('step')})"
    if data.get("liveMiss") is True:
        return text + " [ran live: no recording]"
    return text + _STEP_SOURCES.get(str(data.get("source")), "")


def timeline_row(event: ExecutionEvent) -> JSONObject:
    """Return one event as a timeline row (the ``inspect --json`` form)."""
    data = event.data
    return {
        "seq": event.seq,
        "offsetMs": event.at_ms,
        "type": event.type.value,
        "agent": _text(data, "agent"),
        "durationMs": as_float(data.get("durationMs")),
        "outcome": _text(data, "outcome"),
        "detail": _detail(event),
        "error": _object(data, "error"),
        "traceback": _text(data, "traceback"),
    }


def timeline_json(record: ExecutionRecord) -> JSONObject:
    """Return what ``inspect --json`` prints."""
    rows: list[JSONValue] = [timeline_row(event) for event in record.events]
    return {
        "header": record.header.to_json(),
        "fingerprint": record.fingerprint,
        "replayOf": record.replay_of,
        "timeline": rows,
        "finalResponse": record.final_response,
        "tornTail": record.torn_tail,
    }


def print_inspection(record: ExecutionRecord) -> None:
    """Print a record for people: header, timeline, errors, final response."""
    header = record.header
    reason = header.replayable_reason
    replayable = (
        "yes" if header.replayable else f"no ({reason.value if reason else '?'})"
    )
    fields = [
        ("intent", f"{header.intent_name}@{header.intent_version}"),
        ("status", status_text(header.status.value)),
        ("replayable", replayable),
        ("created", header.created_utc),
        ("completed", header.completed_utc or "-"),
        ("agent", header.agent or "-"),
        ("duration", ms(header.duration_ms)),
        ("envelope", header.envelope_hash),
        ("parent", header.parent_execution_id or "-"),
        ("replay of", record.replay_of or "-"),
        ("fingerprint", record.fingerprint),
        ("config", _configuration(header.configuration)),
        ("signed by", header.key_id or "- (unsigned)"),
    ]
    click.secho(f"Execution {header.execution_id}", bold=True)
    for name, value in fields:
        click.echo(f"  {name + ':':<13}{value}")
    click.secho("\nTimeline", bold=True)
    for event in record.events:
        print_row(timeline_row(event))
    if record.torn_tail:
        click.secho("  (the last line was torn by a crash and left out)", fg="yellow")
    from ..integrations.mcp.view import is_session  # not at --help time

    if is_session(record):
        print_calls(record)
    click.secho("\nFinal response", bold=True)
    if record.final_response is None:
        click.echo("  none: the execution did not finish")
    else:
        emit_json(record.final_response)


def print_calls(record: ExecutionRecord) -> None:
    """An MCP session's calls, one line each (docs/mcp.md).

    What the server sent during a call (progress, its own requests) is
    indented under it; a side effect and a call served from a record say so.
    """
    from ..integrations.mcp.view import session_calls

    click.secho("\nCalls", bold=True)
    for call in session_calls(record):
        marks = " [side effect]" if call.side_effect else ""
        marks += " [from record]" if call.served else ""
        duration = "" if call.duration_ms is None else ms(call.duration_ms)
        indent = "  " if call.parent is not None else ""
        cells = [
            f"{call.start_ms:>10.3f} ms",
            f"{duration:>9}",
            click.style(
                f"{call.outcome:<11}", fg=_OUTCOME_COLOURS.get(call.outcome, "yellow")
            ),
            f"{indent}#{call.number} {call.label} {call.args}".rstrip() + marks,
        ]
        click.echo("  " + "  ".join(cells))
        if call.error is not None:
            click.secho(f"{' ' * 17}{call.error}", fg="red")


def _configuration(configuration: JSONObject | None) -> str:
    """``sha256:06b3... (DIRECT: qualifier 1.1, backup 1.0)``, or ``-``."""
    if configuration is None:
        return "-"
    found = configuration.get("agents")
    agents = found if isinstance(found, list) else []
    listed = ", ".join(
        f"{agent.get('name')} {agent.get('version')}"
        for agent in agents
        if isinstance(agent, dict)
    )
    fingerprint = str(configuration.get("fingerprint"))
    return f"{fingerprint[:23]}... ({configuration.get('strategy')}: {listed})"


def print_row(row: JSONObject) -> None:
    """Print one timeline row, with its error and traceback if it has them."""
    offset, duration, outcome = row["offsetMs"], row["durationMs"], row["outcome"]
    cells = [
        f"{offset:>10.3f} ms" if isinstance(offset, float | int) else f"{'?':>13}",
        f"{row['type']:<20}",
        f"{row['agent'] or '':<12}",
        f"{ms(duration) if isinstance(duration, float) else '':>9}",
        click.style(f"{outcome or '':<9}", fg=_OUTCOME_COLOURS.get(str(outcome))),
        str(row["detail"] or ""),
    ]
    click.echo("  " + "  ".join(cells).rstrip())
    indent = " " * 17
    error = row["error"]
    if isinstance(error, dict):
        kind = error.get("code") or error.get("type")  # an attempt's, or a step's
        click.secho(f"{indent}{kind}: {error.get('message')}", fg="red")
    traceback = row["traceback"]
    if isinstance(traceback, str):
        for line in traceback.rstrip().splitlines():
            click.echo(f"{indent}{line}")
