"""Turns what the router does into record events, written through the store.

A recorder never raises into routing: the first write that fails marks the
execution as not recorded, leaves a ``RECORDING_FAILURE`` event if the store
can still take one, and the caller still gets the answer. The one exception
is a record that exists already under the id it was given (``RecordExists``):
that execution is another caller's, and nothing runs.

With a ``Redaction``, every event's data passes through it before it is
written, and the final response is recorded redacted (``complete`` returns the
response as recorded): nothing is sealed unredacted.

Every event has reached the OS before agent or user code runs. Events the
router always follows with another one before running such code (see
:data:`_FOLLOWED`) wait for it and share its ``write()`` (the writer's
``append_soon``).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Final

from .._util import faults
from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import IntentusNetError, RecordExists
from ..record.fingerprint import PATH_EVENTS, fingerprint, path_entry

if TYPE_CHECKING:
    from ..envelope import AgentResponse
    from ..store import ExecutionStore, RecordWriter
    from .redact import Redaction

__all__ = ["Recorder"]

#: Events after which the router writes another event before any agent or user
#: code runs (the first agent attempt's start, a fallback's, or the final response).
_FOLLOWED: Final = frozenset(
    {"INTENT_RECEIVED", "ROUTER_DECISION", "AGENT_ATTEMPT_END", "FALLBACK_TRIGGERED"}
)


class Recorder:
    """Writes the events of one execution; created per execution by the router.

    ``started``, the routing call's ``time.perf_counter()`` at its start, puts
    ``openedAfterMs`` in ``INTENT_RECEIVED``: how long the call ran before the
    record was open, the time its events' ``atMs`` (counted from the opening)
    do not show. With ``announce``, ``INTENT_RECEIVED`` is on disk when the
    recorder is made (not held for the next write): the record says what it
    is before anyone is told it is open (an asynchronous submit's 202, a
    resume's link, which names it).
    """

    __slots__ = (
        "_lock",
        "_path",
        "_writer",
        "error",
        "execution_id",
        "redaction",
    )

    def __init__(
        self,
        store: ExecutionStore,
        envelope: JSONObject,
        envelope_hash: str,
        request_id: str,
        *,
        execution_id: str | None = None,
        parent_execution_id: str | None = None,
        received: JSONObject | None = None,
        configuration: JSONObject | None = None,
        redaction: Redaction | None = None,
        started: float | None = None,
        announce: bool = False,
    ) -> None:
        self.error: str | None = None
        #: what this execution redacts (the envelope given here already is)
        self.redaction = redaction
        self._writer: RecordWriter | None = None
        #: the fingerprint entries of the events written so far, in file order
        self._path: list[JSONValue] = []
        self._lock = threading.Lock()
        if faults.KILL_AT:  # a crash test's seam (_util/faults.py)
            faults.point()
        try:
            self._writer = store.open(
                envelope,
                envelope_hash=envelope_hash,
                execution_id=execution_id,
                parent_execution_id=parent_execution_id,
                # only when there is one: stores written before 0.1.0 lack it
                **({} if configuration is None else {"configuration": configuration}),
            )
        except RecordExists:
            # Another caller opened this id's record first (a keyed execution
            # both found claimed and unopened): it runs there, not unrecorded
            # a second time here.
            raise
        except (OSError, IntentusNetError) as exc:
            self.error = f"could not open the record: {exc}"
            self.execution_id = execution_id
            return
        if faults.KILL_AT:
            faults.point()
        self.execution_id = self._writer.execution_id
        intent_received: JSONObject = {
            "requestId": request_id,
            "envelopeHash": envelope_hash,
        }
        if started is not None:
            # what the record's clock does not see: the routing call's time
            # before the record was open (choosing agents, hashing, opening it)
            opened = (time.perf_counter() - started) * 1000
            intent_received["openedAfterMs"] = round(opened, 3)
        if received:  # e.g. replayOf, for a re-run
            intent_received.update(received)
        self.event("INTENT_RECEIVED", intent_received, now=announce)

    def event(self, event_type: str, data: JSONObject, *, now: bool = False) -> None:
        """Append one event; on failure, stop recording and remember why.

        ``now``: on disk when this returns, even an event the router always
        follows with another (an execution announced as open, see
        ``ExecutionOptions.opened``).
        """
        writer = self._writer
        if writer is None:
            return
        redaction = self.redaction
        if redaction is not None:
            try:
                data = redaction.event(event_type, data)
            except Exception as exc:  # a hook's fault: write nothing unredacted
                self._fail(f"could not redact {event_type}: {type(exc).__name__}")
                return
        soon = event_type in _FOLLOWED and not now
        write = writer.append_soon if soon else writer.append
        entry = path_entry(event_type, data) if event_type in PATH_EVENTS else None
        try:
            if entry is None:
                write(event_type, data)
            else:
                with self._lock:  # agents on several threads: keep the file's order
                    write(event_type, data)
                    self._path.append(entry)
        except (OSError, IntentusNetError) as exc:
            self._fail(f"could not append {event_type}: {exc}")

    def complete(self, response: AgentResponse) -> AgentResponse:
        """Write the final response, close the record; return it as recorded.

        The recorded response is ``response`` redacted (``response`` itself
        without a redaction): what replay and the cache return.
        """
        recorded = response
        if self.redaction is not None:
            try:
                recorded = self.redaction.response(response)
            except Exception as exc:  # a hook's fault: write nothing unredacted
                if self.error is None:  # else it failed already: keep the first why
                    self._fail(f"could not redact FINAL_RESPONSE: {type(exc).__name__}")
                return recorded
        writer = self._writer
        if writer is None:
            return recorded
        try:
            writer.complete(
                recorded.to_wire(),
                fingerprint=fingerprint(self._path, recorded.status),
            )
        except (OSError, IntentusNetError) as exc:
            self._fail(f"could not write the final response: {exc}")
        self._writer = None
        return recorded

    def abandon(self) -> None:
        """Close the record without a final response: it reads ``incomplete``.

        For a routing call cancelled or interrupted before it had an answer.
        """
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()

    def _fail(self, message: str) -> None:
        self.error = message
        writer, self._writer = self._writer, None
        if writer is None:
            return
        try:  # best effort: the store may be able to say why, or may not
            writer.append("RECORDING_FAILURE", {"error": message})
        except (OSError, IntentusNetError):
            pass
        finally:
            writer.close()
