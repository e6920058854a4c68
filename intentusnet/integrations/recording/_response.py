"""A response as recorded, and the one :class:`Response` a transport serves.

A live response is recorded as plain JSON data (status, reasonPhrase,
httpVersion, headers, body, bodyEncoding): no credential headers, no framing
headers (the body recorded is decoded), the headers a ``Redactor`` names as
markers and its body paths applied, then ``before_record_response``. An error
status is recorded as an error answer. What a transport serves (a hit, the
response a call got, a live response whose body is passed through) is a
:class:`Response` in plain values, which each transport turns into its
library's response; a recorded event stream is replayed event by event.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Callable, Iterator
from itertools import pairwise
from typing import Final, NamedTuple, Protocol, TypeAlias, cast

import orjson

from ..._util.jsonvalue import JSONObject, JSONValue
from ...cache.callrouter import JobResult
from ...envelope import AgentResponse, ErrorCode, ErrorInfo
from ...routing.redact import redact_body
from ..usage import recorded_call_usage
from ._key import HTTPHeaders, Secrets
from ._passthrough import Arrivals, AsyncTee, Tee


class HTTPResponse(Protocol):
    """The parts of a response the transports read."""

    @property
    def status_code(self) -> int: ...
    @property
    def reason_phrase(self) -> str: ...
    @property
    def http_version(self) -> str: ...
    @property
    def headers(self) -> HTTPHeaders: ...
    def iter_bytes(self) -> Iterator[bytes]: ...
    def close(self) -> None: ...
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


#: On a response: ``hit``, ``miss`` or ``bypass``. On a request: ``bypass`` or
#: ``no-store`` for this call (stripped before the request is hashed or sent).
#: Added in 0.1.0.
CACHE_HEADER: Final = "x-intentusnet-cache"
#: On a response: the id of the record it was answered from, or recorded as
#: (inside an agent too; in a re-run serving the agent's step, the re-run's).
#: Added in 0.1.0.
RECORD_HEADER: Final = "x-intentusnet-record"
#: On a response to a request made inside an agent: the number of the step it
#: is recorded as in the agent's execution (``AgentContext.execution_id``).
#: Added in 0.1.0.
STEP_HEADER: Final = "x-intentusnet-step"


#: ``before_record_response(data) -> data``: the response as recorded and later
#: replayed (status, reasonPhrase, httpVersion, headers, body, bodyEncoding, and
#: eventMs for an event stream passed through).
ResponseHook: TypeAlias = Callable[[JSONObject], JSONObject]

#: Response headers that describe the bytes on the wire, not the body recorded
#: (which is decoded), so they are not replayed.
_WIRE_HEADERS: Final = frozenset(
    {"content-encoding", "content-length", "transfer-encoding", "connection"}
)


class Responses:
    """How a transport records the responses it gets.

    Args:
        secrets: the transport's secrets (credential headers are dropped, the
            redactor's names recorded as markers).
        before_record_response: the hook the recorded data goes through.
        with_request: record the request's payload beside the response (a key
            function made the envelope's payload).
    """

    def __init__(
        self,
        secrets: Secrets,
        before_record_response: ResponseHook | None,
        *,
        with_request: bool,
    ) -> None:
        self.secrets = secrets
        self.before_response = before_record_response
        self.with_request = with_request

    def recorded(
        self,
        response: HTTPResponse,
        body: bytes,
        request: JSONObject,
        arrivals: Arrivals | None = None,
    ) -> tuple[JSONObject, JobResult]:
        """A response as the client gets it, and as it is recorded.

        Recorded, named headers are markers and the body has the redactor's
        paths applied; an error status is an error answer. ``request`` is the
        request's payload: recorded beside the response when a key function
        made the envelope's, and read with the response for its token usage.
        A body passed through as it came (``arrivals``) that is an event
        stream records when each event had come (``eventMs``, milliseconds
        after the head), so it can be replayed at its pace.
        """
        try:
            text: str | None = body.decode("utf-8")
        except UnicodeDecodeError:
            text = None
        data: JSONObject = {
            **self.head(response),
            "body": text if text is not None else base64.b64encode(body).decode(),
            "bodyEncoding": "utf-8" if text is not None else "base64",
        }
        if arrivals is not None:
            data["eventMs"] = list(arrivals.at_ms(_event_ends(body)))
        shown = data if self.secrets.redactor is None else self._redacted(data, text)
        if self.before_response is not None:
            shown = self.before_response(shown)
        status = response.status_code
        answer: JSONObject = {"response": shown}
        if self.with_request:
            answer = {"request": request, "response": shown}
        if status < 400:
            usage = recorded_call_usage(request, shown)
            if usage is not None:
                answer["usage"] = cast("JSONObject", usage.as_json())
            return data, answer
        # Not cached unless the policy serves errors: a 401 or a 429 is not
        # the answer to this request next time.
        return data, AgentResponse(
            status="error",
            error=ErrorInfo(
                code=ErrorCode.AGENT_ERROR,
                message=f"HTTP {status} {response.reason_phrase}".rstrip(),
                retryable=status == 429 or status >= 500,
                details=answer,
            ),
        )

    def head(self, response: HTTPResponse) -> JSONObject:
        """A response's status line and headers as recorded and served.

        No credential headers, no framing headers (the body recorded is decoded).
        """
        is_secret = self.secrets.rule
        return {
            "status": response.status_code,
            "reasonPhrase": response.reason_phrase,
            "httpVersion": response.http_version,
            "headers": [
                [name, value]
                for name, value in response.headers.multi_items()
                if name not in _WIRE_HEADERS and not is_secret(name)
            ],
        }

    def passed(
        self,
        response: HTTPResponse,
        tee: Tee | AsyncTee,
        cache: str,
        record: str | None,
        step: int | None,
    ) -> Response:
        """A live event stream's head, served before its body comes through ``tee``."""
        return response_of(self.head(response), cache, record, step, tee)

    def _redacted(self, data: JSONObject, text: str | None) -> JSONObject:
        """Recorded data of a response: named headers as markers, body redacted."""
        redactor = self.secrets.redactor
        assert redactor is not None
        marked = self.secrets.marked
        headers = data["headers"]
        assert isinstance(headers, list)
        shown = dict(data)
        shown["headers"] = [
            [name, redactor.marker(value) if name in marked else value]
            for name, value in (pair for pair in headers if isinstance(pair, list))
        ]
        if text is not None:
            try:
                parsed: JSONValue = orjson.loads(text)
            except orjson.JSONDecodeError:
                return shown  # not JSON: there are no paths into it
            redacted = redact_body(redactor, parsed, "http.response", {})
            if redacted is not parsed:
                shown["body"] = orjson.dumps(redacted).decode()
        return shown


