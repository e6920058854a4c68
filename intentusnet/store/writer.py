"""Record writers: append sealed event lines to one record's hash chain.

:class:`ChainWriter` keeps the chain (sequence number, previous hash, clock) and
turns events into lines; a subclass says where lines go. A writer is used by one
execution; its methods are safe to call from several threads.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Final

from .._util import faults
from .._util.jsonvalue import JSONObject, JSONValue
from ..errors import StoreError
from ..record.format import event_line
from ..record.keys import SigningKey
from ..record.model import EventType, RecordStatus, ReplayableReason
from .rows import CatalogRow
from .step_index import StepKey, ended_step

__all__ = ["ChainWriter", "wire_object"]

_FINAL: Final = EventType.FINAL_RESPONSE
_FAILURE: Final = EventType.RECORDING_FAILURE
_INVALIDATED: Final = EventType.INVALIDATED
_SIGNATURE: Final = EventType.SIGNATURE
_STEP_END: Final = EventType.STEP_END
#: What ``append`` takes, by name (a StrEnum member finds itself here too).
_APPENDABLE: Final[dict[str, EventType]] = {
    kind.value: kind for kind in EventType if kind not in (_FINAL, _SIGNATURE)
}
_now_ns: Final = time.perf_counter_ns


def wire_object(value: object) -> JSONObject:
    """Return ``value`` as a JSON object: its ``to_wire()``, or itself if a dict."""
    if type(value) is dict:  # what the router hands over
        return value
    to_wire = getattr(value, "to_wire", None)
    result = to_wire() if callable(to_wire) else value
    if not isinstance(result, dict):
        raise TypeError(f"expected a JSON object, got {type(result).__name__}")
    return result


def _appendable(event_type: EventType | str) -> EventType:
    """The event type ``append`` takes for ``event_type``, or ValueError why not."""
    try:
        return _APPENDABLE[event_type]
    except (KeyError, TypeError):  # not an event type's name, or unhashable
        pass
    if event_type == _FINAL:
        raise ValueError("FINAL_RESPONSE is written by complete(response)")
    if event_type == _SIGNATURE:
        raise ValueError("SIGNATURE lines are written when the record is closed")
    raise ValueError(f"{event_type!r} is not a valid EventType")


#: What a completed record's catalog row says beyond the row it opened with:
#: status, replayable, reason, agent and duration (see ``ChainWriter._outcome``).
_OUTCOME_COLUMNS: Final = ("status", "replayable", "reason", "agent", "duration_ms")
# FileRecordWriter._completed relies on the column order.
assert CatalogRow._fields[6:11] == _OUTCOME_COLUMNS
assert CatalogRow._fields[13:] == ("lines", "size", "chain_head", "usage", "inode")
_COMPLETED: Final = RecordStatus.COMPLETED.value
_FAILED: Final = RecordStatus.FAILED.value
_NEEDS_ATTENTION: Final = RecordStatus.NEEDS_ATTENTION.value
_ATTENTION: Final = EventType.ATTENTION_NEEDED
_CANCELLED: Final = RecordStatus.CANCELLED.value
_DECISION: Final = EventType.OPERATOR_DECISION
_INCOMPLETE: Final = RecordStatus.INCOMPLETE.value
#: events that close a record unfinished on purpose, and the status they give it
_UNFINISHED_AS: Final = {
    EventType.EXECUTION_WAITING: RecordStatus.WAITING.value,
    EventType.EXECUTION_QUEUED: RecordStatus.QUEUED.value,
}
_MANUALLY_INVALIDATED: Final = ReplayableReason.MANUALLY_INVALIDATED.value
_RECORDING_FAILURE: Final = ReplayableReason.RECORDING_FAILURE.value


class ChainWriter:
    """Turns events into sealed lines of one record; subclasses store the lines.

    With a ``signer`` (the key whose id the store put in line 1), closing the
    record, by :meth:`complete` or :meth:`close`, appends a ``SIGNATURE`` over
    its last line, written in the same piece as the lines before it.
    """

    def __init__(
        self,
        execution_id: str,
        header_hash: str,
        size: int,
        signer: SigningKey | None = None,
    ) -> None:
        self.execution_id: Final = execution_id
        self._signer = signer
        self._seq = 0
        self._prev = header_hash
        self._size = size
        self._t0 = time.perf_counter_ns()
        self._lock = threading.Lock()
        self._open = True
        self._broken = False
        self._invalidated = False
        self._recording_failed = False
        self._attention = False  # a parked execution (needs_attention)
        self._cancelled = False  # an execution an operator cancelled
        # the status of a record closed unfinished: waiting, queued, else incomplete
        self._unfinished_as: str | None = None
        #: sealed lines waiting for the next write (see append_soon), their
        #: event types, and the (seq, hash) of the last line on disk
        self._held: list[bytes] = []
        self._held_kinds: list[str] = []
        self._written = (0, header_hash)
        #: the step index keys of the STEP_END lines sealed (store.step_index),
        #: noted when the store indexes the record's steps (``index_steps``)
        self.ended_steps: list[StepKey] = []
        self.index_steps = False

    def append(self, event_type: EventType | str, data: JSONObject) -> None:
        """Append one event; it has reached the OS when this returns.

        Raises:
            ValueError: ``event_type`` is not an event type, or is
                ``FINAL_RESPONSE`` (use :meth:`complete`).
            StoreError: the record is closed, ``data`` is not JSON, or the write
                failed (the record is left as it was before the call).
        """
        kind = _appendable(event_type)
        with self._lock:
            self._write(kind, data, False)

    def append_soon(self, event_type: EventType | str, data: JSONObject) -> None:
        """Seal one event now; write it with the next append, complete or close.

        For a caller that appends another event before any code but its own
        runs: the lines then share one ``write()``, and a crash between the two
        calls leaves the record as a crash just before this one would.

        Raises:
            ValueError, StoreError: as for :meth:`append` (but the write's own
                failure is raised by the call that writes the line).
        """
        kind = _appendable(event_type)
        with self._lock:
            self._write(kind, data, True)

    def complete(self, response: JSONObject, *, fingerprint: str | None = None) -> None:
        """Append ``FINAL_RESPONSE`` with the response and close the record.

        ``response`` is an ``AgentResponse`` wire dict (or has ``to_wire()``);
        ``fingerprint``, when given, is stored beside it (the recorder computes
        it from the events it wrote).

        Raises:
            StoreError: as for :meth:`append`; the record then stays open.
        """
        with self._lock:
            try:
                wire = wire_object(response)
            except TypeError as exc:
                raise StoreError(f"record {self.execution_id}: {exc}") from exc
            data: JSONObject = {"response": wire}
            if fingerprint is not None:
                data["fingerprint"] = fingerprint
            if self._signer is None:
                self._write(_FINAL, data, False)
            else:
                # One piece, or nothing: a failed write leaves the record open.
                seq, prev = self._seq, self._prev
                held, kinds = list(self._held), list(self._held_kinds)
                try:
                    self._write(_FINAL, data, True)
                    self._sign(self._signer)
                except BaseException:
                    self._seq, self._prev = seq, prev
                    self._held, self._held_kinds = held, kinds
                    raise
            self._open = False
            self._finish(completed=True)
        self._completed(wire)

    def close(self) -> None:
        """Stop writing without completing (the record reads as incomplete).

        Safe to call more than once and after :meth:`complete`.
        """
        with self._lock:
            if self._open:
                if self._signer is not None and not self._broken:
                    # Writes the held lines too; best effort, as below.
                    with contextlib.suppress(StoreError):
                        self._sign(self._signer)
                self._open = False
                if self._held:  # best effort: the record reads as incomplete anyway
                    with contextlib.suppress(StoreError):
                        self._emit_with(b"")
                        self._written = (self._seq, self._prev)
                self._finish(completed=False)
                self._closed()

    def __enter__(self) -> ChainWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- for subclasses ------------------------------------------------------------

    def _emit(self, line: bytes) -> None:
        """Store sealed lines whole, or raise StoreError leaving nothing of them."""
        raise NotImplementedError

    def _finish(self, *, completed: bool) -> None:
        """Release what the writer holds (called once, with the lock held)."""

    def _completed(self, response: JSONObject) -> None:
        """Called after ``complete`` with the response written."""

    def _closed(self) -> None:
        """Called after ``close`` stopped an unfinished record (lock held)."""

    # -- internals -----------------------------------------------------------------

    def _write(self, kind: EventType, data: JSONObject, soon: bool) -> None:
        """Seal one event; emit it now, or hold it for the next write if ``soon``."""
        if not self._open or self._broken:
            raise self._refused()
        seq = self._seq + 1
        line, digest = self._seal(kind, data, seq, self._prev)
        # Noted before the line goes out: a store may index it in the same write.
        ended = ended_step(data) if kind is _STEP_END and self.index_steps else None
        if ended is not None:
            self.ended_steps.append(ended)
        if soon:
            self._held.append(line)
            self._held_kinds.append(kind.value)
        else:
            try:
                self._emit_with(line)
            except StoreError:
                if ended is not None:
                    self.ended_steps.pop()  # not written
                if kind is not _FAILURE or not self._held:
                    raise
                seq, digest = self._failure_alone(data)
            self._written = (seq, digest)
        self._seq = seq
        self._prev = digest
        if kind is _FAILURE:
            self._recording_failed = True
        elif kind is _INVALIDATED:
            self._invalidated = True
        elif kind is _ATTENTION:
            self._attention = True
        elif kind is _DECISION and data.get("action") == "cancel":
            self._cancelled = True
        elif kind in _UNFINISHED_AS:
            self._unfinished_as = _UNFINISHED_AS[kind]

    def _sign(self, signer: SigningKey) -> None:
        """Write a ``SIGNATURE`` over the last line (held lines go with it)."""
        # Loaded by the first record signed: a store that reads, or writes
        # unsigned records, never needs the signing module.
        from ..record.signing import signature_data

        data = signature_data(signer, self.execution_id, self._seq, self._prev)
        self._write(_SIGNATURE, data, False)

    def _seal(
        self, kind: EventType, data: JSONObject, seq: int, prev: str
    ) -> tuple[bytes, str]:
        try:
            at_ms = (_now_ns() - self._t0) // 1000 / 1000
            return event_line(seq, kind, at_ms, data, prev)
        except TypeError as exc:
            raise StoreError(
                f"record {self.execution_id}: {kind} data is not JSON ({exc})"
            ) from exc

    def _failure_alone(self, data: JSONObject) -> tuple[int, str]:
        """Write ``RECORDING_FAILURE`` without the held lines; its (seq, hash).

        On a full disk the failure line, a few hundred bytes, may fit where the
        held lines with it did not (an attempt's output can be large): it then
        follows the last line written, and names the events it leaves out, so
        that the record says why it stops instead of reading as merely
        unfinished.

        Raises:
            StoreError: it does not fit either (the held lines stay held).
        """
        seq, prev = self._written
        data = {**data, "unwritten": list(self._held_kinds)}
        line, digest = self._seal(_FAILURE, data, seq + 1, prev)
        self._emit(line)
        self._size += len(line)
        self._held, self._held_kinds = [], []
        self._written = (seq + 1, digest)
        return seq + 1, digest

    def _refused(self) -> StoreError:
        if self._open:  # broken
            return StoreError(
                f"record {self.execution_id}: an earlier write failed and could not "
                "be undone; nothing more can be appended"
            )
        return StoreError(f"record {self.execution_id} is closed")

    def _emit_with(self, line: bytes) -> None:
        """Emit the held lines and ``line`` in one piece; on failure keep them held."""
        held = self._held
        if held:
            line = b"".join((*held, line))
        if faults.KILL_AT:  # a crash test's seam (_util/faults.py)
            faults.point()
            self._emit(line)
            faults.point()
        else:
            self._emit(line)
        self._size += len(line)
        if held:
            self._held, self._held_kinds = [], []

    def _unfinished(self) -> str:
        """The catalog's status of a record closed unfinished by its process."""
        return self._unfinished_as or _INCOMPLETE

    def _reason(self) -> str | None:
        """Why the record is not replayable, as far as this writer knows."""
        if self._invalidated:
            return _MANUALLY_INVALIDATED
        if self._recording_failed:
            return _RECORDING_FAILURE
        return None

    def _outcome(
        self, response: JSONObject
    ) -> tuple[str, int, str | None, str | None, float | None]:
        """The catalog's status, replayable, reason, agent and duration now."""
        reason = self._reason()
        meta = response.get("metadata")
        meta_d: dict[str, JSONValue] = meta if isinstance(meta, dict) else {}
        agent, duration = meta_d.get("agent"), meta_d.get("durationMs")
        status = _FAILED if response.get("status") == "error" else _COMPLETED
        return (
            _CANCELLED
            if self._cancelled
            else _NEEDS_ATTENTION
            if self._attention
            else status,
            1 if reason is None else 0,
            reason,
            agent if isinstance(agent, str) else None,
            float(duration) if isinstance(duration, (int, float)) else None,
        )
