"""The replay engine: the recorded answer of an execution, without running it.

Replay reads only the record: it never runs agent code, calls a model or
touches anything outside the record (DESIGN §6). A record that is not
replayable is refused unless the caller forces it, and a forced replay always
says, in ``warnings``, what it could not guarantee. ``ReplayEngine.events()``
walks the record line by line, checking each line's hash as it goes (what
``intentusnet replay ID --step`` shows).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Final, NamedTuple, Protocol, runtime_checkable

from ._util.jsonvalue import JSONObject, JSONValue
from .errors import ReplayHashMismatch, ReplayNotAllowed
from .hashing import compute_hash, hashed_view
from .record.model import EventType, ExecutionEvent, ExecutionRecord
from .record.verify import RecordLines

if TYPE_CHECKING:
    from .record.signing import KeyRing, SignatureCheck
    from .store.protocol import ExecutionStore

__all__ = [
    "MAX_DIFF_PATHS",
    "RecordBytes",
    "ReplayEngine",
    "ReplayResult",
    "VerifiedEvent",
    "diff_paths",
]

#: At most this many differing paths are reported by ReplayHashMismatch.
MAX_DIFF_PATHS: Final = 50


class _HasWire(Protocol):
    def to_wire(self) -> JSONObject: ...


@runtime_checkable
class RecordBytes(Protocol):
    """A store that hands out a record's exact bytes (every store here does)."""

    def raw(self, execution_id: str) -> bytes:
        """The record's bytes, as stored."""
        ...


class VerifiedEvent(NamedTuple):
    """One line of a record, with its hash checked. Added in 0.1.0.

    Attributes:
        line: the line's number in the record, from 1 (line 1 is the header).
        event: the event the line holds; ``None`` for the header line, or for
            a line too damaged to read.
        hash: the hash the line states (``"sha256:<hex>"``).
        ok: the line's bytes hash to it, and it links to the line before.
        problem: what is wrong with the line, when not ``ok``.
        verified: lines verified so far, this one included.
        total: the record's lines.
    """

    line: int
    event: ExecutionEvent | None
    hash: str
    ok: bool
    problem: str | None
    verified: int
    total: int

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        return {
            "line": self.line,
            "event": None if self.event is None else self.event.to_json(),
            "hash": self.hash,
            "ok": self.ok,
            "problem": self.problem,
            "verified": self.verified,
            "total": self.total,
        }


class ReplayResult(NamedTuple):
    """What a replay returns: the recorded answer and how it was obtained.

    Attributes:
        payload: the recorded response payload (``None`` for an error response,
            or a forced partial replay that found no agent output).
        metadata: the recorded response metadata, as recorded.
        status: ``"success"`` or ``"error"``, as recorded.
        error: the recorded ``ErrorInfo`` wire dict, or ``None``.
        from_replay: always ``True``.
        original_execution_id: the record replayed.
        forced: the record was not replayable and ``force=True`` overrode that.
        partial: the execution never finished; this is the best it recorded.
        warnings: what the caller should know, one sentence each.
    """

    payload: JSONObject | None
    metadata: JSONObject
    status: str
    error: JSONObject | None
    original_execution_id: str
    from_replay: bool = True
    forced: bool = False
    partial: bool = False
    warnings: tuple[str, ...] = ()

    def to_json(self) -> JSONObject:
        """Return the camelCase wire form."""
        warnings: list[JSONValue] = list(self.warnings)
        return {
            "payload": self.payload,
            "metadata": self.metadata,
            "status": self.status,
            "error": self.error,
            "fromReplay": self.from_replay,
            "originalExecutionId": self.original_execution_id,
            "forced": self.forced,
            "partial": self.partial,
            "warnings": warnings,
        }


