"""Auditing a log: its checkpoint, its tiles, its history, and the records.

:func:`audit_log` is what ``intentusnet log verify`` runs. It trusts nothing
but the log's public key and the checkpoints the caller remembers:

1. the newest checkpoint's signature (origin ``intentusnet/<key id>``);
2. every entry bundle and tile against it: the root is recomputed from the
   leaves, and each stored tile from the hashes below it;
3. with witnesses asked for, the checkpoint last published cosigned: a
   quorum of them must have cosigned it (else ``unwitnessed``), and it joins
   the known ones;
4. each remembered, trusted or cosigned checkpoint against it: one larger
   than the log is a rollback; one the log does not extend (its consistency
   proof, made from the tiles, fails; same size and another root) is a split
   view;
5. the leaves against the records, both ways (see :class:`RecordState`).

Each finding has a name and an exit code (:data:`FINDINGS`); docs/log.md
says what each one proves.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, NamedTuple

from ..errors import LogIntegrityError
from ..record.keys import PublicKey
from ..record.model import ExecutionRecord, RecordStatus
from ..record.signing import KeyRing, SignatureStatus
from .checkpoint import LogCheckpoint
from .cosignature import Cosigner, count_cosigners
from .leaf import LogLeaf
from .log import TileLog
from .merkle import HASH_SIZE, fold_perfect, leaf_hash, subtree_hash
from .tiles import TILE_WIDTH, tile_path

__all__ = [
    "FINDINGS",
    "LogAudit",
    "LogFinding",
    "RecordState",
    "audit_log",
    "log_origin",
    "open_known",
    "record_state",
]

#: Each finding's name and its exit code; with several, the command exits
#: with the highest.
FINDINGS: Final = {
    "hidden": 10,  # a closed record with no leaf
    "damaged": 11,  # a record that fails its own hash chain or signature
    "edited": 12,  # a record whose chain head is not its leaf's
    "deleted": 13,  # a leaf whose record is gone
    "log-damaged": 14,  # a checkpoint, tile or bundle that does not hold up
    "rollback": 15,  # the log is smaller than a checkpoint already accepted
    "split-view": 16,  # the log does not extend a checkpoint already accepted
    "unwitnessed": 17,  # no published checkpoint a quorum of witnesses cosigned
}


def log_origin(key_id: str) -> str:
    """The origin of the log a store keeps with key ``key_id``."""
    return f"intentusnet/{key_id}"


class LogFinding(NamedTuple):
    """One thing the audit found wrong. Added in 0.1.0."""

    name: str  # a key of FINDINGS
    execution_id: str | None
    detail: str

    @property
    def exit_code(self) -> int:
        """The finding's exit code (see :data:`FINDINGS`)."""
        return FINDINGS[self.name]


class RecordState(NamedTuple):
    """A record as the audit needs it, read from the store by the caller.

    Attributes:
        execution_id: the record.
        closed: its writer closed it, or is gone (not in progress).
        chain_head: its last line's hash (None for a damaged record).
        line_hashes: the hash of each of its lines.
        age: seconds since it last changed.
        problem: why it fails its own checks (hash chain, signature), or None.
        expected: it must be a leaf of this log once closed (signed by its
            key); else it is checked only if it is one.
    """

    execution_id: str
    closed: bool
    chain_head: str | None
    line_hashes: frozenset[str]
    age: float
    problem: str | None = None
    expected: bool = True


def record_state(
    record: ExecutionRecord, key: PublicKey, ring: KeyRing, age: float
) -> RecordState:
    """A record read back (its chain checked) as the audit judges it.

    One whose signature by ``key`` (``ring``: a ring of ``key`` alone) fails
    is damaged; one signed by another key is not expected in this log.
    """
    header = record.header
    check = ring.check(record)
    if check.status is SignatureStatus.SIGNED_INVALID:
        return RecordState(
            header.execution_id, True, None, frozenset(), 0.0, check.detail
        )
    lines = frozenset(
        [header.chain_head if not record.events else record.events[0].prev_hash]
        + [event.hash for event in record.events]
    )
    return RecordState(
        header.execution_id,
        header.status is not RecordStatus.IN_PROGRESS,
        header.chain_head,
        lines,
        age,
        expected=header.key_id == key.key_id,
    )


