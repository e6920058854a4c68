"""``records show --format yaml|markdown``: a record's document for people to read.

Both are ``ExecutionRecord.to_json()`` (what ``records show`` prints as JSON),
written another way: YAML block text, or a Markdown page with a heading per
part and per event, each part's values in a fenced YAML block.
"""

from __future__ import annotations

import re
from typing import Final

from .._util.jsonvalue import JSONObject, JSONValue
from .._util.yamltext import yaml_text

#: The formats of ``records show --format``.
FORMATS: Final = ("json", "yaml", "markdown")


def markdown_text(document: JSONObject) -> str:
    """A record's document (``to_json()``) as a Markdown page."""
    header = _object(document.get("header"))
    intent = _object(header.get("intent"))
    title = f"{intent.get('name')}@{intent.get('version')}"
    summary = [
        f"status `{header.get('status')}`",
        "replayable" if header.get("replayable") else "not replayable",
    ]
    if header.get("agent") is not None:
        summary.append(f"agent `{header.get('agent')}`")
    if header.get("durationMs") is not None:
        summary.append(f"{header.get('durationMs')} ms")
    parts = [
        f"# {header.get('executionId')}: {title}",
        ", ".join(summary),
        "## Header",
        _fenced(header),
        "## Envelope",
        _fenced(document.get("envelope")),
        "## Events",
    ]
    events = document.get("events")
    for event in events if isinstance(events, list) else []:
        fields = _object(event)
        parts.append(
            f"### {fields.get('seq')}. {fields.get('type')} "
            f"(at {fields.get('atMs')} ms)"
        )
        if fields.get("data"):
            parts.append(_fenced(fields.get("data")))
    parts.append("## Final response")
    final = document.get("finalResponse")
    parts.append(
        _fenced(final) if final is not None else "None: the record did not finish."
    )
    if document.get("tornTail"):
        parts.append("The record's last line was cut: it is left out.")
    return "\n\n".join(parts) + "\n"


def _object(value: JSONValue) -> JSONObject:
    return value if isinstance(value, dict) else {}


def _fenced(value: JSONValue) -> str:
    """``value`` as YAML in a fence longer than any run of backticks it holds."""
    text = yaml_text(value)
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}yaml\n{text}{fence}"
