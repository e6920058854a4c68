"""A witness: cosigns a log's checkpoint only if it extends the last one it cosigned.

The request and answers of C2SP tlog-witness ``add-checkpoint``
(c2sp.org/tlog-witness). :class:`Witness` checks a request, and for each log
keeps the checkpoint it last cosigned in a file of its state folder
(``<sha256(origin) hex>.checkpoint``). The new checkpoint is written there
(a temporary file, flushed, renamed, the folder flushed) before the
cosignature is made, and checking and writing happen under one lock: a
witness killed at any point, then restarted, never cosigns a checkpoint that
does not extend one it cosigned.

The log's side: :func:`request_cosignature` asks one witness for its
cosignature (the HTTP is the caller's: ``intentusnet log publish``).
"""

from __future__ import annotations

import base64
import binascii
import fcntl
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from hashlib import sha256
from pathlib import Path
from typing import Final, NamedTuple

from .._util.files import FILE_MODE, fsync_dir, make_dirs
from ..errors import LogError, LogIntegrityError
from ..record.keys import PublicKey, SigningKey
from .checkpoint import LogCheckpoint
from .cosignature import Cosigner, cosign, count_cosigners
from .log import TileLog
from .merkle import EMPTY_ROOT, HASH_SIZE

__all__ = [
    "SIZE_TYPE",
    "Witness",
    "WitnessAnswer",
    "add_checkpoint_body",
    "parse_add_checkpoint",
    "request_cosignature",
]

#: The content type of a 409's body: the size the witness holds.
SIZE_TYPE: Final = "text/x.tlog.size"
#: The spec's bound on consistency proof lines.
_MAX_PROOF: Final = 63
_OLD: Final = re.compile(r"old (0|[1-9][0-9]*)")
#: Test seam: ``persisted`` stops the process (SIGKILL) after the state is
#: written, before the cosignature is made.
_KILL_ENV: Final = "INTENTUSNET_WITNESS_KILL_AT"


class WitnessAnswer(NamedTuple):
    """An HTTP answer: status, body, content type."""

    status: int
    body: str
    content_type: str = "text/plain; charset=utf-8"


class AddCheckpoint(NamedTuple):
    """An ``add-checkpoint`` request body, split."""

    old: int
    proof: list[bytes]
    note: bytes
    origin: str


def parse_add_checkpoint(body: bytes) -> AddCheckpoint:
    """Split a request body into old size, proof and checkpoint note.

    Raises:
        LogIntegrityError: not of the spec's form.
    """
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise LogIntegrityError("the request is not UTF-8") from None
    head, blank, note = text.partition("\n\n")
    if not blank:
        raise LogIntegrityError("the request has no blank line before its checkpoint")
    lines = head.split("\n")
    match = _OLD.fullmatch(lines[0])
    if match is None:
        raise LogIntegrityError(f"the first line is not 'old SIZE': {lines[0][:40]!r}")
    if len(lines) - 1 > _MAX_PROOF:
        raise LogIntegrityError(f"more than {_MAX_PROOF} consistency proof lines")
    proof = []
    for line in lines[1:]:
        try:
            digest = base64.b64decode(line, validate=True)
        except (binascii.Error, ValueError):
            raise LogIntegrityError("a proof line is not base64") from None
        if len(digest) != HASH_SIZE:
            raise LogIntegrityError("a proof line is not a 32-byte hash")
        proof.append(digest)
    origin = note.partition("\n")[0]
    return AddCheckpoint(int(match.group(1)), proof, note.encode(), origin)