class LogAudit(NamedTuple):
    """What :func:`audit_log` found. Added in 0.1.0.

    Attributes:
        checkpoint: the log's checkpoint, checked (None: no log, or it failed).
        note: its signed note as stored, to remember when it holds up.
        findings: everything found wrong, log first, then records by id.
        leaves: leaves checked.
        records: records walked.
    """

    checkpoint: LogCheckpoint | None
    note: bytes | None
    findings: list[LogFinding]
    leaves: int
    records: int

    @property
    def history_holds(self) -> bool:
        """Whether the checkpoint may be remembered (no log-level finding)."""
        return self.checkpoint is not None and not any(
            f.name in ("log-damaged", "rollback", "split-view", "unwitnessed")
            for f in self.findings
        )


def audit_log(
    log: TileLog,
    key: PublicKey,
    *,
    known: Iterable[tuple[str, bytes]] = (),
    records: Iterable[RecordState] | None = None,
    grace: float = 60.0,
    witnesses: Sequence[Cosigner] = (),
    quorum: int = 0,
) -> LogAudit:
    """Check the log's newest checkpoint, tiles and history, and the records.

    Args:
        log: the log (read only).
        key: the log's public key; the origin is ``intentusnet/<its id>``.
        known: checkpoints accepted before (name, signed note): the one this
            verifier remembers, ``--trusted`` ones.
        records: every record of the store, or None to check the log alone.
        grace: a closed record changed less than this many seconds ago may
            wait for its leaf (the sequencer's cadence and more): not hidden.
        witnesses: the witnesses the reader trusts.
        quorum: how many of them must have cosigned the published checkpoint
            (0: none asked for).

    Raises:
        LogIntegrityError: a known checkpoint is not signed by ``key`` (it is
            the caller's input, not the log's).
    """
    origin = log_origin(key.key_id)
    olds = [(name, open_known(note, origin, key, name)) for name, note in known]
    findings: list[LogFinding] = []
    if quorum:
        cosigned = log.cosigned_note()
        problem = _unwitnessed(cosigned, origin, key, witnesses, quorum)
        if problem is not None:
            findings.append(LogFinding("unwitnessed", None, problem))
        elif cosigned is not None:
            olds.append(
                ("the cosigned checkpoint", LogCheckpoint.open(cosigned, origin, key))
            )
    note = log.checkpoint_note()
    if note is None:
        for name, old in olds:
            if old.size:
                findings.append(
                    LogFinding(
                        "rollback",
                        None,
                        f"the log is gone; {name} holds {old.size} leaves",
                    )
                )
        return LogAudit(None, None, findings, 0, 0)
    try:
        head = LogCheckpoint.open(note, origin, key)
        leaves = list(log.leaves(0, head.size))
        hashes = [leaf_hash(leaf) for leaf in leaves]
        _check_tiles(log, head, hashes)
        parsed = [LogLeaf.from_bytes(leaf) for leaf in leaves]
    except LogIntegrityError as exc:
        findings.append(LogFinding("log-damaged", None, str(exc)))
        return LogAudit(None, note, findings, 0, 0)
    for name, old in olds:
        if old.size > head.size:
            findings.append(
                LogFinding(
                    "rollback",
                    None,
                    f"the log holds {head.size} leaves; {name} held {old.size}",
                )
            )
        elif not head.proves_consistency(
            old, log.prove_consistency(old.size, head.size)
        ):
            findings.append(
                LogFinding(
                    "split-view",
                    None,
                    f"the log of {head.size} leaves does not extend {name} "
                    f"({old.size} leaves): two histories were signed",
                )
            )
    walked = 0
    if records is not None:
        heads: dict[str, list[str]] = {}
        deletions: set[str] = set()
        for leaf in parsed:
            if leaf.deleted:
                deletions.add(leaf.execution_id)
            else:
                heads.setdefault(leaf.execution_id, []).append(leaf.chain_head)
        found: list[LogFinding] = []
        for record in records:
            walked += 1
            found.extend(
                _record_findings(record, heads.pop(record.execution_id, None), grace)
            )
        for execution_id in heads.keys() - deletions:  # gone, its deletion unlogged
            found.append(
                LogFinding(
                    "deleted", execution_id, "the log holds it; the store does not"
                )
            )
        findings.extend(sorted(found, key=lambda f: (f.execution_id or "", f.name)))
    return LogAudit(head, note, findings, len(leaves), walked)


