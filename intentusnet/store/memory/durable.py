"""The memory store's idempotency keys, record holds and resume links.

The same rules as the file store's (``store/file/durable.py``), with a lock and
sets in place of files and ``flock``: one process, so a holder is live until
it lets go.
"""

from __future__ import annotations

import bisect
import contextlib
import threading
from collections.abc import Callable, Collection, Iterable

from ..._util.jsonvalue import JSONObject
from ...errors import RecordNotFound


class MemoryKeyClaim:
    """A key's claim; ``held`` until ``release``."""

    __slots__ = ("_durable", "_key", "created", "envelope_hash", "execution_id", "held")

    def __init__(
        self,
        durable: MemoryDurable,
        key: str,
        claim: tuple[str, str],
        *,
        created: bool,
        held: bool,
    ) -> None:
        self._durable = durable
        self._key = key
        self.execution_id, self.envelope_hash = claim
        self.created = created
        self.held = held

    def release(self) -> None:
        """Let go of the claim (idempotent)."""
        if self.held:
            self.held = False
            with self._durable.lock:
                self._durable.held_keys.discard(self._key)


class MemoryRecordHold:
    """A held record of a memory store."""

    __slots__ = ("_durable", "_held", "execution_id")

    def __init__(self, durable: MemoryDurable, execution_id: str) -> None:
        self._durable = durable
        self.execution_id = execution_id
        self._held = True

    def link(self, resumed_by: str) -> None:
        """Note that ``resumed_by`` resumes the held record."""
        with self._durable.lock:
            self._durable.links[self.execution_id] = resumed_by

    def release(self) -> None:
        """Let go of the record (idempotent)."""
        if self._held:
            self._held = False
            with self._durable.lock:
                self._durable.held_records.discard(self.execution_id)


class MemoryDurable:
    """Keys, holds and links of one memory store.

    Args:
        exists: whether the store holds a record.
        writing: whether a writer still has the record open.
    """

    def __init__(
        self, exists: Callable[[str], bool], writing: Callable[[str], bool]
    ) -> None:
        self.lock = threading.Lock()
        self.keys: dict[str, tuple[str, str]] = {}
        self.held_keys: set[str] = set()
        self.held_records: set[str] = set()
        self.links: dict[str, str] = {}
        self.cancels: dict[str, JSONObject] = {}
        self.decisions: dict[str, set[str]] = {}
        self.signals: dict[str, list[JSONObject]] = {}
        #: (due_us, execution_id), soonest first
        self.wakeups: list[tuple[int, str]] = []
        self._exists = exists
        self._writing = writing

    def claim_key(
        self, key: str, envelope_hash: str, execution_id: str
    ) -> MemoryKeyClaim:
        """Claim ``key``, or return its claim (held if nobody holds it)."""
        with self.lock:
            found = self.keys.get(key)
            created = found is None
            if found is None:
                found = self.keys[key] = (execution_id, envelope_hash)
            held = key not in self.held_keys
            if held:
                self.held_keys.add(key)
        return MemoryKeyClaim(self, key, found, created=created, held=held)

    def hold_record(self, execution_id: str) -> MemoryRecordHold | None:
        """Hold the record; None while it is written or held.

        Raises:
            RecordNotFound: there is no such record.
        """
        if not self._exists(execution_id):
            raise RecordNotFound(f"no record {execution_id}")
        with self.lock:
            if self._writing(execution_id) or execution_id in self.held_records:
                return None
            self.held_records.add(execution_id)
        return MemoryRecordHold(self, execution_id)

    def resumed_by(self, execution_id: str) -> str | None:
        """The execution that resumed ``execution_id``, if any."""
        with self.lock:
            return self.links.get(execution_id)

    def request_cancel(self, origin: str, data: JSONObject) -> JSONObject | None:
        """Keep the chain's cancel request, once; the one made before, if any."""
        with self.lock:
            found = self.cancels.setdefault(origin, data)
        return None if found is data else found

    def cancel_requests(self, origins: Iterable[str]) -> dict[str, JSONObject]:
        """The cancel requests of these chains."""
        with self.lock:
            return {o: self.cancels[o] for o in origins if o in self.cancels}

    def note_decision(self, action: str, record: str) -> None:
        """Count an operator's decision, once per record."""
        with self.lock:
            self.decisions.setdefault(action, set()).add(record)

    def decision_count(self, action: str) -> int:
        """How many decisions ``action`` were counted."""
        with self.lock:
            return len(self.decisions.get(action, ()))

    def add_signal(self, origin: str, signal: JSONObject, *, cap: int) -> bool:
        """Keep ``signal`` for the chain unless it holds ``cap`` already."""
        with self.lock:
            kept = self.signals.setdefault(origin, [])
            if len(kept) >= cap:
                return False
            kept.append(signal)
        return True

    def signals_of(self, origin: str) -> list[JSONObject]:
        """The chain's signals, oldest first."""
        with self.lock:
            return list(self.signals.get(origin, ()))

    def add_wakeup(self, execution_id: str, due_us: int) -> None:
        """Keep a wake-up (once per record and due time)."""
        entry = (due_us, execution_id)
        with self.lock:
            at = bisect.bisect_left(self.wakeups, entry)
            if self.wakeups[at : at + 1] != [entry]:
                self.wakeups.insert(at, entry)

    def due_wakeups(self, until_us: int, limit: int) -> list[tuple[str, int]]:
        """The wake-ups due by ``until_us``, soonest first."""
        with self.lock:
            end = bisect.bisect_right(self.wakeups, (until_us, "\uffff"))
            return [(e, d) for d, e in self.wakeups[: min(end, limit)]]

    def clear_wakeup(self, execution_id: str, due_us: int) -> None:
        """Forget one wake-up."""
        with self.lock, contextlib.suppress(ValueError):
            self.wakeups.remove((due_us, execution_id))

    def keyed_execution(self, key: str) -> str | None:
        """The execution ``key`` names, if it was claimed."""
        with self.lock:
            found = self.keys.get(key)
        return None if found is None else found[0]

    def forget(self, execution_ids: Collection[str]) -> None:
        """Drop the keys naming these records, and their resume links."""
        with self.lock:
            for key in [k for k, (e, _) in self.keys.items() if e in execution_ids]:
                del self.keys[key]
            for execution_id in execution_ids:
                self.links.pop(execution_id, None)
                self.cancels.pop(execution_id, None)
                self.signals.pop(execution_id, None)