class Witness:
    """Cosigns checkpoints of the logs it knows, remembering each in ``state``.

    Args:
        name: the witness's key name (in its cosignature lines).
        key: its Ed25519 signing key.
        logs: origin -> the log's public key.
        state: its folder; locked while this object lives (one witness a folder).

    Raises:
        LogError: the folder cannot be made or locked (another witness holds it).
    """

    def __init__(
        self,
        name: str,
        key: SigningKey,
        logs: Mapping[str, PublicKey],
        state: Path,
    ) -> None:
        self.name = name
        self._key = key
        self._logs = dict(logs)
        self._state = state
        self._lock = threading.Lock()
        try:
            make_dirs(state)
            self._lock_fd = os.open(state / ".lock", os.O_RDWR | os.O_CREAT, FILE_MODE)
        except OSError as exc:
            raise LogError(
                f"cannot use the witness state {state}: {exc.strerror or exc}"
            ) from None
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            raise LogError(f"another witness holds the state {state}") from None

    def close(self) -> None:
        """Release the state folder."""
        os.close(self._lock_fd)

    def size_of(self, origin: str) -> int:
        """The size of the checkpoint of ``origin`` last cosigned (0: none)."""
        held = self._held(origin)
        return 0 if held is None else held.size

    def add_checkpoint(self, body: bytes) -> WitnessAnswer:
        """Answer one ``add-checkpoint`` request (the spec's status codes)."""
        try:
            request = parse_add_checkpoint(body)
        except LogIntegrityError as exc:
            return WitnessAnswer(400, f"{exc}\n")
        log_key = self._logs.get(request.origin)
        if log_key is None:
            return WitnessAnswer(404, f"unknown log {request.origin[:80]!r}\n")
        try:
            new = LogCheckpoint.open(request.note, request.origin, log_key)
        except LogIntegrityError as exc:
            return WitnessAnswer(403, f"{exc}\n")
        if request.old > new.size:
            return WitnessAnswer(400, "old is larger than the checkpoint's size\n")
        with self._lock:
            held = self._held(request.origin)
            size = 0 if held is None else held.size
            if request.old != size:
                return WitnessAnswer(409, f"{size}\n", SIZE_TYPE)
            problem = _inconsistency(held, new, request.proof)
            if problem is not None:
                return WitnessAnswer(422, f"{problem}\n")
            self._persist(request.origin, request.note)
            if os.environ.get(_KILL_ENV) == "persisted":
                os.kill(os.getpid(), 9)
            line = cosign(_text(request.note), self.name, self._key, int(time.time()))
        return WitnessAnswer(200, line)

    def _path(self, origin: str) -> Path:
        return self._state / f"{sha256(origin.encode()).hexdigest()}.checkpoint"

    def _held(self, origin: str) -> LogCheckpoint | None:
        try:
            data = self._path(origin).read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise LogError(
                f"cannot read the witness state: {exc.strerror or exc}"
            ) from None
        return LogCheckpoint.open(data, origin, self._logs[origin])

    def _persist(self, origin: str, note: bytes) -> None:
        path = self._path(origin)
        temp = path.with_name(path.name + ".tmp")
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            os.write(fd, note)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, path)
        fsync_dir(os.fspath(self._state))


def _inconsistency(
    held: LogCheckpoint | None, new: LogCheckpoint, proof: list[bytes]
) -> str | None:
    """Why ``new`` does not extend ``held`` by ``proof``, or None."""
    if new.size == 0 and new.root != EMPTY_ROOT:
        return "a checkpoint of size 0 must have the empty tree's root"
    if held is None or held.size == 0:
        return "a proof from size 0 must be empty" if proof else None
    if held.size == new.size:
        return None if held.root == new.root else "same size, another root"
    if not new.proves_consistency(held, proof):
        return f"the consistency proof from size {held.size} does not verify"
    return None


def _text(note: bytes) -> str:
    data = note.decode("utf-8")
    return data[: data.rfind("\n\n") + 1]


def add_checkpoint_body(old: int, proof: Sequence[bytes], note: bytes) -> bytes:
    """The body of an ``add-checkpoint`` request."""
    lines = [f"old {old}\n", *(base64.b64encode(h).decode() + "\n" for h in proof)]
    return "".join(lines).encode() + b"\n" + note


def request_cosignature(
    post: Callable[[bytes], tuple[int, str]],
    cosigner: Cosigner,
    log: TileLog,
    note: bytes,
    size: int,
    start: int,
) -> tuple[str | None, str]:
    """The witness's cosignature line of ``note`` (``size`` leaves), or None and why.

    ``post`` sends a request body to the witness and returns its status and
    text (raising :class:`LogError` when it cannot). Asks from size
    ``start``; told (409) the witness holds another size, asks once more from
    that one, with a consistency proof from the log's tiles.
    """
    old = start if start <= size else 0
    for _ in range(2):
        proof = log.prove_consistency(old, size) if 0 < old < size else []
        try:
            status, text = post(add_checkpoint_body(old, proof, note))
        except LogError as exc:
            return None, str(exc)
        if status == 409 and _OLD.fullmatch(f"old {text.rstrip(chr(10))}"):
            held = int(text)
            if held > size:
                return None, f"it holds a larger tree ({held} leaves): a rollback"
            old = held
            continue
        if status == 422:
            return None, (
                "it refused the checkpoint (422): it does not extend the tree "
                f"the witness cosigned before ({text.strip()[:200]})"
            )
        if status != 200:
            return None, f"HTTP {status}: {text.strip()[:200]}"
        for line in text.split("\n"):
            if line.startswith(f"\u2014 {cosigner.name} "):
                mine = line + "\n"
                if count_cosigners(note + mine.encode(), [cosigner]) == (1, []):
                    return mine, ""
        return None, "its answer holds no valid cosignature by its key"
    return None, f"it answered 409 twice (it holds {old} leaves)"
