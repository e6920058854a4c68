"""Private files and directories: created owner-only, flushed to disk."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Final

from .ids import uuid7_hex

__all__ = ["DIR_MODE", "FILE_MODE", "fsync_dir", "make_dirs", "write_whole"]

#: Records and caches hold what callers sent: only their owner reads them.
DIR_MODE: Final = 0o700
FILE_MODE: Final = 0o600


def make_dirs(path: Path) -> bool:
    """Create ``path`` and missing parents with mode 0700; True if any was made."""
    missing: list[Path] = []
    while not path.is_dir():
        missing.append(path)
        if path.parent == path:
            break
        path = path.parent
    made = False
    for directory in reversed(missing):
        with contextlib.suppress(FileExistsError):
            os.mkdir(directory, DIR_MODE)
            made = True
    return made


def fsync_dir(path: str) -> None:
    """Flush a directory entry to disk (POSIX has no other way)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_whole(
    directory: Path, target: str, data: bytes, fsync: bool, *, exclusive: bool = False
) -> None:
    """Write ``data`` to a dot file in ``directory``, then rename it to ``target``.

    A reader sees the whole file or none; ``directory`` and its parents are
    made as needed. With ``exclusive`` the file is hard-linked into place
    instead, which fails if ``target`` exists.

    Raises:
        FileExistsError: ``exclusive`` and ``target`` exists.
        OSError: it could not be written.
    """
    make_dirs(directory)
    hidden = f"{directory}/.{uuid7_hex()}"
    fd = os.open(hidden, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
    try:
        os.write(fd, data)
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    if exclusive:
        try:
            os.link(hidden, target)
        finally:
            os.unlink(hidden)
    else:
        os.rename(hidden, target)
    if fsync:
        fsync_dir(str(directory))