def passes(response: HTTPResponse) -> bool:
    """Whether a live response is passed through as it arrives: an event stream."""
    return response.status_code < 400 and _is_event_stream(
        response.headers.multi_items()
    )


class Response(NamedTuple):
    """A response to serve, in plain values each transport turns into its own.

    A hit (from a record), or the response a call made got: whole, or its head
    while its body is passed through as it arrives (``tee``). ``headers`` and
    ``extensions`` say the cache state, the record and the step too.
    """

    status: int
    headers: tuple[tuple[str, str], ...]
    content: bytes
    #: the body split into server-sent events when it is an event stream
    #: (replayed event by event), else empty
    chunks: tuple[bytes, ...]
    #: the cache state (``intentusnet_cache``: ``hit``, ``miss`` or ``bypass``),
    #: the record and the step, beside the library's own
    extensions: dict[str, object]
    #: a live body passed through as it arrives (``content`` is empty then)
    tee: Tee | AsyncTee | None = None
    #: a hit's ``headers`` in its transport's library's type, made once
    made: object = None


def response_of(
    data: JSONObject,
    cache: str,
    record: str | None,
    step: int | None = None,
    tee: Tee | AsyncTee | None = None,
) -> Response:
    """What a response's recorded data (or a live stream's head) becomes, to serve.

    Its headers and extensions say the cache state, the record and the step.
    """
    body = data.get("body") or ""
    content = (
        base64.b64decode(str(body))
        if data.get("bodyEncoding") == "base64"
        else str(body).encode("utf-8")
    )
    pairs = cast("list[list[str]]", data.get("headers") or [])
    headers = [(str(k), str(v)) for k, v in pairs]
    streamed = _is_event_stream(headers)
    if not streamed:
        headers.append(("content-length", str(len(content))))
    chunks = _events(content) if streamed else ()
    times = data.get("eventMs")
    event_ms: tuple[int, ...] = ()
    if isinstance(times, list) and len(times) == len(chunks):
        event_ms = tuple(t if isinstance(t, int) else 0 for t in times)
    headers.append((CACHE_HEADER, cache))
    if record is not None:
        headers.append((RECORD_HEADER, record))
    if step is not None:
        headers.append((STEP_HEADER, str(step)))
    extensions: dict[str, object] = {
        "http_version": str(data.get("httpVersion") or "HTTP/1.1").encode(),
        "reason_phrase": str(data.get("reasonPhrase") or "").encode(),
        "intentusnet_cache": cache,
        "intentusnet_record": record,
        "intentusnet_step": step,
        # when each recorded event had come; empty when not recorded
        "intentusnet_event_ms": event_ms,
    }
    status = int(cast("int", data.get("status") or 200))
    return Response(status, tuple(headers), content, chunks, extensions, tee)


def record_of(answer: AgentResponse) -> str | None:
    """The record an answer comes from: the one it was served from, for a hit."""
    metadata = answer.metadata
    return metadata.original_execution_id or metadata.execution_id


def _events(content: bytes) -> tuple[bytes, ...]:
    """Split a server-sent event stream after each event (a blank line)."""
    ends = _event_ends(content)
    return tuple(content[start:end] for start, end in pairwise([0, *ends]))


def _event_ends(content: bytes) -> list[int]:
    """Where each server-sent event of ``content`` ends (after its blank line)."""
    ends: list[int] = []
    start = 0
    while (end := content.find(b"\n\n", start)) >= 0:
        start = end + 2
        ends.append(start)
    if start < len(content):
        ends.append(len(content))
    return ends


def _is_event_stream(headers: list[tuple[str, str]]) -> bool:
    return any(
        k.lower() == "content-type" and v.startswith("text/event-stream")
        for k, v in headers
    )
