"""The file store's idempotency keys, record holds and resume links.

Layout under the store's root::

    idempotency/<2 hex>/<sha256 of the key>.json  a link: "1 <execution id> <hash>"
    resumes/<2 hex>/<execution id>.next           the execution resuming it
    cancels/<2 hex>/<origin id>.json              a cancel request of a resume chain
    decisions/<action>/<execution id>             an operator's decision, counted

A key is claimed by creating its file as a symbolic link whose text is the
claim (``1 <execution id> <envelope hash>``, format 1): ``symlink()``
creates the name and its text in one system call, and fails if the name
exists, so of callers racing one key exactly one creates the claim, and no
claim is ever seen half written. Every later caller reads the claim
(``readlink``) and may act on it: who runs the key's execution is decided by
its record, whose creation is exclusive (``O_CREAT|O_EXCL``; a second creator gets
``RecordExists`` and waits for the first), and who resumes it by the
record's owner lock. So a crash leaves the key unclaimed (before the link)
or claimed by an execution whose record is missing (the next caller runs it
under the claimed id) or open (a resumer finishes it). One system call for a
new key, none at its release. A key file of an earlier build (a regular
file holding the claim, written under its ``flock``) is read as before and,
if its claimer died before writing the claim, claimed in place under that
lock.

A record is held with an exclusive non-blocking ``flock`` on its file, the
lock its writer holds until the record completes or closes.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import hashlib
import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Final

import orjson

from ..._util.files import FILE_MODE, fsync_dir, make_dirs, write_whole
from ..._util.jsonvalue import JSONObject
from ...errors import StoreError
from ..durable import DECISION_ACTIONS, check_action, check_idempotency_key
from ..ids import check_id
from .files import open_existing
from .layout import relative_path

KEYS_DIR: Final = "idempotency"
RESUMES_DIR: Final = "resumes"
CANCELS_DIR: Final = "cancels"
DECISIONS_DIR: Final = "decisions"
#: The first word of a key link's text: ``1 <execution id> <envelope hash>``.
_LINK_FORMAT: Final = "1"
#: Seconds to wait for the claim of an older key file a live process has locked.
_CLAIM_WAIT_S: Final = 5.0


class FileKeyClaim:
    """A key's claim as read from its file; every caller holds it (see the module).

    ``_fd`` is the lock of an older key file claimed in place, kept until
    ``release``; -1 otherwise.
    """

    __slots__ = ("_fd", "created", "envelope_hash", "execution_id")

    def __init__(
        self, execution_id: str, envelope_hash: str, *, created: bool, fd: int = -1
    ) -> None:
        self.execution_id = execution_id
        self.envelope_hash = envelope_hash
        self.created = created
        self._fd = fd

    @property
    def held(self) -> bool:
        """Always: the record's exclusive creation and owner lock decide who acts."""
        return True

    def release(self) -> None:
        """Let go of an older key file's lock, if one was taken (idempotent)."""
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
        """Write ``resumes/<2 hex>/<id>.next`` naming ``resumed_by``, whole."""
        directory = Path(self._root, RESUMES_DIR, relative_path(self.execution_id)[:2])
        target = f"{directory}/{self.execution_id}.next"
        try:
            write_whole(directory, target, resumed_by.encode(), self._fsync)
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


