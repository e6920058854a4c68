"""TileLog: an append-only Merkle tree log kept as C2SP tiles in a directory.

Layout (c2sp.org/tlog-tiles; ``tiles.py`` spells the paths)::

    <dir>/checkpoint                 the signed checkpoint: the log's size and root
    <dir>/tile/<L>/<N>[.p/<W>]       hashes, 256 to a full tile
    <dir>/tile/entries/<N>[.p/<W>]   the leaves
    <dir>/.lock, <dir>/.tmp/         the appender's lock and its unfinished files

The checkpoint is the commit point. An append writes every new tile and
bundle (each to a temporary file, flushed, then renamed into place), then the
new signed checkpoint the same way: a writer killed at any point leaves the
previous checkpoint and every file it covers as they were, so what a reader
reaches through the checkpoint agrees with the leaves. Files a killed append
wrote past the checkpoint are reached by no checkpoint; the next append
deletes them before it writes. Partial tiles of sizes a checkpoint named are
kept (the spec asks it while a checkpoint may name them).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Final

from .._util.files import FILE_MODE, fsync_dir, make_dirs
from ..errors import LogError, LogIntegrityError
from ..record.keys import PublicKey, SigningKey
from .checkpoint import LogCheckpoint, parse_checkpoint
from .merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    consistency_proof,
    fold_perfect,
    inclusion_proof,
    leaf_hash,
    subtree_hash,
)
from .note import check_key_name
from .proof import LogProof
from .tiles import (
    MAX_LEAF,
    TILE_WIDTH,
    bundle_path,
    decode_bundle,
    encode_bundle,
    tile_path,
)

__all__ = ["TileLog"]

_CHECKPOINT: Final = "checkpoint"
#: The newest checkpoint a quorum of witnesses cosigned (``log publish``).
_COSIGNED: Final = "checkpoint.cosigned"
_TMP: Final = ".tmp"


class TileLog:
    """A transparency log in a directory, as C2SP tiles and signed checkpoints.

    Reading (sizes, leaves, roots, proofs) needs only the directory. Appending
    needs the log's ``origin`` (its name in every checkpoint) and the
    ``signing_key`` that signs them; one process appends at a time (an
    exclusive ``flock`` on ``.lock``). Added in 0.1.0.

    Args:
        path: the log's directory (made, 0700, on the first append).
        origin: the checkpoint origin line and key name, e.g.
            ``example.com/intentusnet``.
        signing_key: the Ed25519 key that signs checkpoints.
        durable: flush each file and directory to disk before going on (off
            only for throwaway logs in tests and benchmarks).
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        origin: str | None = None,
        signing_key: SigningKey | None = None,
        durable: bool = True,
    ) -> None:
        self.path: Final = Path(path)
        self.origin: Final = None if origin is None else check_key_name(origin)
        self._key = signing_key
        self._durable = durable

    def __repr__(self) -> str:
        return f"TileLog({os.fspath(self.path)!r}, origin={self.origin!r})"

    # -- reading ------------------------------------------------------------

    def checkpoint_note(self) -> bytes | None:
        """The signed checkpoint as stored, or None before the first append."""
        return self._read(_CHECKPOINT)

    def cosigned_note(self) -> bytes | None:
        """The checkpoint last published with its witnesses' cosignatures, or None."""
        return self._read(_COSIGNED)

    def publish_cosigned(self, note: bytes, size: int) -> bool:
        """Publish ``note`` (a checkpoint of ``size`` and its cosignatures) whole.

        The caller checked it: signed by the log, cosigned by a quorum, and
        extending the one it replaces. One published at a larger size
        meanwhile (by another process) is kept: False.

        Raises:
            LogError: the file cannot be written.
        """
        try:
            self._begin_writes()
            with self._locked():
                held = self._read(_COSIGNED)
                if held is not None and _size_of(held) > size:
                    return False
                self._write(_COSIGNED, note)
                return True
        except OSError as exc:
            raise LogError(
                f"cannot write {self.path / _COSIGNED}: {exc.strerror or exc}"
            ) from exc

    def tree_head(self, key: PublicKey | None = None) -> LogCheckpoint:
        """The current checkpoint; checked against ``key`` and the origin when given.

        Unchecked, it says which tiles to read, not that they are the log's:
        a proof is only as good as the checkpoint it is checked against.

        Raises:
            LogIntegrityError: the checkpoint is malformed, or fails the check.
        """
        note = self.checkpoint_note()
        if note is None:
            return LogCheckpoint(self.origin or "-", 0, EMPTY_ROOT)
        if key is not None:
            if self.origin is None:
                raise LogIntegrityError("checking a checkpoint needs the log's origin")
            return LogCheckpoint.open(note, self.origin, key)
        text, blank, _signatures = note.rpartition(b"\n\n")
        if not blank:
            raise LogIntegrityError("the checkpoint has no signature block")
        try:
            return parse_checkpoint(text.decode("utf-8") + "\n")
        except UnicodeDecodeError:
            raise LogIntegrityError("the checkpoint is not UTF-8") from None

    @property
    def size(self) -> int:
        """How many leaves the current checkpoint holds."""
        return self.tree_head().size

    def leaf(self, index: int, size: int | None = None) -> bytes:
        """Leaf ``index`` as the entry bundles of the tree of ``size`` hold it.

        Raises:
            LogIntegrityError: ``index`` is not below ``size``, or its bundle is
                missing or malformed.
        """
        size = self._size(size)
        if not 0 <= index < size:
            raise LogIntegrityError(f"leaf {index} is not in a log of {size} leaves")
        bundle, at = divmod(index, TILE_WIDTH)
        return self._bundle_leaves(bundle, size)[at]

    def _bundle_leaves(self, bundle: int, size: int) -> list[bytes]:
        """The leaves of entry bundle ``bundle`` in the tree of ``size``."""
        width = min(size - bundle * TILE_WIDTH, TILE_WIDTH)
        path = bundle_path(bundle, width)
        data = self._read(path)
        if data is None and width < TILE_WIDTH:
            data = self._read(bundle_path(bundle))
        if data is None:
            raise LogIntegrityError(f"the log's entry bundle {path} is missing")
        leaves = decode_bundle(data)
        if len(leaves) < width:
            raise LogIntegrityError(f"the log's entry bundle {path} is short")
        return leaves[:width]

    def leaves(self, start: int = 0, size: int | None = None) -> Iterator[bytes]:
        """The leaves from index ``start`` up to ``size`` (default: all), in order.

        Raises:
            LogIntegrityError: ``start`` above ``size``, or a bundle missing.
        """
        size = self._size(size)
        if not 0 <= start <= size:
            raise LogIntegrityError(f"no leaves from {start} in a log of {size}")
        for bundle in range(start // TILE_WIDTH, (size + TILE_WIDTH - 1) // TILE_WIDTH):
            found = self._bundle_leaves(bundle, size)
            yield from found[max(start - bundle * TILE_WIDTH, 0) :]

    def tile(self, level: int, index: int, width: int) -> bytes | None:
        """The bytes of a tile as stored (the full one if the partial is gone)."""
        data = self._read(tile_path(level, index, width))
        if data is None and width < TILE_WIDTH:
            data = self._read(tile_path(level, index))
        return data

    def find(self, leaf_of: Callable[[bytes], bool]) -> int | None:
        """The index of the newest leaf ``leaf_of`` accepts, or None.

        Reads the entry bundles from the end back (newest first), so finding
        a recent leaf is quick; an absent one reads the whole log.
        """
        size = self.size
        for bundle in range((size - 1) // TILE_WIDTH, -1, -1):
            leaves = self._bundle_leaves(bundle, size)
            for at in range(len(leaves) - 1, -1, -1):
                if leaf_of(leaves[at]):
                    return bundle * TILE_WIDTH + at
        return None

    def proof_of(self, index: int) -> LogProof:
        """A tlog-proof file of leaf ``index`` under the current checkpoint.

        Raises:
            LogIntegrityError: no such leaf, or a tile or bundle missing.
        """
        note = self.checkpoint_note()
        if note is None:
            raise LogIntegrityError("the log is empty: it has no checkpoint yet")
        size = self.tree_head().size
        path = self.prove_inclusion(index, size)
        return LogProof(self.leaf(index, size), index, tuple(path), note)

    def root(self, size: int | None = None) -> bytes:
        """The root of the first ``size`` leaves (default: all), from the tiles."""
        size = self._size(size)
        return subtree_hash(0, size, _TileHashes(self.tile, self.size).perfect)

    def prove_inclusion(self, index: int, size: int | None = None) -> list[bytes]:
        """The inclusion proof of leaf ``index`` in the tree of ``size`` leaves.

        Raises:
            LogIntegrityError: ``index`` not below ``size``, or a tile missing.
        """
        size = self._size(size)
        if not 0 <= index < size:
            raise LogIntegrityError(f"leaf {index} is not in a log of {size} leaves")
        return inclusion_proof(index, size, _TileHashes(self.tile, self.size).perfect)

    def prove_consistency(
        self, old_size: int, new_size: int | None = None
    ) -> list[bytes]:
        """The consistency proof from the tree of ``old_size`` to ``new_size`` leaves.

        Raises:
            LogIntegrityError: ``old_size`` above ``new_size``, or a tile missing.
        """
        new_size = self._size(new_size)
        if not 0 <= old_size <= new_size:
            raise LogIntegrityError(
                f"no consistency proof from {old_size} leaves to {new_size} leaves"
            )
        return consistency_proof(
            old_size, new_size, _TileHashes(self.tile, self.size).perfect
        )

    # -- appending ----------------------------------------------------------

    def append(
        self,
        leaves: Sequence[bytes],
        *,
        select: Callable[[int], Sequence[bytes]] | None = None,
    ) -> int:
        """Append ``leaves`` in order, publish a signed checkpoint; the new size.

        ``select``, when given, is called with the log's size once this
        appender holds the lock, and returns the leaves to append instead of
        ``leaves`` (a sequencer leaves out what another appender added).

        Raises:
            LogError: no origin or signing key, or the directory cannot be
                written (nothing of this append is then in the log).
            LogIntegrityError: the current checkpoint fails its check with
                this log's key, or its tiles disagree with it; a leaf is
                longer than 65,535 bytes.
        """
        if self.origin is None or self._key is None:
            raise LogError("appending to a log needs its origin and signing key")
        _check_leaves(leaves)
        try:
            make_dirs(self.path)
            with self._locked():
                return self._append(leaves, self.origin, self._key, select)
        except OSError as exc:
            if isinstance(exc, LogError):
                raise
            raise LogError(
                f"cannot append to the log in {self.path}: {exc.strerror or exc}"
            ) from exc

    def _append(
        self,
        leaves: Sequence[bytes],
        origin: str,
        key: SigningKey,
        select: Callable[[int], Sequence[bytes]] | None,
    ) -> int:
        head = self.tree_head(key.public_key)
        size = head.size
        if select is not None:
            leaves = _check_leaves(select(size))
        self._discard_after(size)
        edge = self._edge(size)
        if subtree_hash(0, size, _EdgeHashes(edge, size).perfect) != head.root:
            raise LogIntegrityError(
                f"the log's right-edge tiles disagree with its checkpoint (size {size})"
            )
        if not leaves:
            return size
        writes, new_edge, new_size = _grow(edge, size, list(leaves))
        root = subtree_hash(0, new_size, _EdgeHashes(new_edge, new_size).perfect)
        self._begin_writes()
        for path, data in writes:
            self._write(path, data)
        self._write(_CHECKPOINT, LogCheckpoint(origin, new_size, root).sign(key))
        return new_size

    def _edge(self, size: int) -> list[list[bytes]]:
        """The right edge of the tree of ``size``, bottom up.

        First the leaves of its last, partial entry bundle, then each level's
        hashes in its last, partial tile (empty when that tile is full).
        """
        edge: list[list[bytes]] = []
        width = size % TILE_WIDTH
        edge.append(self._bundle_leaves(size // TILE_WIDTH, size) if width else [])
        level, count = 0, size
        while count:
            width = count % TILE_WIDTH
            hashes: list[bytes] = []
            if width:
                path = tile_path(level, count // TILE_WIDTH, width)
                data = self._read(path)
                if data is None or len(data) != width * HASH_SIZE:
                    raise LogIntegrityError(
                        f"the log's tile {path} is missing or short"
                    )
                hashes = [
                    data[i : i + HASH_SIZE] for i in range(0, len(data), HASH_SIZE)
                ]
            edge.append(hashes)
            level, count = level + 1, count // TILE_WIDTH
        if [leaf_hash(leaf) for leaf in edge[0]] != (edge[1] if len(edge) > 1 else []):
            raise LogIntegrityError(
                "the log's last entry bundle disagrees with its tile"
            )
        return edge

    def _discard_after(self, size: int) -> None:
        """Delete what a killed append left past the tree of ``size``."""
        with contextlib.suppress(FileNotFoundError):
            for name in os.listdir(self.path / _TMP):
                (self.path / _TMP / name).unlink()
        self._discard(bundle_path, size)
        level, count = 0, size
        while (self.path / "tile" / str(level)).is_dir():
            self._discard(partial(tile_path, level), count)
            level, count = level + 1, count // TILE_WIDTH

    def _discard(self, path_of: Callable[..., str], count: int) -> None:
        """Delete one level's files past its first ``count`` hashes (or leaves).

        Appends write a level's files in index order, so the leftovers of a
        killed one end at the first index with none.
        """
        edge, width = divmod(count, TILE_WIDTH)
        partials = self.path / (path_of(edge) + ".p")
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            for name in os.listdir(partials):
                if not (name.isdigit() and int(name) <= width):
                    (partials / name).unlink()
        index = edge
        while True:
            full = self.path / path_of(index)
            found = full.exists()
            full.unlink(missing_ok=True)
            if index > edge:
                later = self.path / (path_of(index) + ".p")
                found = found or later.exists()
                shutil.rmtree(later, ignore_errors=True)
                if not found:
                    return
            index += 1

    # -- files --------------------------------------------------------------
    # The storage seam: ``_read``, ``_write``, ``_begin_writes``,
    # ``_discard_after`` and ``_locked`` are all that touch the directory. A
    # subclass keeping the same files elsewhere overrides them (and ``append``
    # and ``publish_cosigned``, which take the lock): the PostgreSQL store's
    # log keeps each file as a row, and appends in one transaction.

    def _begin_writes(self) -> None:
        make_dirs(self.path / _TMP)

    def _size(self, size: int | None) -> int:
        current = self.size
        if size is None:
            return current
        if not 0 <= size <= current:
            raise LogIntegrityError(f"the log holds {current} leaves, not {size}")
        return size

    def _read(self, relative: str) -> bytes | None:
        try:
            with open(self.path / relative, "rb") as file:
                return file.read()
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            raise LogError(
                f"cannot read {self.path / relative}: {exc.strerror or exc}"
            ) from exc

    def _write(self, relative: str, data: bytes) -> None:
        """Put ``data`` at ``relative`` whole: a temporary file, flushed, renamed."""
        target = self.path / relative
        made = make_dirs(target.parent)
        temp = self.path / _TMP / relative.replace("/", "_")
        fd = os.open(
            temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, FILE_MODE
        )
        try:
            os.write(fd, data)
            if self._durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(temp, target)
        if self._durable:
            fsync_dir(os.fspath(target.parent))
            parent = target.parent
            while made and parent != self.path:  # new directories' entries too
                parent = parent.parent
                fsync_dir(os.fspath(parent))

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(
            self.path / ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, FILE_MODE
        )
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _check_leaves(leaves: Sequence[bytes]) -> Sequence[bytes]:
    for leaf in leaves:
        if len(leaf) > MAX_LEAF:
            raise LogIntegrityError(f"a leaf of {len(leaf)} bytes; at most {MAX_LEAF}")
    return leaves


def _size_of(note: bytes) -> int:
    """The size line of a checkpoint note (written by this log: unchecked)."""
    try:
        return int(note.split(b"\n", 2)[1])
    except (IndexError, ValueError):
        return -1


def _grow(
    edge: list[list[bytes]], size: int, leaves: list[bytes]
) -> tuple[list[tuple[str, bytes]], list[list[bytes]], int]:
    """The files to write to append ``leaves``, the new edge and the new size.

    Files come bundles first, then tiles level by level, full ones before the
    new partial one; partial files that would not change are left out.
    """
    new_size = size + len(leaves)
    writes: list[tuple[str, bytes]] = []
    pending = edge[0] + leaves
    first = size // TILE_WIDTH
    full = len(pending) // TILE_WIDTH
    for i in range(full):
        chunk = pending[i * TILE_WIDTH : (i + 1) * TILE_WIDTH]
        writes.append((bundle_path(first + i), encode_bundle(chunk)))
    rest = pending[full * TILE_WIDTH :]
    if rest:
        writes.append(
            (bundle_path(new_size // TILE_WIDTH, len(rest)), encode_bundle(rest))
        )
    new_edge: list[list[bytes]] = [rest]
    carried = [leaf_hash(leaf) for leaf in leaves]
    level, old_count, new_count = 0, size, new_size
    while new_count:
        hashes = (edge[level + 1] if level + 1 < len(edge) else []) + carried
        first = old_count // TILE_WIDTH
        full = len(hashes) // TILE_WIDTH
        carried = []
        for i in range(full):
            chunk = hashes[i * TILE_WIDTH : (i + 1) * TILE_WIDTH]
            writes.append((tile_path(level, first + i), b"".join(chunk)))
            carried.append(fold_perfect(chunk))
        rest = hashes[full * TILE_WIDTH :]
        if rest and (full or len(rest) != old_count % TILE_WIDTH):
            writes.append(
                (tile_path(level, new_count // TILE_WIDTH, len(rest)), b"".join(rest))
            )
        new_edge.append(rest)
        level += 1
        old_count //= TILE_WIDTH
        new_count //= TILE_WIDTH
    return writes, new_edge, new_size


class _EdgeHashes:
    """Complete subtrees read from the right edge alone: enough for the root."""

    def __init__(self, edge: list[list[bytes]], size: int) -> None:
        self._edge, self._size = edge, size

    def perfect(self, start: int, height: int) -> bytes:
        level, rest = divmod(height, 8)
        span = TILE_WIDTH**level
        first = start // span - (self._size // span // TILE_WIDTH) * TILE_WIDTH
        return fold_perfect(self._edge[level + 1][first : first + (1 << rest)])


class _TileHashes:
    """Complete subtrees of the log read from its tiles, for a log of ``size``."""

    def __init__(
        self, read: Callable[[int, int, int], bytes | None], size: int
    ) -> None:
        self._read, self._size = read, size
        self._tiles: dict[tuple[int, int], bytes] = {}

    def perfect(self, start: int, height: int) -> bytes:
        level, rest = divmod(height, 8)
        span = TILE_WIDTH**level
        index, at = divmod(start // span, TILE_WIDTH)
        data = self._tile(level, index)
        count = 1 << rest
        if len(data) < (at + count) * HASH_SIZE:
            raise LogIntegrityError(
                f"the log's tile {tile_path(level, index)} is short"
            )
        return fold_perfect(
            [
                data[i : i + HASH_SIZE]
                for i in range(at * HASH_SIZE, (at + count) * HASH_SIZE, HASH_SIZE)
            ]
        )

    def _tile(self, level: int, index: int) -> bytes:
        found = self._tiles.get((level, index))
        if found is not None:
            return found
        hashes = self._size // TILE_WIDTH**level
        width = min(hashes - index * TILE_WIDTH, TILE_WIDTH)
        data = self._read(level, index, width)
        if data is None or len(data) < width * HASH_SIZE:
            path = tile_path(level, index, width)
            raise LogIntegrityError(f"the log's tile {path} is missing or short")
        self._tiles[(level, index)] = data
        return data
