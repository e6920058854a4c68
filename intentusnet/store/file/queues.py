"""The file store's queue slots and token buckets: lock files under ``queues/``.

Every process on the host that opens the store shares them::

    <root>/queues/<32 hex of sha256(scope)>/<n>.slot   slot n of a scope, held
                                                       with an exclusive flock
    <root>/queues/<32 hex of sha256(scope)>/bucket     "<tokens> <unix time>",
                                                       read and written under
                                                       its flock
    <root>/queues/<32 hex of sha256(queue)>/queued/<priority>-<created>-<id>
                                                       an execution waiting
                                                       for a turn (empty; the
                                                       name sorts in order)

The kernel drops a ``flock`` when its process dies, however it dies, so a
router killed while it runs an execution gives its slot back at once. Within
one process each slot file is opened once per holder (a ``flock`` is per open
file), and the slots this process holds are skipped without a system call.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
import time
from hashlib import sha256
from pathlib import Path

from ..._util.files import FILE_MODE, fsync_dir, make_dirs
from ...errors import StoreError
from ..owner import owner_alive
from .layout import relative_path

__all__ = ["FileQueues", "FileSlot"]

_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
#: Added to a priority so that its entry's name sorts (priorities may be < 0).
_SHIFT = 1 << 62


class FileSlot:
    """A held slot file: its descriptor, locked until released."""

    __slots__ = ("_fd", "_queues", "path")

    def __init__(self, queues: FileQueues, path: str, fd: int) -> None:
        self._queues = queues
        self.path = path
        self._fd = fd

    def release(self) -> None:
        """Unlock and close the slot file (idempotent)."""
        with self._queues.lock:
            fd, self._fd = self._fd, -1
            if fd < 0:
                return
            self._queues.held.discard(self.path)
        os.close(fd)  # closing the last descriptor of the file drops its flock


class FileQueues:
    """The queue slots and buckets of one store root."""

    def __init__(self, root: Path, *, fsync: bool = False) -> None:
        self._root = root
        self._dir = root / "queues"
        self._fsync = fsync
        self.lock = threading.Lock()
        #: the slot files this process holds
        self.held: set[str] = set()
        #: entry names seen, by execution id (a dequeue need not list them)
        self._names: dict[str, str] = {}

    def enqueue_execution(self, queue: str, execution_id: str, priority: int) -> None:
        """Create the execution's entry (fsynced with its directory with fsync).

        Raises:
            StoreError: it cannot be created.
        """
        folder = os.path.join(self._folder(queue), "queued")
        # the name sorts by priority (shifted to be positive), then by time
        name = f"{priority + _SHIFT:020d}-{time.time_ns() // 1000:020d}-{execution_id}"
        path = os.path.join(folder, name)
        try:
            make_dirs(Path(folder))
            fd = os.open(path, _FLAGS, FILE_MODE)
            try:
                if self._fsync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if self._fsync:
                fsync_dir(folder)
        except OSError as exc:
            raise StoreError(f"cannot queue {execution_id}: {exc}") from exc

    def queued_executions(self, queue: str, limit: int) -> list[str]:
        """The first ``limit`` entries, in order, whose record no one holds."""
        found: list[str] = []
        for name in self._entries(queue):
            execution_id = name.split("-", 2)[2]
            record = os.path.join(self._root, relative_path(execution_id))
            if not owner_alive(record, None):
                found.append(execution_id)
                self._names[execution_id] = name
                if len(found) >= limit:
                    break
        return found

    def dequeue_execution(self, queue: str, execution_id: str) -> None:
        """Remove the execution's entry, if it is there."""
        folder = os.path.join(self._folder(queue), "queued")
        known = self._names.pop(execution_id, None)
        if known is not None:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(os.path.join(folder, known))
                return
        for name in self._entries(queue):
            if name.endswith(f"-{execution_id}"):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(os.path.join(folder, name))

    def _entries(self, queue: str) -> list[str]:
        try:
            return sorted(os.listdir(os.path.join(self._folder(queue), "queued")))
        except FileNotFoundError:
            return []

    def try_queue_slot(self, scope: str, count: int) -> FileSlot | None:
        """Take one of ``count`` slot files of ``scope``; ``None`` if all are taken."""
        folder = self._folder(scope)
        with self.lock:
            for n in range(count):
                path = os.path.join(folder, f"{n}.slot")
                if path in self.held:
                    continue
                fd = _open(path)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                    continue
                except OSError as exc:
                    os.close(fd)
                    raise StoreError(f"cannot lock queue slot {path}: {exc}") from exc
                self.held.add(path)
                return FileSlot(self, path, fd)
        return None

    def take_queue_token(self, scope: str, rate: float, burst: int) -> float:
        """Take a token of ``scope``'s bucket: ``0.0``, or the seconds to wait.

        A bucket file that cannot be read (never written, or cut by a crash
        mid-write) is a full bucket.
        """
        path = os.path.join(self._folder(scope), "bucket")
        fd = _open(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            now = time.time()
            tokens, then = _bucket(os.pread(fd, 64, 0), float(burst), now)
            tokens = min(float(burst), tokens + max(0.0, now - then) * rate)
            wait = 0.0 if tokens >= 1 else (1 - tokens) / rate
            if tokens >= 1:
                tokens -= 1
            text = f"{tokens!r} {now!r}".encode().ljust(64)
            os.pwrite(fd, text, 0)
        except OSError as exc:
            raise StoreError(f"cannot take a token of {path}: {exc}") from exc
        finally:
            os.close(fd)  # and its flock
        return wait

    def _folder(self, scope: str) -> str:
        return os.fspath(self._dir / sha256(scope.encode()).hexdigest()[:32])


def _open(path: str) -> int:
    """Open (creating) a slot or bucket file, and its directory if missing."""
    try:
        return os.open(path, _FLAGS, FILE_MODE)
    except FileNotFoundError:
        with contextlib.suppress(OSError):
            make_dirs(Path(path).parent)
    try:
        return os.open(path, _FLAGS, FILE_MODE)
    except OSError as exc:
        raise StoreError(f"cannot open queue file {path}: {exc}") from exc


def _bucket(data: bytes, full: float, now: float) -> tuple[float, float]:
    """(tokens, when) as the bucket file says; a full bucket if it says nothing."""
    try:
        tokens, then = (float(part) for part in data.split())
    except ValueError:
        return full, now
    return tokens, then
