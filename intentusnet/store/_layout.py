"""Where records live on disk, which ids are allowed, and UTC timestamps."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from hashlib import sha256
from typing import Final

from .._util.ids import new_execution_id
from ..errors import InvalidExecutionId

_ID: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")
_SHARD: Final = re.compile(r"[0-9a-f]{2}")
SUFFIX: Final = ".jsonl"
CATALOG_NAME: Final = "catalog.sqlite3"


def check_id(execution_id: object) -> str:
    """Return ``execution_id`` if it is an allowed id, else raise.

    Allowed: 1 to 128 of ``A-Z a-z 0-9 _ . -``, not starting with a dot. Checked
    before any file-system access, so no id can name a path outside the store.

    Raises:
        InvalidExecutionId: anything else (``../x``, ``a/b``, ``''``, NUL, ...).
    """
    if (
        type(execution_id) is str
        and _ID.fullmatch(execution_id) is not None
        and execution_id[0] != "."
    ):
        return execution_id
    shown = repr(execution_id)
    if len(shown) > 60:
        shown = shown[:40] + "..." + shown[-10:]
    raise InvalidExecutionId(
        f"invalid execution id {shown}: use 1-128 characters of A-Z a-z 0-9 _ . -,"
        " not starting with a dot"
    )


def new_record_id(execution_id: str | None, parent_execution_id: str | None) -> str:
    """The id of a record being opened: the given one checked, else a new one.

    Every store opens records through this, so they refuse the same ids. A new
    id may not begin with a hyphen either: the command line would read it as
    an option. (Records made before this rule are still read by their id.)

    Raises:
        InvalidExecutionId: the given id, or the parent's, is not allowed.
    """
    if parent_execution_id is not None:
        check_id(parent_execution_id)
    if execution_id is None:
        return new_execution_id()
    if check_id(execution_id)[0] == "-":
        raise InvalidExecutionId(
            f"invalid execution id {execution_id[:40]!r}: a new record's id may not "
            "begin with a hyphen (the command line would read it as an option)"
        )
    return execution_id


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
            and _ID.fullmatch(execution_id) is not None
            and execution_id[0] != "."
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
