"""Records loaded before, kept with the bytes they were verified from.

What checking a record finds is a function of its file's bytes alone once the
record is settled: finished and whole, its status no longer depends on whether
its writer still runs. ``LoadedRecords`` keeps such records beside the bytes
they were read from; a later load that reads the same bytes, compared byte for
byte, skips the checks (every line's hash, the chain, the envelope's hash, the
fields) and only parses the JSON again, so that every load still returns dicts
of its own. Any change to the file (an appended ``INVALIDATED`` line, an edit
of one byte) makes the bytes differ, and the file is checked in full as on a
first load.

A record is kept at its second load, not its first: keeping every record
loaded once would hold a stream of records each read once (a listing, a
``verify``) in memory for nothing, and make every first load slower (the
memory they are parsed into is colder). Bounded in count and in bytes: the
oldest records are dropped to make room, and a record of more than a quarter
of the bytes is not kept.
"""

from __future__ import annotations

from threading import Lock
from typing import Final

from ...record.model import ExecutionRecord
from ...record.reader import parsed_again

__all__ = ["LoadedRecords"]

#: Records kept per store, at most.
LOADED_MAX: Final = 128
#: Their files' bytes, at most (the parsed records take a few times more).
LOADED_MAX_BYTES: Final = 8 << 20
#: Ids loaded once, remembered so that a second load keeps the record.
SEEN_MAX: Final = 1024


class LoadedRecords:
    """Settled records by execution id, with the bytes each was parsed from."""

    __slots__ = ("_bytes", "_kept", "_lock", "_seen")

    def __init__(self) -> None:
        self._kept: dict[str, tuple[bytes, ExecutionRecord]] = {}
        self._seen: dict[str, None] = {}
        self._bytes = 0
        self._lock = Lock()

    def get(self, execution_id: str, data: bytes) -> ExecutionRecord | None:
        """The record checked from exactly ``data`` before, dicts its own; or None."""
        kept = self._kept.get(execution_id)
        if kept is not None and kept[0] == data:
            return parsed_again(kept[1], data)
        return None

    def keep(self, execution_id: str, data: bytes, record: ExecutionRecord) -> None:
        """Keep ``record``, parsed from ``data``, if settled and loaded before."""
        if record.final_response is None or record.torn_tail:
            return  # its status may still change with its writer's life
        if len(data) > LOADED_MAX_BYTES // 4:
            return
        with self._lock:
            seen = self._seen
            if execution_id not in seen:  # its first load: noted, not kept
                if len(seen) >= SEEN_MAX:
                    seen.clear()
                seen[execution_id] = None
                return
            del seen[execution_id]
            kept = self._kept
            old = kept.pop(execution_id, None)
            if old is not None:
                self._bytes -= len(old[0])
            while kept and (
                len(kept) >= LOADED_MAX or self._bytes + len(data) > LOADED_MAX_BYTES
            ):
                self._bytes -= len(kept.pop(next(iter(kept)))[0])
            kept[execution_id] = (data, record)
            self._bytes += len(data)
