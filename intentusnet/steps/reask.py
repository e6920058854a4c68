"""A recorded HTTP call, found in a record and edited, to be asked again.

A model call is recorded twice: as an ``http`` step of the agent that made it
(its arguments the request as the transport recorded it: ``method``, ``url``,
``headers``, ``json``; its output the response) and as the transport's own
record (the request in its envelope's payload, or beside the answer when a key
function made the payload). :func:`recorded_call` finds the call in either and
refuses, with the reason, what must not be sent again: a step that is not an
HTTP call, a side effect, a request whose body is not JSON. :func:`edited`
applies ``PATH=JSON`` edits to the request's JSON body and refuses a body
still holding redaction markers, which are not the values the call sent.
``intentusnet.integrations.reask`` sends the result (it needs the transports).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from .._util.jsonvalue import JSONObject, JSONValue, parse_json
from .._util.paths import ANY, DEEP, parse
from ..errors import ReaskRefused
from ..record.model import ExecutionRecord
from ..replay import diff_paths
from ..routing.redact import is_marker
from .view import record_steps

__all__ = ["RecordedCall", "edited", "parse_edit", "recorded_call"]

#: What a transport records at a body path it was told to ignore.
_IGNORED: Final = "(ignored)"


@dataclass(frozen=True, slots=True)
class RecordedCall:
    """An HTTP call as a record holds it. Added in 0.1.0.

    Attributes:
        execution_id: the record it was found in.
        step: its step number there; ``None`` when the record is the call's own
            (a transport record).
        request: the request as recorded: ``method``, ``url``, ``headers``
            and ``json`` (the body).
        response: the response as recorded (``status``, ``headers``, ``body``,
            ``bodyEncoding``), ``None`` when the call failed without one.
        error: the recorded failure's text, when it failed.
        answered_by: the transport record that holds the answer.
    """

    execution_id: str
    step: int | None
    request: JSONObject
    response: JSONObject | None
    error: str | None
    answered_by: str | None

    @property
    def body(self) -> JSONValue:
        """The request's JSON body as recorded."""
        return self.request.get("json")

    @property
    def where(self) -> str:
        """``record ID`` or ``step N of record ID``, for messages."""
        if self.step is None:
            return f"record {self.execution_id}"
        return f"step {self.step} of record {self.execution_id}"


def recorded_call(record: ExecutionRecord, step: int | None = None) -> RecordedCall:
    """The HTTP call a record holds: its step ``step``, or the record itself.

    Raises:
        ReaskRefused: the record has no such step; the step is not an HTTP
            call, or is a side effect; no step is given for an execution
            that is not a transport record (or one is given for one that is);
            the request's body is not JSON.
    """
    own = _transport_request(record)
    if step is None:
        if own is None:
            raise ReaskRefused(
                f"record {record.execution_id} ({record.header.intent_name}) is "
                "not one HTTP call's record: name the model call by its step "
                "(--step N; `intentusnet inspect` lists the steps)"
            )
        response, error = _answer(record.final_response)
        call = RecordedCall(
            record.execution_id, None, own, response, error, record.execution_id
        )
    else:
        if own is not None:
            raise ReaskRefused(
                f"record {record.execution_id} is one HTTP call's record and "
                "has no steps: leave the step out"
            )
        call = _step_call(record, step)
    if not isinstance(call.body, dict | list):
        raise ReaskRefused(
            f"the request of {call.where} has no JSON body (only its hash and "
            "size were recorded), so it cannot be sent again"
        )
    return call


def _step_call(record: ExecutionRecord, number: int) -> RecordedCall:
    steps = record_steps(record)
    found = next((s for s in steps if s.number == number), None)
    where = f"step {number} of record {record.execution_id}"
    if found is None:
        held = f"its steps are 1 to {len(steps)}" if steps else "it has no steps"
        raise ReaskRefused(f"record {record.execution_id} has no step {number}: {held}")
    if found.side_effect:
        raise ReaskRefused(
            f"{where} ({found.name}) is a side effect: asking it again would do "
            "it again, so it is never re-asked"
        )
    args = found.args
    if not found.name.startswith("http ") or not _is_request(args):
        raise ReaskRefused(
            f"{where} ({found.name}) is not an HTTP call: only model calls made "
            "through a recording transport can be re-asked"
        )
    assert isinstance(args, dict)
    output = found.output if found.ok and isinstance(found.output, dict) else None
    error = None if found.ok else found.error_text
    return RecordedCall(
        record.execution_id, number, args, output, error, found.child_execution_id
    )


def _is_request(value: JSONValue) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("method"), str)
        and isinstance(value.get("url"), str)
    )


def _transport_request(record: ExecutionRecord) -> JSONObject | None:
    """The request of a transport record (``None`` for any other record)."""
    payload = record.envelope.get("payload")
    if _is_request(payload):
        assert isinstance(payload, dict)
        return payload
    final = record.final_response or {}
    answer = final.get("payload")
    if isinstance(answer, dict) and _is_request(answer.get("request")):
        request = answer["request"]
        assert isinstance(request, dict)
        return request
    return None


