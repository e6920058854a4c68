"""Which record ids are allowed, and the id a new record gets (every store)."""

from __future__ import annotations

import re
from typing import Final

from .._util.ids import new_execution_id
from ..errors import InvalidExecutionId

_ID: Final = re.compile(r"[A-Za-z0-9_.-]{1,128}")

__all__ = ["allowed_id", "check_id", "new_record_id"]


def allowed_id(text: str) -> bool:
    """Whether ``text`` is an allowed record id (see :func:`check_id`)."""
    return _ID.fullmatch(text) is not None and text[0] != "."


def check_id(execution_id: object) -> str:
    """Return ``execution_id`` if it is an allowed id, else raise.

    Allowed: 1 to 128 of ``A-Z a-z 0-9 _ . -``, not starting with a dot. Checked
    before any file-system access, so no id can name a path outside the store.

    Raises:
        InvalidExecutionId: anything else (``../x``, ``a/b``, ``''``, NUL, ...).
    """
    if type(execution_id) is str and allowed_id(execution_id):
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
