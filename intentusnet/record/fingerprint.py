"""The fingerprint of an execution: what it did, as one hash.

A fingerprint hashes the decision path and the steps of an execution, in
order, and nothing volatile (no ids, times or durations), so two runs with the
same fingerprint decided the same way and made the same calls with the same
results. It is computed from a record's event lines alone: the recorder
computes it while writing and stores it in the ``FINAL_RESPONSE`` line, and the
reader computes the same value for a record without one (unfinished, or written
before fingerprints existed) when it assembles the record.

The hashed value is the RFC 8785 JSON of ``[1, entry, ...]``, one entry per
event, in record order (docs/records.md):

* ``ROUTER_DECISION`` -> ``["decision", strategy, candidate, ...]``
* ``AGENT_ATTEMPT_END`` -> ``["attempt", agent, outcome]``
* ``STEP_END`` -> ``["step", name, argsHash, outputHash, errorType]``
* ``FINAL_RESPONSE`` -> ``["final", status]``

Missing values are written as ``""``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import orjson

from .._util.jsonvalue import JSONObject, JSONValue
from ..hashing import canonical_json, hash_bytes
from .model import EventType, ExecutionEvent

__all__ = [
    "FINGERPRINT_VERSION",
    "PATH_EVENTS",
    "compute_fingerprint",
    "fingerprint",
    "path_entry",
    "record_fingerprint",
]

#: The version of the fingerprint construction, the first item hashed.
FINGERPRINT_VERSION: Final = 1
#: Event types that contribute an entry (besides ``FINAL_RESPONSE``).
PATH_EVENTS: Final = frozenset({"ROUTER_DECISION", "AGENT_ATTEMPT_END", "STEP_END"})


def _text(value: JSONValue | None) -> str:
    return value if isinstance(value, str) else ""


def path_entry(kind: str, data: JSONObject) -> list[JSONValue]:
    """Return the fingerprint entry of one event of a type in ``PATH_EVENTS``."""
    if kind == "STEP_END":  # once per step while recording: kept cheap
        name = data.get("name")
        args = data.get("argsHash")
        output = data.get("outputHash")
        error = data.get("error")
        error_type = error.get("type") if type(error) is dict else None
        return [
            "step",
            name if type(name) is str else "",
            args if type(args) is str else "",
            output if type(output) is str else "",
            error_type if type(error_type) is str else "",
        ]
    if kind == "AGENT_ATTEMPT_END":
        return ["attempt", _text(data.get("agent")), _text(data.get("outcome"))]
    candidates = data.get("candidates")
    names = candidates if isinstance(candidates, list) else []
    return ["decision", _text(data.get("strategy")), *map(_text, names)]


def fingerprint(entries: list[JSONValue], final_status: str | None) -> str:
    """Hash the entries of an execution, and its final status if it finished."""
    body: list[JSONValue] = [FINGERPRINT_VERSION, *entries]
    if final_status is not None:
        body.append(["final", final_status])
    # Lists of strings and one small int: no keys to sort and no floats, the
    # shapes where orjson's output and RFC 8785 agree byte for byte, so the
    # walk canonical_json makes first (here over every step) is not needed.
    try:
        return hash_bytes(orjson.dumps(body))
    except orjson.JSONEncodeError:
        return hash_bytes(canonical_json(body))  # raises, naming the bad value


def compute_fingerprint(
    events: Sequence[ExecutionEvent], final_response: JSONObject | None
) -> str:
    """Compute a record's fingerprint from its events, ignoring any stored one."""
    entries: list[JSONValue] = [
        path_entry(event.type.value, event.data)
        for event in events
        if event.type.value in PATH_EVENTS
    ]
    status = None if final_response is None else _text(final_response.get("status"))
    return fingerprint(entries, status)


def record_fingerprint(
    events: Sequence[ExecutionEvent], final_response: JSONObject | None
) -> str:
    """Return the fingerprint stored in a record's final line, or compute it."""
    for event in reversed(events):
        if event.type is EventType.FINAL_RESPONSE:
            stored = event.data.get("fingerprint")
            if isinstance(stored, str):
                return stored
            break
    return compute_fingerprint(events, final_response)
