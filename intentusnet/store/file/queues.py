"""The file store's queue slots and token buckets: lock files under ``queues/``.

Every process on the host that opens the store shares them::

    <root>/queues/<32 hex of sha256(scope)>/<n>.slot   slot n of a scope, held
                                                       with an exclusive flock
    <root>/queues/<32 hex of sha256(scope)>/bucket     "<tokens> <unix time>",
                                                       read and written under
                                                       its flock

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

from ..._util.files import FILE_MODE, make_dirs
from ...errors import StoreError

__all__ = ["FileQueues", "FileSlot"]

_FLAGS = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC


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

    def __init__(self, root: Path) -> None:
        self._dir = root / "queues"
        self.lock = threading.Lock()
        #: the slot files this process holds
        self.held: set[str] = set()

    def try_queue_slot(self, scope: str, count: int) -> FileSlot | None:
        """Take one of ``count`` slots of ``scope``; ``None`` if all are taken.

        Raises:
            StoreError: a slot file cannot be created or opened.
        """
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

        Raises:
            StoreError: the bucket file cannot be created, locked or written.
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