class ReplayEngine:
    """Replays one execution record.

    Example::

        engine = ReplayEngine(store.load(execution_id))
        ok, reason = engine.is_replayable()
        result = engine.replay()  # ReplayNotAllowed(reason) unless ok

    Args:
        record: the record to replay.
        store: where it came from; a re-run loads child records from it.
        keys: check the record's signatures first (added in 0.1.0): a record
            the ring does not accept (``signed-invalid``, ``unknown-key``, or
            ``unsigned`` when the ring requires a signature) is refused, and
            ``force`` does not override that.

    Raises:
        SignatureError: ``keys`` given, and they do not accept the record.
    """

    def __init__(
        self,
        record: ExecutionRecord,
        *,
        store: ExecutionStore | None = None,
        keys: KeyRing | None = None,
    ) -> None:
        #: what ``keys`` found of the record's signatures (None without keys)
        self.signature: SignatureCheck | None = (
            None if keys is None else keys.enforce(record)
        )
        self.record = record
        #: where the record came from; a re-run loads child records from it
        self.store = store

    @classmethod
    def from_store(
        cls,
        store: ExecutionStore,
        execution_id: str,
        *,
        keys: KeyRing | None = None,
    ) -> ReplayEngine:
        """Load ``execution_id`` from ``store`` (verifying it) and wrap it.

        Raises:
            RecordNotFound, InvalidExecutionId, RecordIntegrityError: from the store.
            SignatureError: ``keys`` given, and they do not accept the record.
        """
        return cls(store.load(execution_id), store=store, keys=keys)

    def events(self, data: bytes | None = None) -> Iterator[VerifiedEvent]:
        """Yield the record's lines one at a time, each line's hash checked.

        The header line comes first, then each event. A line is verified when
        it is yielded: its bytes hash to the hash it states, it links to the
        line before, and it may follow the lines before it (no event after a
        signed record was closed, a ``SIGNATURE`` line only where its header
        names a key, and a signed record's last line is its signature): the
        checks ``verify`` makes, so a walk shows where a record was changed.
        Reads the record's bytes from the engine's store, or ``data``. Added
        in 0.1.0.

        Raises:
            ValueError: no bytes to check: the engine has no store that gives
                them out, and ``data`` is not given.
        """
        if data is None:
            store = self.store
            if not isinstance(store, RecordBytes):
                raise ValueError(
                    "events() checks the record's bytes: open the engine with "
                    "ReplayEngine.from_store(store, id), or pass data="
                )
            data = store.raw(self.record.execution_id)
        walk = RecordLines(data, self.record.execution_id)
        total, verified = len(walk.lines), 0
        for line in walk:
            problem = line.problem
            if problem is None and line.number == total:
                problem = walk.end_problem()  # a signed record closed unsigned
            verified += problem is None
            yield VerifiedEvent(
                line.number,
                line.event,
                "sha256:" + line.stated.decode(errors="replace"),
                problem is None,
                problem,
                verified,
                total,
            )

    def is_replayable(self) -> tuple[bool, str | None]:
        """Return whether the record may be replayed and, if not, why."""
        header = self.record.header
        reason = header.replayable_reason
        return header.replayable, None if reason is None else reason.value

    def replay(
        self,
        env: JSONObject | _HasWire | None = None,
        force: bool = False,
    ) -> ReplayResult:
        """Return the recorded response.

        Args:
            env: if given (wire dict or an object with ``to_wire()``), it must hash
                to the recorded envelope hash.
            force: replay a record that is not replayable, with warnings; an
                unfinished record gives its last successful agent output,
                ``partial=True``.

        Raises:
            ReplayNotAllowed: the record is not replayable and ``force`` is False.
            ReplayHashMismatch: ``env`` is not the envelope the record was made
                from; carries both hashes and the differing paths.
            EnvelopeValidationError: ``env`` holds values JSON cannot carry.
        """
        record = self.record
        header = record.header
        ok, reason = self.is_replayable()
        if not ok and not force:
            raise ReplayNotAllowed(reason or "unknown", header.execution_id)
        if env is not None:
            wire = env if isinstance(env, dict) else env.to_wire()
            expected, actual = header.envelope_hash, compute_hash(wire)
            if actual != expected:
                paths = diff_paths(hashed_view(record.envelope), hashed_view(wire))
                raise ReplayHashMismatch(expected, actual, paths)
        warnings: list[str] = []
        if not ok:
            warnings.append(
                f"record {header.execution_id} is not replayable ({reason}); "
                "replayed only because force=True"
            )
        response = record.final_response
        if response is None:
            return self._partial(warnings, forced=not ok)
        payload, error, metadata = (
            response.get("payload"),
            response.get("error"),
            response.get("metadata"),
        )
        return ReplayResult(
            payload=payload if isinstance(payload, dict) else None,
            metadata=dict(metadata) if isinstance(metadata, dict) else {},
            status=str(response.get("status", "success")),
            error=error if isinstance(error, dict) else None,
            original_execution_id=header.execution_id,
            forced=not ok,
            warnings=tuple(warnings),
        )

    def _partial(self, warnings: list[str], *, forced: bool) -> ReplayResult:
        record = self.record
        # What the execution did; a signature closing the record is no step of it.
        events = [e for e in record.events if e.type is not EventType.SIGNATURE]
        last = events[-1] if events else None
        progress = (
            f"{len(events)} events recorded, the last {last.type.value} at "
            f"{last.at_ms:.3f} ms"
            if last is not None
            else "no event recorded after the header"
        )
        warnings.append(f"the execution never finished: {progress}")
        if record.torn_tail:
            warnings.append("the record ends in a partly written line, left out")
        done = next(
            (
                e
                for e in reversed(events)
                if e.type is EventType.AGENT_ATTEMPT_END
                and e.data.get("outcome") == "success"
            ),
            None,
        )
        metadata: JSONObject = {
            "executionId": record.execution_id,
            "envelopeHash": record.header.envelope_hash,
            "eventsRecorded": len(events),
            "lastEvent": None if last is None else last.type.value,
            "durationMs": None if last is None else last.at_ms,
            "agent": None,
        }
        payload: JSONObject | None = None
        error: JSONObject | None = None
        if done is None:
            warnings.append("no agent finished before the record ends; payload is None")
            error = {
                "code": "CANCELLED",
                "message": "the execution stopped before any agent finished",
                "agent": None,
                "retryable": False,
                "details": {"executionId": record.execution_id},
            }
        else:
            output = done.data.get("output")
            agent = done.data.get("agent")
            metadata["agent"] = agent
            warnings.append(
                f"partial result: the output of agent {agent!r} (attempt "
                f"{done.data.get('attempt')}, event {done.seq}), the last agent "
                "that finished successfully"
            )
            payload = output if isinstance(output, dict) else None
        return ReplayResult(
            payload=payload,
            metadata=metadata,
            status="error" if done is None else "success",
            error=error,
            original_execution_id=record.execution_id,
            forced=forced,
            partial=True,
            warnings=tuple(warnings),
        )


