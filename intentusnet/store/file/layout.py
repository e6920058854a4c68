"""Where records live on disk: shard folders, file names, the catalog's name."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from hashlib import sha256
from typing import Final

from ..ids import allowed_id

_SHARD: Final = re.compile(r"[0-9a-f]{2}")


SUFFIX: Final = ".jsonl"


CATALOG_NAME: Final = "catalog.sqlite3"


def relative_path(execution_id: str) -> str:
    """Return ``<2 hex of sha256(id)>/<id>.jsonl`` for an id already checked."""
    shard = sha256(execution_id.encode()).hexdigest()[:2]
    return f"{shard}/{execution_id}{SUFFIX}"


def is_shard(name: str) -> bool:
    """Whether a directory name is one of the 256 shard directories."""
    return _SHARD.fullmatch(name) is not None


def shards(root: str) -> list[str]:
    """The shard directories under ``root`` that exist, in order."""
    try:
        return sorted(entry.name for entry in os.scandir(root) if is_shard(entry.name))
    except (FileNotFoundError, NotADirectoryError):
        return []


def ids_in_shard(root: str, shard: str) -> list[str]:
    """The ids of the record files in one shard directory, in order.

    Files that are not records (wrong name, wrong shard) are skipped.
    """
    try:
        names = sorted(os.listdir(f"{root}/{shard}"))
    except (FileNotFoundError, NotADirectoryError):
        return []
    found: list[str] = []
    for name in names:
        execution_id = name[: -len(SUFFIX)]
        if (
            name.endswith(SUFFIX)
            and allowed_id(execution_id)
            and relative_path(execution_id)[:2] == shard
        ):
            found.append(execution_id)
    return found


def walk_ids(root: str) -> Iterator[str]:
    """Yield the id of every record file under ``root``, in a stable order.

    One shard directory is listed at a time, so memory does not grow with the
    store.
    """
    for shard in shards(root):
        yield from ids_in_shard(root, shard)


def has_records(root: str) -> bool:
    """Whether at least one record file exists under ``root``."""
    return next(walk_ids(root), None) is not None
