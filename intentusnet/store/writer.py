"""Record writers: append sealed event lines to one record's hash chain.

:class:`ChainWriter` keeps the chain (sequence number, previous hash, clock) and
turns events into lines; a subclass says where lines go. A writer is used by one
execution; its methods are safe to call from several threads.
"""

from __future__ import annotations

import contextlib
import os
import time
from _thread import allocate_lock
from collections.abc import Callable
from types import TracebackType
from typing import Final, NamedTuple

from .._json import JSONObject, JSONValue
from .._recordfile import seal
from ..errors import StoreError
from ..record import EventType, RecordStatus, ReplayableReason
from .catalog import CatalogRow

_FINAL: Final = EventType.FINAL_RESPONSE
_KINDS: Final[dict[str, EventType]] = {kind.value: kind for kind in EventType}


def wire_object(value: object) -> JSONObject:
    """Return ``value`` as a JSON object: its ``to_wire()``, or itself if a dict."""
    to_wire = getattr(value, "to_wire", None)
    result = to_wire() if callable(to_wire) else value
    if not isinstance(result, dict):
        raise TypeError(f"expected a JSON object, got {type(result).__name__}")
    return result


def _kind(event_type: EventType | str) -> EventType:
    try:
        kind = _KINDS.get(event_type)
    except TypeError:  # unhashable
        kind = None
    if kind is None:
        raise ValueError(f"{event_type!r} is not a valid EventType")
    if kind is _FINAL:
        raise ValueError("FINAL_RESPONSE is written by complete(response)")
    return kind


class Outcome(NamedTuple):
    """The catalog fields a completed record changes."""

    status: str
    replayable: int
    reason: str | None
    agent: str | None
    duration_ms: float | None
    lines: int
    size: int
    chain_head: str


# FileRecordWriter._completed relies on the column order.
assert CatalogRow._fields[6:11] == Outcome._fields[:5]
assert CatalogRow._fields[13:] == Outcome._fields[5:]


class ChainWriter:
    """Turns events into sealed lines of one record; subclasses store the lines."""

    def __init__(self, execution_id: str, header_hash: str, size: int) -> None:
        self.execution_id: Final = execution_id
        self._seq = 0
        self._prev = header_hash
        self._size = size
        self._t0 = time.perf_counter_ns()
        # threading.Lock is this function; importing threading for it would
        # cost ``replay ID``, which opens no writer, a millisecond.
        self._lock = allocate_lock()
        self._open = True
        self._broken = False
        self._invalidated = False
        self._recording_failed = False
        #: sealed lines waiting for the next write (see append_soon)
        self._held: list[bytes] = []

    def append(self, event_type: EventType | str, data: JSONObject) -> None:
        """Append one event; it has reached the OS when this returns.

        Raises:
            ValueError: ``event_type`` is not an event type, or is
                ``FINAL_RESPONSE`` (use :meth:`complete`).
            StoreError: the record is closed, ``data`` is not JSON, or the write
                failed (the record is left as it was before the call).
        """
        kind = _kind(event_type)
        with self._lock:
            self._write(kind, data)

    def append_soon(self, event_type: EventType | str, data: JSONObject) -> None:
        """Seal one event now; write it with the next append, complete or close.

        For a caller that appends another event before any code but its own
        runs: the lines then share one ``write()``, and a crash between the two
        calls leaves the record as a crash just before this one would.

        Raises:
            ValueError, StoreError: as for :meth:`append` (but the write's own
                failure is raised by the call that writes the line).
        """
        kind = _kind(event_type)
        with self._lock:
            self._write(kind, data, soon=True)

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
            self._write(_FINAL, data)
            self._open = False
            self._finish(completed=True)
        self._completed(self._outcome(wire))

    def close(self) -> None:
        """Stop writing without completing (the record reads as incomplete).

        Safe to call more than once and after :meth:`complete`.
        """
        with self._lock:
            if self._open:
                self._open = False
                if self._held:  # best effort: the record reads as incomplete anyway
                    with contextlib.suppress(StoreError):
                        self._emit_with(b"")
                self._finish(completed=False)

    def __enter__(self) -> ChainWriter:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    # -- for subclasses ------------------------------------------------------------

    def _emit(self, line: bytes) -> None:
        """Store sealed lines whole, or raise StoreError leaving nothing of them."""
        raise NotImplementedError

    def _finish(self, *, completed: bool) -> None:
        """Release what the writer holds (called once, with the lock held)."""

    def _completed(self, outcome: Outcome) -> None:
        """Called after ``complete`` with what the catalog should now say."""

    # -- internals -----------------------------------------------------------------

    def _write(self, kind: EventType, data: JSONObject, *, soon: bool = False) -> None:
        if not self._open:
            raise StoreError(f"record {self.execution_id} is closed")
        if self._broken:
            raise StoreError(
                f"record {self.execution_id}: an earlier write failed and could not "
                "be undone; nothing more can be appended"
            )
        seq = self._seq + 1
        fields: JSONObject = {
            "seq": seq,
            "type": kind,  # a str; orjson writes its value
            "atMs": (time.perf_counter_ns() - self._t0) // 1000 / 1000,
            "data": data,
            "prevHash": self._prev,
        }
        try:
            line, digest = seal(fields)
        except TypeError as exc:
            raise StoreError(
                f"record {self.execution_id}: {kind} data is not JSON ({exc})"
            ) from exc
        if soon:
            self._held.append(line)
        else:
            self._emit_with(line)
        self._seq, self._prev = seq, digest
        if kind is EventType.RECORDING_FAILURE:
            self._recording_failed = True
        elif kind is EventType.INVALIDATED:
            self._invalidated = True

    def _emit_with(self, line: bytes) -> None:
        """Emit the held lines and ``line`` in one piece; on failure keep them held."""
        held = self._held
        if held:
            line = b"".join((*held, line))
        self._emit(line)
        self._size += len(line)
        if held:
            self._held = []

    def _outcome(self, response: JSONObject) -> Outcome:
        if self._invalidated:
            reason: str | None = ReplayableReason.MANUALLY_INVALIDATED.value
        elif self._recording_failed:
            reason = ReplayableReason.RECORDING_FAILURE.value
        else:
            reason = None
        meta = response.get("metadata")
        meta_d: dict[str, JSONValue] = meta if isinstance(meta, dict) else {}
        agent, duration = meta_d.get("agent"), meta_d.get("durationMs")
        failed = response.get("status") == "error"
        return Outcome(
            status=(RecordStatus.FAILED if failed else RecordStatus.COMPLETED).value,
            replayable=int(reason is None),
            reason=reason,
            agent=agent if isinstance(agent, str) else None,
            duration_ms=float(duration) if isinstance(duration, int | float) else None,
            lines=self._seq + 1,
            size=self._size,
            chain_head=self._prev,
        )


