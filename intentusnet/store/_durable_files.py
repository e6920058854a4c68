"""The file store's idempotency keys, record holds and resume links.

Layout under the store's root::

    idempotency/<2 hex>/<sha256 of the key>.json  {"key", "executionId", "envelopeHash"}
    resumes/<2 hex>/<execution id>.next           the id of the execution resuming it

A key file is written whole under a dot name, locked, fsynced (with
``durability="fsync"``) and then hard-linked to its name, which fails if
the name exists: the link is the atomic claim, and no reader ever sees half
a claim. Its creator keeps the file's ``flock`` until it lets go of the
claim; the kernel drops it however the process dies, so a key file nobody
locks belongs to no live process, and the next caller to lock it holds it.

A record is held with an exclusive non-blocking ``flock`` on its file, the
lock its writer holds until the record completes or closes.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from pathlib import Path
from typing import Final

import orjson

from .._util.files import FILE_MODE, fsync_dir, make_dirs
from .._util.ids import uuid7_hex
from ..errors import StoreError
from ._files import open_existing
from ._layout import relative_path

KEYS_DIR: Final = "idempotency"
RESUMES_DIR: Final = "resumes"


class FileKeyClaim:
    """A key's claim as read from its file; ``held`` while ``fd`` holds the lock."""

    __slots__ = ("_fd", "created", "envelope_hash", "execution_id")

    def __init__(
        self, execution_id: str, envelope_hash: str, fd: int, *, created: bool
    ) -> None:
        self.execution_id = execution_id
        self.envelope_hash = envelope_hash
        self.created = created
        self._fd = fd

    @property
    def held(self) -> bool:
        """This caller holds the claim until ``release``."""
        return self._fd >= 0

    def release(self) -> None:
        """Let go of the claim's lock (idempotent)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


class FileRecordHold:
    """An exclusive ``flock`` on a record file, and where its resume link goes."""

    __slots__ = ("_fd", "_fsync", "_root", "execution_id")

    def __init__(self, root: str, execution_id: str, fd: int, fsync: bool) -> None:
        self._root = root
        self.execution_id = execution_id
        self._fd = fd
        self._fsync = fsync

    def link(self, resumed_by: str) -> None:
        """Write ``resumes/<2 hex>/<id>.next`` naming ``resumed_by`` (replaced whole).

        Raises:
            StoreError: it could not be written.
        """
        directory = Path(self._root, RESUMES_DIR, relative_path(self.execution_id)[:2])
        target = f"{directory}/{self.execution_id}.next"
        try:
            _write_whole(directory, target, resumed_by.encode(), self._fsync)
        except OSError as exc:
            raise StoreError(
                f"record {self.execution_id}: cannot write its resume link: {exc}"
            ) from exc

    def release(self) -> None:
        """Let go of the record's lock (idempotent)."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            with contextlib.suppress(OSError):
                os.close(fd)


def _write_whole(directory: Path, target: str, data: bytes, fsync: bool) -> None:
    """Write ``data`` to a dot file beside ``target`` and rename it into place."""
    make_dirs(directory)
    hidden = f"{directory}/.{uuid7_hex()}"
    fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(hidden, target)
    if fsync:
        fsync_dir(str(directory))


def _key_path(root: str, key: str) -> tuple[Path, str]:
    digest = hashlib.sha256(key.encode("ascii")).hexdigest()
    directory = Path(root, KEYS_DIR, digest[:2])
    return directory, f"{directory}/{digest}.json"


def claim_key(
    root: str, key: str, envelope_hash: str, execution_id: str, *, fsync: bool
) -> FileKeyClaim:
    """Claim ``key`` for ``execution_id``, or read (and maybe hold) its claim.

    Raises:
        StoreError: the claim could not be written or read.
    """
    directory, path = _key_path(root, key)
    try:
        while True:
            found = _existing(path, key)
            if found is not None:
                return found
            made = _create(directory, path, key, envelope_hash, execution_id, fsync)
            if made is not None:
                return made
            # another process linked the name first: read its claim
    except OSError as exc:
        raise StoreError(f"idempotency key {key!r}: cannot claim: {exc}") from exc


def _existing(path: str, key: str) -> FileKeyClaim | None:
    """The claim in ``path``, held if no live process holds it; None if none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held = True
    except BlockingIOError:
        held = False
    try:
        data = orjson.loads(os.pread(fd, 65536, 0))
    except (OSError, orjson.JSONDecodeError) as exc:
        os.close(fd)
        raise StoreError(f"idempotency key {key!r}: its claim is damaged") from exc
    claim = FileKeyClaim(
        str(data["executionId"]), str(data["envelopeHash"]), fd, created=False
    )
    if not held:
        claim.release()
    return claim


def _create(
    directory: Path,
    path: str,
    key: str,
    envelope_hash: str,
    execution_id: str,
    fsync: bool,
) -> FileKeyClaim | None:
    """Write the claim and link it to ``path``; None if ``path`` exists."""
    make_dirs(directory)
    hidden = f"{directory}/.{uuid7_hex()}"
    fd = os.open(hidden, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        data = {"key": key, "executionId": execution_id, "envelopeHash": envelope_hash}
        os.write(fd, orjson.dumps(data))
        if fsync:
            os.fsync(fd)
        try:
            os.link(hidden, path)
        except FileExistsError:
            os.close(fd)
            return None
        if fsync:
            fsync_dir(str(directory))
    except BaseException:
        with contextlib.suppress(OSError):
            os.close(fd)
        raise
    finally:
        with contextlib.suppress(OSError):
            os.unlink(hidden)
    return FileKeyClaim(execution_id, envelope_hash, fd, created=True)


def hold_record(root: str, execution_id: str, *, fsync: bool) -> FileRecordHold | None:
    """Lock the record file; None while another open file description locks it.

    Raises:
        RecordNotFound: there is no such record.
    """
    fd = open_existing(f"{root}/{relative_path(execution_id)}", execution_id)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return FileRecordHold(root, execution_id, fd, fsync)


def resumed_by(root: str, execution_id: str) -> str | None:
    """The id in ``execution_id``'s resume link, if it has one."""
    path = f"{root}/{RESUMES_DIR}/{relative_path(execution_id)[:2]}/{execution_id}.next"
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("ascii", "replace").strip()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(
            f"record {execution_id}: cannot read its resume link: {exc}"
        ) from exc
    return text or None
