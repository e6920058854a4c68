"""The file store's transparency log: ``<root>/log/``, its sequencer, its audit.

The store appends one leaf per record close (``tlog.sequencer``); this module
reads the record files for the two scans that need the records themselves:
the sequencer's *pending scan* (closed records not yet leaves) and the
audit's walk (every record, as ``log verify`` judges it against the leaves).
Both read the files, never the catalog: the catalog may be deleted.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Final

from ...errors import RecordIntegrityError, UnsupportedSchemaVersion
from ...record.keys import PublicKey, SigningKey
from ...record.model import ExecutionRecord, RecordStatus
from ...record.reader import parse_record
from ...record.signing import KeyRing
from ...tlog.audit import RecordState, log_origin, record_state
from ...tlog.cadence import LogCadence
from ...tlog.leaf import LogLeaf
from ...tlog.log import TileLog
from ...tlog.publish import LogWitnesses, publish_checkpoint
from ...tlog.sequencer import LogSequencer
from ..owner import owner_alive
from .files import headerless
from .layout import relative_path, walk_ids

__all__ = [
    "LOG_DIR",
    "log_folder",
    "open_sequencer",
    "pending_leaves",
    "record_states",
    "store_log",
    "store_logs",
]

#: The folder of the store's logs, one per signing key, inside the store's.
LOG_DIR: Final = "log"
_IN_PROGRESS: Final = RecordStatus.IN_PROGRESS


def log_folder(root: str | os.PathLike[str], key_id: str) -> Path:
    """The folder of the log the store keeps with key ``key_id``.

    One log per key: after a key rotation, the records the new key signs go
    to a log of their own (its origin names the new key), and the old log
    stays as it was, for its records and their proofs.
    """
    return Path(root) / LOG_DIR / key_id.replace(":", "-")


def store_log(
    root: str | os.PathLike[str], key_id: str, signing_key: SigningKey | None = None
) -> TileLog:
    """The store's log of key ``key_id``: read only, or appendable with the key."""
    path = log_folder(root, key_id)
    if signing_key is None:
        return TileLog(path)
    return TileLog(path, origin=log_origin(key_id), signing_key=signing_key)


def store_logs(root: str | os.PathLike[str]) -> list[TileLog]:
    """Every log of the store (a folder of ``log/`` with a checkpoint), in order."""
    try:
        names = sorted(os.listdir(Path(root) / LOG_DIR))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found = [TileLog(Path(root) / LOG_DIR / name) for name in names]
    return [log for log in found if (log.path / "checkpoint").is_file()]


def open_sequencer(
    root: str,
    key: SigningKey,
    cadence: LogCadence,
    since: float,
    witnesses: LogWitnesses | None = None,
) -> LogSequencer:
    """The sequencer appending the records the store closes to the key's log.

    ``since``: when the store started queuing the leaves of records it closes.
    ``witnesses``: who must cosign each checkpoint before it is published.
    """
    pending = partial(pending_leaves, root, key_id=key.key_id)
    log = store_log(root, key.key_id, key)
    publish = None
    if witnesses is not None:
        publish = partial(publish_checkpoint, log, key.public_key, witnesses)
    return LogSequencer(log, cadence, pending, since, publish)


def pending_leaves(
    root: str, since: float, before: float | None = None, *, key_id: str
) -> tuple[list[LogLeaf], float]:
    """The leaves of the records closed and last changed in [since, before).

    Only records signed by ``key_id``, or unsigned: a record another key
    signed belongs to that key's log.

    In the order the records last changed (closed), oldest first. Also the
    time a later scan may start from: ``before`` (default: now), or the last
    change of the oldest record found still open (its writer may be killed
    before it queues its leaf). Records that fail their checks are left out:
    the audit names them.
    """
    if before is None:
        before = time.time()
    until = before
    found: list[tuple[float, LogLeaf]] = []
    for execution_id in walk_ids(root):
        path = f"{root}/{relative_path(execution_id)}"
        try:
            changed = os.stat(path).st_mtime
            if not since <= changed < before:
                continue
            record = _load(path, execution_id)
        except (OSError, RecordIntegrityError, UnsupportedSchemaVersion):
            continue
        if record is None:
            continue
        if record.header.status is _IN_PROGRESS:
            until = min(until, changed)
            continue
        header = record.header
        if header.key_id not in (key_id, None):
            continue
        leaf = LogLeaf(execution_id, header.chain_head, header.key_id)
        found.append((changed, leaf))
    # The order they closed in; ids (time-sortable) order equal file times.
    found.sort(key=lambda pair: (pair[0], pair[1].execution_id))
    return [leaf for _, leaf in found], until


def record_states(root: str, key: PublicKey) -> Iterator[RecordState]:
    """Every record of the store, as the audit judges it against the leaves.

    A record whose chain fails, or whose signature by ``key`` fails, is
    ``damaged``; a file with no complete first line holds no record (its
    process was stopped while opening it) and is passed over. Only a record
    signed by ``key`` is ``expected`` in its log (an unsigned one may be there,
    by ``log backfill``; one another key signed is in that key's log).
    """
    ring = KeyRing([key])
    now = time.time()
    for execution_id in walk_ids(root):
        path = f"{root}/{relative_path(execution_id)}"
        try:
            age = now - os.stat(path).st_mtime
            record = _load(path, execution_id)
        except FileNotFoundError:
            continue
        except (OSError, RecordIntegrityError, UnsupportedSchemaVersion) as exc:
            yield RecordState(execution_id, True, None, frozenset(), 0.0, str(exc))
            continue
        if record is None:
            continue
        yield record_state(record, key, ring, age)


def _load(path: str, execution_id: str) -> ExecutionRecord | None:
    """The record in the file at ``path``; None for one with no header line."""
    with open(path, "rb") as file:
        data = file.read()
    if headerless(data):
        return None
    return parse_record(data, execution_id, lambda owner: owner_alive(path, owner))
