"""What SQLite's errors say about a database file: the catalog's and the cache's.

No import of ``sqlite3`` here: the error's code and message are read as they
are, so that the paths which never open a database do not load it.
"""

from __future__ import annotations

from typing import Final

__all__ = ["says_damaged"]

_DAMAGED: Final = frozenset({11, 26})  # SQLITE_CORRUPT, SQLITE_NOTADB


def says_damaged(exc: BaseException) -> bool:
    """Whether an error of SQLite's says the database file is damaged or not one."""
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF in _DAMAGED:
        return True
    text = str(exc)
    return "not a database" in text or "malformed" in text