def diff_paths(
    recorded: JSONValue, given: JSONValue, limit: int = MAX_DIFF_PATHS
) -> list[str]:
    """Return the JSON paths at which two values differ (at most ``limit``).

    Numbers compare by value (``1 == 1.0``, as in canonical JSON); ``True`` and
    ``1`` differ. A path looks like ``payload.items[3].price``; a key present on
    one side only is reported at its own path.
    """
    found: list[str] = []
    _diff(recorded, given, "", found, limit)
    return found


def _diff(
    left: JSONValue, right: JSONValue, where: str, found: list[str], limit: int
) -> None:
    # Recursion is bounded: both sides passed check_json (depth <= 200).
    if isinstance(left, dict) and isinstance(right, dict):
        for key in sorted(left.keys() | right.keys()):
            if len(found) >= limit:
                return
            child = _child(where, key)
            if key in left and key in right:
                _diff(left[key], right[key], child, found, limit)
            else:
                found.append(child)
    elif isinstance(left, list) and isinstance(right, list):
        for index in range(max(len(left), len(right))):
            if len(found) >= limit:
                return
            if index < len(left) and index < len(right):
                _diff(left[index], right[index], f"{where}[{index}]", found, limit)
            else:
                found.append(f"{where}[{index}]")
    elif not _same(left, right):
        found.append(where or "$")


def _child(where: str, key: str) -> str:
    if key.isidentifier():
        return f"{where}.{key}" if where else key
    return f"{where}[{key!r}]"


def _same(left: JSONValue, right: JSONValue) -> bool:
    if type(left) is bool or type(right) is bool:
        return left is right
    if isinstance(left, int | float) and isinstance(right, int | float):
        return left == right
    return type(left) is type(right) and left == right