class FileDurable:
    """The durable-execution half of ``FileExecutionStore``, one of its bases.

    Keys, holds, resume links, cancel requests and decisions as files under
    the store's root (see the module); the store supplies ``_root`` and
    ``_fsync``.
    """

    _root: str
    _fsync: bool

    def claim_key(
        self, key: str, envelope_hash: str, execution_id: str
    ) -> FileKeyClaim:
        """Claim ``key`` for ``execution_id``, or read its claim.

        The claim file is on disk (fsynced with ``durability="fsync"``)
        before this returns.

        Raises:
            StoreError: the claim could not be written or read, or an older key
                file is locked by a live process that wrote no claim in it in
                time.
        """
        directory, path = _key_path(self._root, key)
        # Short enough to live in the link's inode on tmpfs (under 128 bytes).
        claim = f"{_LINK_FORMAT} {execution_id} {envelope_hash}"
        fsync = self._fsync
        try:
            try:
                os.symlink(claim, path)
            except FileNotFoundError:
                make_dirs(Path(directory))
                os.symlink(claim, path)
        except FileExistsError:
            return _claimed(path, directory, key, execution_id, envelope_hash, fsync)
        except OSError as exc:
            raise StoreError(f"idempotency key {key!r}: cannot claim: {exc}") from exc
        if fsync:
            fsync_dir(directory)
        return FileKeyClaim(execution_id, envelope_hash, created=True)

    def hold_record(self, execution_id: str) -> FileRecordHold | None:
        """Lock a record no process writes; None while another holds its lock."""
        path = f"{self._root}/{relative_path(check_id(execution_id))}"
        fd = open_existing(path, execution_id)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return None
        return FileRecordHold(self._root, execution_id, fd, self._fsync)

    def resumed_by(self, execution_id: str) -> str | None:
        """The id in ``execution_id``'s resume link, if it has one."""
        shard = relative_path(check_id(execution_id))[:2]
        path = f"{self._root}/{RESUMES_DIR}/{shard}/{execution_id}.next"
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

    def request_cancel(self, origin: str, data: JSONObject) -> JSONObject | None:
        """Write the chain's cancel request, once; the request made before, if any.

        Written whole under a hidden name, then hard-linked into place: the link
        fails if a request is there, so of two requests at once one is written.
        """
        directory, target = _cancel_path(self._root, check_id(origin))
        text = orjson.dumps(data)
        try:
            try:
                write_whole(directory, target, text, self._fsync, exclusive=True)
            except FileExistsError:
                return _cancel_request(self._root, origin) or {}
        except OSError as exc:
            raise StoreError(
                f"execution {origin}: cannot write its cancel request: {exc}"
            ) from exc
        return None

    def cancel_requests(self, origins: Iterable[str]) -> dict[str, JSONObject]:
        """The cancel requests of these chains (see ``store.durable.CancelStore``)."""
        found: dict[str, JSONObject] = {}
        for origin in origins:
            request = _cancel_request(self._root, check_id(origin))
            if request is not None:
                found[origin] = request
        return found

    def note_decision(self, action: str, record: str) -> None:
        """Count a decision: an empty file named for the record that holds it."""
        directory = Path(self._root, DECISIONS_DIR, check_action(action))
        path = f"{directory}/{check_id(record)}"
        try:
            make_dirs(directory)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC, FILE_MODE)
            os.close(fd)
            if self._fsync:
                fsync_dir(str(directory))
        except OSError as exc:
            raise StoreError(
                f"record {record}: cannot count its decision: {exc}"
            ) from exc

    def decision_counts(self) -> dict[str, int]:
        """How many of each decision were counted (the files of its directory).

        Raises:
            StoreError: a directory could not be read.
        """
        counts: dict[str, int] = {}
        for action in DECISION_ACTIONS:
            try:
                with os.scandir(Path(self._root, DECISIONS_DIR, action)) as entries:
                    counts[action] = sum(1 for _ in entries)
            except FileNotFoundError:
                counts[action] = 0
            except OSError as exc:
                raise StoreError(f"cannot count the {action} decisions: {exc}") from exc
        return counts

    def find_by_idempotency_key(self, key: str) -> str | None:
        """The execution ``key`` names, from its key file (StoreError: unreadable)."""
        found = _read_claim(_key_path(self._root, check_idempotency_key(key))[1])
        return None if found is None else found[0]


def _key_path(root: str, key: str) -> tuple[str, str]:
    digest = hashlib.sha256(key.encode("ascii")).hexdigest()
    directory = f"{root}/{KEYS_DIR}/{digest[:2]}"
    return directory, f"{directory}/{digest}.json"


def _claimed(
    path: str,
    directory: str,
    key: str,
    execution_id: str,
    envelope_hash: str,
    fsync: bool,
) -> FileKeyClaim:
    """The claim found in the existing key file ``path``."""
    try:
        found = _parse_link(os.readlink(path))
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise StoreError(
                f"cannot read the idempotency key file {path}: {exc}"
            ) from exc
        return _claim_older(path, directory, key, execution_id, envelope_hash, fsync)
    if found is None:  # not a claim of this store's: nothing to act on
        raise StoreError(f"the idempotency key file {path} holds no claim")
    return FileKeyClaim(*found, created=False)