def _answer(final: JSONObject | None) -> tuple[JSONObject | None, str | None]:
    """A transport record's response data, or its failure's text."""
    if final is None:
        return None, "the call has no recorded answer (it did not finish)"
    payload, error = final.get("payload"), final.get("error")
    if isinstance(payload, dict) and isinstance(payload.get("response"), dict):
        response = payload["response"]
        assert isinstance(response, dict)
        return response, None
    text = error.get("message") if isinstance(error, dict) else None
    details = error.get("details") if isinstance(error, dict) else None
    response = details.get("response") if isinstance(details, dict) else None
    return (response if isinstance(response, dict) else None), str(text or "failed")


def parse_edit(text: str) -> tuple[str, JSONValue]:
    """``PATH=JSON`` as ``(path, value)``; the path is checked by :func:`edited`.

    Raises:
        ReaskRefused: no ``=``, or the value is not JSON (a string needs its
            quotes: ``model="gpt-4o"``).
    """
    path, equals, value = text.partition("=")
    if not equals or not path.strip():
        raise ReaskRefused(f"edit {text!r}: write PATH=JSON, e.g. temperature=0.2")
    try:
        return path.strip(), parse_json(value)
    except ValueError as exc:
        raise ReaskRefused(
            f"edit {text!r}: the value is not JSON ({exc}); a string needs its "
            f"quotes: {path.strip()}='\"...\"'"
        ) from None


def edited(
    call: RecordedCall,
    edits: Mapping[str, JSONValue],
    model: str | None = None,
) -> tuple[JSONObject, list[str]]:
    """The request's JSON body with ``edits`` set, and the paths that changed.

    Each path (the redaction path syntax without wildcards: ``temperature``,
    ``messages[0].content``, ``metadata["a.b"]``) is set in turn; a missing
    key is added (objects on the way too), an array index must exist.
    ``model`` is the edit ``model=M``.

    Raises:
        ReaskRefused: a path is not a path, has a wildcard, or leads through
            a value that is not an object or array or to an index past an
            array's end; the body is not an object; a value the recording
            redacted or ignored is left (set it with an edit).
    """
    body = call.body
    if not isinstance(body, dict):
        raise ReaskRefused(f"the request body of {call.where} is not a JSON object")
    changes = dict(edits)
    if model is not None:
        changes["model"] = model
    new: JSONValue = body
    for path, value in changes.items():
        new = _set(new, path, value)
    hidden = sorted(_hidden(new, ""))
    if hidden:
        raise ReaskRefused(
            f"the request of {call.where} was recorded with values redacted or "
            f"ignored at {', '.join(hidden)}; give them as edits (--set PATH=JSON)"
        )
    assert isinstance(new, dict)
    return new, diff_paths(body, new)


def _set(root: JSONValue, path: str, value: JSONValue) -> JSONValue:
    """``root`` with ``value`` at ``path``, copied where it changes."""
    try:
        segments = parse(path)
    except ValueError as exc:
        raise ReaskRefused(f"edit {path!r}: {exc}") from None
    if not segments or any(s is ANY or s is DEEP for s in segments):
        raise ReaskRefused(
            f"edit {path!r}: name one value (no '$', '*' or '**'), e.g. "
            "messages[0].content"
        )

    def put(node: JSONValue, at: int) -> JSONValue:
        if at == len(segments):
            return value
        key = segments[at]
        where = path if at == 0 else f"{path} (at {segments[at - 1]!r})"
        if isinstance(key, str):
            if node is None and at > 0:
                node = {}
            if not isinstance(node, dict):
                raise ReaskRefused(f"edit {where}: {key!r} needs an object there")
            return {**node, key: put(node.get(key), at + 1)}
        if not isinstance(node, list) or not isinstance(key, int):
            raise ReaskRefused(f"edit {where}: [{key}] needs an array there")
        if key >= len(node):
            raise ReaskRefused(
                f"edit {path!r}: index {key} is past the array's end "
                f"({len(node)} items)"
            )
        return [*node[:key], put(node[key], at + 1), *node[key + 1 :]]

    return put(root, 0)


def _hidden(value: JSONValue, where: str) -> list[str]:
    """Paths of the values a recording replaced by markers or ``(ignored)``."""
    if isinstance(value, str):
        return [where or "$"] if value == _IGNORED or is_marker(value) else []
    if isinstance(value, dict):
        return [
            found
            for key, item in value.items()
            for found in _hidden(item, f"{where}.{key}" if where else key)
        ]
    if isinstance(value, list):
        return [
            found
            for index, item in enumerate(value)
            for found in _hidden(item, f"{where}[{index}]")
        ]
    return []
