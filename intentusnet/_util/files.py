"""Private files and directories: created owner-only, flushed to disk."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

__all__ = ["DIR_MODE", "FILE_MODE", "fsync_dir", "make_dirs"]

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
        try:
            os.mkdir(directory, DIR_MODE)
            made = True
        except FileExistsError:
            pass
    return made


def fsync_dir(path: str) -> None:
    """Flush a directory entry to disk (POSIX has no other way)."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
