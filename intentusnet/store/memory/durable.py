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
from ..durable import (
    DECISION_ACTIONS,
    check_action,
    check_idempotency_key,
)
from ..ids import check_id


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
            with self._durable._durable_lock:
                self._durable._held_keys.discard(self._key)


class MemoryRecordHold:
    """A held record of a memory store."""

    __slots__ = ("_durable", "_held", "execution_id")

    def __init__(self, durable: MemoryDurable, execution_id: str) -> None:
        self._durable = durable
        self.execution_id = execution_id
        self._held = True

    def link(self, resumed_by: str) -> None:
        """Note that ``resumed_by`` resumes the held record."""
        with self._durable._durable_lock:
            self._durable._links[self.execution_id] = resumed_by

    def release(self) -> None:
        """Let go of the record (idempotent)."""
        if self._held:
            self._held = False
            with self._durable._durable_lock:
                self._durable.held_records.discard(self.execution_id)


class MemoryDurable:
    """The durable-execution half of ``MemoryExecutionStore``, one of its bases.

    Keys, holds, links, cancel requests, decisions, signals and wake-ups (see
    ``store.durable``); the store supplies ``exists`` and ``_writing``, the
    ids its writers have open.
    """

    _writing: set[str]
    exists: Callable[[str], bool]

    def __init__(self) -> None:
        self._durable_lock = threading.Lock()
        self._keys: dict[str, tuple[str, str]] = {}
        self._held_keys: set[str] = set()
        self.held_records: set[str] = set()
        self._links: dict[str, str] = {}
        self._cancels: dict[str, JSONObject] = {}
        self._decisions: dict[str, set[str]] = {}
        self._signals: dict[str, list[JSONObject]] = {}
        #: (due_us, execution_id), soonest first
        self._wakeups: list[tuple[int, str]] = []

    def claim_key(
        self, key: str, envelope_hash: str, execution_id: str
    ) -> MemoryKeyClaim:
        """Claim ``key``, or return its claim (held if nobody holds it)."""
        with self._durable_lock:
            found = self._keys.get(key)
            created = found is None
            if found is None:
                found = self._keys[key] = (execution_id, envelope_hash)
            held = key not in self._held_keys
            if held:
                self._held_keys.add(key)
        return MemoryKeyClaim(self, key, found, created=created, held=held)

    def hold_record(self, execution_id: str) -> MemoryRecordHold | None:
        """Hold a record no one writes; None while it is written or held."""
        if not self.exists(execution_id):
            raise RecordNotFound(f"no record {execution_id}")
        with self._durable_lock:
            if execution_id in self._writing or execution_id in self.held_records:
                return None
            self.held_records.add(execution_id)
        return MemoryRecordHold(self, execution_id)

    def resumed_by(self, execution_id: str) -> str | None:
        """The execution that resumed ``execution_id``, if any."""
        with self._durable_lock:
            return self._links.get(execution_id)

    def request_cancel(self, origin: str, data: JSONObject) -> JSONObject | None:
        """Keep the chain's cancel request, once; the one made before, if any."""
        check_id(origin)
        with self._durable_lock:
            found = self._cancels.setdefault(origin, data)
        return None if found is data else found

    def cancel_requests(self, origins: Iterable[str]) -> dict[str, JSONObject]:
        """The cancel requests of these chains."""
        with self._durable_lock:
            return {o: self._cancels[o] for o in origins if o in self._cancels}

    def note_decision(self, action: str, record: str) -> None:
        """Count an operator's decision, once per record."""
        check_action(action)
        check_id(record)
        with self._durable_lock:
            self._decisions.setdefault(action, set()).add(record)

    def decision_counts(self) -> dict[str, int]:
        """The decisions counted, by action (``DecisionTally``)."""
        with self._durable_lock:
            return {a: len(self._decisions.get(a, ())) for a in DECISION_ACTIONS}

    def add_signal(self, origin: str, signal: JSONObject, *, cap: int) -> bool:
        """Keep ``signal`` for the chain unless it holds ``cap`` already."""
        check_id(origin)
        with self._durable_lock:
            kept = self._signals.setdefault(origin, [])
            if len(kept) >= cap:
                return False
            kept.append(signal)
        return True

    def signals(self, origin: str) -> list[JSONObject]:
        """The chain's signals, oldest first."""
        with self._durable_lock:
            return list(self._signals.get(origin, ()))

    def add_wakeup(self, execution_id: str, due_us: int) -> None:
        """Keep a wake-up (once per record and due time)."""
        entry = (due_us, check_id(execution_id))
        with self._durable_lock:
            at = bisect.bisect_left(self._wakeups, entry)
            if self._wakeups[at : at + 1] != [entry]:
                self._wakeups.insert(at, entry)

    def due_wakeups(self, until_us: int, limit: int) -> list[tuple[str, int]]:
        """The wake-ups due by ``until_us``, soonest first."""
        with self._durable_lock:
            end = bisect.bisect_right(self._wakeups, (until_us, "\uffff"))
            return [(e, d) for d, e in self._wakeups[: min(end, limit)]]

    def clear_wakeup(self, execution_id: str, due_us: int) -> None:
        """Forget one wake-up."""
        with self._durable_lock, contextlib.suppress(ValueError):
            self._wakeups.remove((due_us, execution_id))

    def find_by_idempotency_key(self, key: str) -> str | None:
        """The execution ``key`` names, if it was claimed."""
        check_idempotency_key(key)
        with self._durable_lock:
            found = self._keys.get(key)
        return None if found is None else found[0]

    def _forget(self, execution_ids: Collection[str]) -> None:
        """Drop the keys naming these records, and their resume links."""
        with self._durable_lock:
            for key in [k for k, (e, _) in self._keys.items() if e in execution_ids]:
                del self._keys[key]
            for execution_id in execution_ids:
                self._links.pop(execution_id, None)
                self._cancels.pop(execution_id, None)
                self._signals.pop(execution_id, None)