def open_known(note: bytes, origin: str, key: PublicKey, name: str) -> LogCheckpoint:
    """A remembered or trusted checkpoint, checked like the log's.

    Raises:
        LogIntegrityError: it is not a checkpoint of ``origin`` signed by ``key``.
    """
    try:
        return LogCheckpoint.open(note, origin, key)
    except LogIntegrityError as exc:
        raise LogIntegrityError(f"{name}: {exc}") from None


def _unwitnessed(
    note: bytes | None,
    origin: str,
    key: PublicKey,
    witnesses: Sequence[Cosigner],
    quorum: int,
) -> str | None:
    """Why ``note`` is not cosigned by ``quorum`` of ``witnesses``, or None."""
    if note is None:
        return "the log has published no cosigned checkpoint"
    try:
        LogCheckpoint.open(note, origin, key)
    except LogIntegrityError as exc:
        return f"the cosigned checkpoint: {exc}"
    count, problems = count_cosigners(note, witnesses)
    if count < quorum:
        failed = "".join(f"; {p}" for p in problems)
        return (
            f"the published checkpoint holds {count} valid cosignatures of the "
            f"{len(witnesses)} witnesses given, {quorum} needed{failed}"
        )
    return None


def _record_findings(
    record: RecordState, heads: list[str] | None, grace: float
) -> list[LogFinding]:
    if record.problem is not None:
        return [LogFinding("damaged", record.execution_id, record.problem)]
    if heads is None:
        if record.closed and record.expected and record.age >= grace:
            return [
                LogFinding("hidden", record.execution_id, "closed, and not in the log")
            ]
        return []
    if record.chain_head not in heads and record.closed:
        return [
            LogFinding(
                "edited",
                record.execution_id,
                f"its chain head {record.chain_head} is none of its leaves' "
                f"({', '.join(heads)})",
            )
        ]
    cut = [h for h in heads if h not in record.line_hashes]
    if cut:
        return [
            LogFinding(
                "edited",
                record.execution_id,
                f"a line the log holds is gone from it (chain head {cut[0]})",
            )
        ]
    return []


class _Perfect:
    """Complete subtrees of a list of leaf hashes (levels kept as computed)."""

    def __init__(self, hashes: list[bytes]) -> None:
        self._levels = [hashes]

    def level(self, height: int) -> list[bytes]:
        """The roots of the complete subtrees of ``2**height`` leaves, in order."""
        levels = self._levels
        while len(levels) <= height:
            below = levels[-1]
            levels.append(
                [fold_perfect(below[i : i + 2]) for i in range(0, len(below) - 1, 2)]
            )
        return levels[height]

    def hash(self, start: int, height: int) -> bytes:
        return self.level(height)[start >> height]


def _check_tiles(log: TileLog, head: LogCheckpoint, hashes: list[bytes]) -> None:
    """Every tile the checkpoint reaches holds the hashes the leaves give.

    Raises:
        LogIntegrityError: the root, or a tile, disagrees.
    """
    perfect = _Perfect(hashes)
    if subtree_hash(0, head.size, perfect.hash) != head.root:
        raise LogIntegrityError(
            f"the log's leaves do not give its checkpoint's root (size {head.size})"
        )
    level, row = 0, hashes
    while row:
        for index in range((len(row) + TILE_WIDTH - 1) // TILE_WIDTH):
            want = row[index * TILE_WIDTH : (index + 1) * TILE_WIDTH]
            data = log.tile(level, index, len(want))
            if data is None or data[: len(want) * HASH_SIZE] != b"".join(want):
                path = tile_path(level, index, len(want))
                raise LogIntegrityError(
                    f"the log's tile {path} disagrees with its leaves"
                )
        level += 1
        row = perfect.level(8 * level)
