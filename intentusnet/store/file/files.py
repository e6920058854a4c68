"""Record files: exclusive creation, whole reads, and appends to finished records."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..._util.files import FILE_MODE, fsync_dir, make_dirs
from ..._util.time import utc_now
from ...errors import RecordExists, RecordNotFound, StoreError
from ...record.model import RecordStatus, VerifyReport
from ...record.reader import parse_record
from ...record.verify import verify_bytes
from ..rows import catalog_mismatch, cross_check

if TYPE_CHECKING:  # the catalog (sqlite3) is not needed to read a record
    from ...record.keys import SigningKey
    from ..rows import CatalogRow

_CREATE: Final = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC
_CHUNK: Final = 65536
#: Statuses of rows that may be ahead of their file (opening, never written).
_UNWRITTEN: Final = (
    RecordStatus.IN_PROGRESS.value,
    RecordStatus.RECORDING_FAILURE.value,
)


def create(root: str, relative: str, line: bytes, *, fsync: bool) -> int:
    """Create ``root/relative`` exclusively (0600), lock it, write line 1.

    Returns the open descriptor; the writer holds an exclusive ``flock`` on it
    until the record completes or is closed, which tells readers it is live.

    Raises:
        RecordExists: the file exists already.
        StoreError: it could not be created or written (nothing is left behind).
    """
    path = f"{root}/{relative}"
    execution_id = relative[3:-6]
    fd = -1
    for _attempt in range(2):
        try:
            fd = os.open(path, _CREATE, FILE_MODE)
            break
        except FileNotFoundError:
            if make_dirs(Path(root, relative[:2])) and fsync:
                fsync_dir(root)
                fsync_dir(os.path.dirname(os.path.abspath(root)))
        except FileExistsError:
            raise RecordExists(
                f"record {execution_id} already exists in store {root}; "
                "records are never rewritten"
            ) from None
        except OSError as exc:
            raise StoreError(f"record {execution_id}: cannot create: {exc}") from exc
    if fd < 0:
        raise StoreError(f"record {execution_id}: cannot create {path}")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.write(fd, line) != len(line):
            raise OSError(28, "short write of the header line")
        if fsync:
            os.fsync(fd)
            fsync_dir(f"{root}/{relative[:2]}")
    except OSError as exc:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(path)  # a record that never opened must not look torn
        raise StoreError(
            f"record {execution_id}: cannot write its header: {exc}"
        ) from exc
    return fd


def headerless(data: bytes) -> bool:
    """Whether a record file has no complete first line (a recording failure).

    Its process was stopped between creating the file and writing the header:
    nothing was recorded, and nothing was tampered with.
    """
    return b"\n" not in data


def saw_header(row: CatalogRow) -> bool:
    """Whether the catalog saw this record settled, header and all.

    Only then does a file without a complete first line mean lines were cut
    from it; a row of a record still opening (or never opened) says nothing of
    what reached the file.
    """
    return row.status not in _UNWRITTEN and row.lines > 0


def cut_from(data: bytes, row: CatalogRow) -> str | None:
    """How a file with no complete first line lost lines its row saw, or None."""
    return (
        catalog_mismatch(data, row.lines, row.chain_head) if saw_header(row) else None
    )


def verify_file(data: bytes, execution_id: str, row: CatalogRow | None) -> VerifyReport:
    """Check a record file's bytes, and what the catalog remembers of it.

    A file with no complete first line gives a valid report marked
    ``recording_failure``, with a note, unless the catalog saw lines in it.

    Raises:
        UnsupportedSchemaVersion: the record is of a newer format.
    """
    if headerless(data):
        report = VerifyReport(
            execution_id,
            0,
            0,
            (),
            valid=True,
            notes=(
                f"recording failure: the file has no complete first line "
                f"({len(data)} bytes); its process was stopped between creating "
                "it and writing the header, so nothing was recorded. Not "
                "evidence of tampering; `intentusnet prune` removes it",
            ),
            recording_failure=True,
        )
    else:
        report = verify_bytes(data, execution_id)
    return cross_check(report, data, row)


def open_existing(path: str, execution_id: str, flags: int = os.O_RDONLY) -> int:
    """Open a record file, raising RecordNotFound if there is none."""
    try:
        return os.open(path, flags | os.O_CLOEXEC)
    except FileNotFoundError:
        raise not_found(execution_id, os.path.dirname(os.path.dirname(path))) from None
    except OSError as exc:
        raise StoreError(f"record {execution_id}: cannot open: {exc}") from exc


def not_found(execution_id: str, root: str) -> RecordNotFound:
    """The error for a record that does not exist."""
    return RecordNotFound(f"no record {execution_id} in store {root}")


def read(path: str, execution_id: str) -> bytes:
    """Return a record file's bytes."""
    fd = open_existing(path, execution_id)
    try:
        return read_all(fd)
    finally:
        os.close(fd)


def read_all(fd: int) -> bytes:
    """Read a whole file from offset 0 (one system call for most records)."""
    chunk = os.pread(fd, _CHUNK, 0)
    if len(chunk) < _CHUNK:
        return chunk
    parts = [chunk]
    offset = len(chunk)
    while chunk:
        chunk = os.pread(fd, 1 << 20, offset)
        parts.append(chunk)
        offset += len(chunk)
    return b"".join(parts)


def append_invalidated(
    path: str,
    execution_id: str,
    reason: str,
    *,
    fsync: bool,
    signer: SigningKey | None = None,
) -> None:
    """Append an ``INVALIDATED`` line to a record no process is writing.

    A torn last line left by a crash is cut off first (it holds no complete
    event), so that the new line continues the chain. A signed record gets a
    ``SIGNATURE`` by ``signer`` after it, in the same write. A record invalidated
    already is left as it is: its first reason stands.

    Raises:
        RecordNotFound, RecordIntegrityError: as for loading the record.
        StoreError: a process is still writing it, or the write failed.
        SigningKeyError: the record is signed and there is no ``signer``.
    """
    # The signing module: loaded to invalidate, never to read a record.
    from ...record.signing import invalidated, invalidated_lines

    fd = open_existing(path, execution_id, os.O_RDWR | os.O_APPEND)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(
                f"record {execution_id} is still being written; invalidate it "
                "once it has finished"
            ) from None
        data = read_all(fd)
        record = parse_record(data, execution_id, lambda _owner: False)
        if invalidated(record):
            return
        line = invalidated_lines(record, reason, utc_now()[1], signer)
        if record.torn_tail:
            os.ftruncate(fd, data.rfind(b"\n") + 1)
        if os.write(fd, line) != len(line):
            raise OSError(28, "short write")
        if fsync:
            os.fsync(fd)
    except StoreError:
        raise
    except OSError as exc:
        raise StoreError(f"record {execution_id}: cannot invalidate: {exc}") from exc
    finally:
        os.close(fd)