class FileRecordWriter(ChainWriter):
    """Writes one record file: one ``os.write`` per line, ``flock`` held while open.

    Made by ``FileExecutionStore.open``.
    """

    def __init__(
        self,
        execution_id: str,
        *,
        fd: int,
        header_hash: str,
        size: int,
        fsync: bool,
        row: CatalogRow | None,
        on_complete: Callable[[CatalogRow], None],
    ) -> None:
        super().__init__(execution_id, header_hash, size)
        self._fd = fd
        self._fsync = fsync
        self._row = row
        self._on_complete = on_complete

    def _emit(self, line: bytes) -> None:
        fd = self._fd
        try:
            written = os.write(fd, line)
            while written < len(line):  # only on a full disk or a signal
                more = os.write(fd, line[written:])
                if more == 0:
                    raise OSError(28, "no space left on device")
                written += more
        except OSError as exc:
            try:
                os.ftruncate(fd, self._size)  # drop the partial line
            except OSError:
                self._broken = True
            raise StoreError(
                f"record {self.execution_id}: write failed: {exc.strerror or exc}"
            ) from exc

    def _finish(self, *, completed: bool) -> None:
        fd, self._fd = self._fd, -1
        try:
            if completed and self._fsync:
                os.fsync(fd)
        except OSError as exc:
            raise StoreError(
                f"record {self.execution_id}: fsync failed: {exc.strerror or exc}"
            ) from exc
        finally:
            with contextlib.suppress(OSError):
                os.close(fd)  # also releases the flock

    def _completed(self, outcome: Outcome) -> None:
        row = self._row
        if row is not None:  # the row as opened, with what completing changed
            self._on_complete(
                CatalogRow(
                    *row[:6], *outcome[:5], row.parent_id, row.owner, *outcome[5:]
                )
            )

    def __del__(self) -> None:
        # A writer dropped without close() must not keep its lock for the life
        # of the process (the record would look in progress).
        fd = getattr(self, "_fd", -1)
        if fd >= 0:
            with contextlib.suppress(OSError):
                if self._held:  # sealed lines still waiting: keep them
                    os.write(fd, b"".join(self._held))
            with contextlib.suppress(OSError):
                os.close(fd)