def _claim_older(
    path: str,
    directory: str,
    key: str,
    execution_id: str,
    envelope_hash: str,
    fsync: bool,
) -> FileKeyClaim:
    """The claim of a key file written before claims were links, under its lock.

    Such a file with no whole claim in it whose lock is free was left by a
    claimer that died before writing it: nothing ran under it, so the claim
    is written in it here, this caller's. Locked, it is being written: the
    caller looks again shortly.

    Raises:
        StoreError: it could not be read or written, or a live process keeps
            it locked without a claim for longer than the wait.
    """
    deadline = time.monotonic() + _CLAIM_WAIT_S
    try:
        fd = os.open(path, os.O_RDWR | os.O_CLOEXEC)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    held = True
                except BlockingIOError:
                    held = False
                data = os.pread(fd, 65536, 0)
                found = _parse(data)
                if found is not None:
                    os.close(fd)
                    return FileKeyClaim(*found, created=False)
                if held:
                    claim = {
                        "key": key,
                        "executionId": execution_id,
                        "envelopeHash": envelope_hash,
                    }
                    os.ftruncate(fd, 0)  # empty, or half written by the dead
                    os.pwrite(fd, orjson.dumps(claim), 0)
                    if fsync:
                        os.fsync(fd)
                        fsync_dir(directory)
                    return FileKeyClaim(
                        execution_id, envelope_hash, created=True, fd=fd
                    )
                if time.monotonic() >= deadline:
                    raise StoreError(
                        f"the idempotency key file {path}: a live process locked "
                        f"it but wrote no claim in it within {_CLAIM_WAIT_S:g} s"
                    )
                time.sleep(0.001)  # its claimer is between creating and writing it
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise
    except StoreError:
        raise
    except OSError as exc:
        raise StoreError(
            f"cannot claim the idempotency key file {path}: {exc}"
        ) from exc


def _parse_link(text: str) -> tuple[str, str] | None:
    """``(execution id, envelope hash)`` of a key link's text; None if not a claim."""
    version, _, rest = text.partition(" ")
    execution_id, _, envelope_hash = rest.partition(" ")
    if version != _LINK_FORMAT or not envelope_hash:
        return None
    return execution_id, envelope_hash


def _parse(data: bytes) -> tuple[str, str] | None:
    """``(executionId, envelopeHash)`` of an older key file's whole claim, if any."""
    if not data:
        return None  # an older key file, new or left empty
    try:
        claim = orjson.loads(data)
        return str(claim["executionId"]), str(claim["envelopeHash"])
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None


def _cancel_path(root: str, origin: str) -> tuple[Path, str]:
    directory = Path(root, CANCELS_DIR, relative_path(origin)[:2])
    return directory, f"{directory}/{origin}.json"


def _cancel_request(root: str, origin: str) -> JSONObject | None:
    """The chain's cancel request, if one was made.

    Raises:
        StoreError: it could not be read.
    """
    try:
        with open(_cancel_path(root, origin)[1], "rb") as handle:
            found = orjson.loads(handle.read())
    except FileNotFoundError:
        return None
    except (OSError, orjson.JSONDecodeError) as exc:
        raise StoreError(
            f"execution {origin}: cannot read its cancel request: {exc}"
        ) from exc
    return found if isinstance(found, dict) else {}


def _read_claim(path: str) -> tuple[str, str] | None:
    try:
        return _parse_link(os.readlink(path))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise StoreError(
                f"cannot read the idempotency key file {path}: {exc}"
            ) from exc
    try:  # a regular file: written before claims were links
        with open(path, "rb") as handle:
            return _parse(handle.read())
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise StoreError(f"cannot read the idempotency key file {path}: {exc}") from exc


def forget(root: str, execution_id: str) -> None:
    """Delete what names a record about to be deleted: its key and resume link.

    The key is the one in the record's ``INTENT_RECEIVED`` line (its second),
    deleted only if its claim names this record (a resume's record carries
    the key of the chain's first). Missing files are nothing to delete.

    Raises:
        StoreError: a file could not be deleted.
    """
    key = _key_in(f"{root}/{relative_path(execution_id)}")
    shard = relative_path(execution_id)[:2]
    doomed = [
        f"{root}/{RESUMES_DIR}/{shard}/{execution_id}.next",
        _cancel_path(root, execution_id)[1],
    ]
    if key is not None:
        path = _key_path(root, key)[1]
        found = _read_claim(path)
        if found is not None and found[0] == execution_id:
            doomed.append(path)
    for path in doomed:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise StoreError(
                f"record {execution_id}: cannot delete {path}: {exc}"
            ) from exc


def _key_in(path: str) -> str | None:
    """The ``idempotencyKey`` of a record file's ``INTENT_RECEIVED`` line, if any."""
    try:
        with open(path, "rb") as handle:
            handle.readline()  # the header
            line = handle.readline()
    except OSError:
        return None  # no record file: no key of it to find
    try:
        event = orjson.loads(line)
        key = (
            event["data"]["idempotencyKey"]
            if event["type"] == "INTENT_RECEIVED"
            else None
        )
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return key if isinstance(key, str) and key.isascii() else None
