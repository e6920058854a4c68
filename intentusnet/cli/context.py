"""The settings every command shares, the one way commands open the store, and IDs.

An ``ID`` argument goes through :class:`ExecutionId`, which reads ``last`` as the
newest record of the store, so every command that takes an id accepts it.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Final

import click

from ..errors import RecordNotFound
from .params import USAGE, CliFailure

if TYPE_CHECKING:
    from ..store import FileExecutionStore

    _IdType = click.ParamType[str]
else:  # click < 8.2 has no generic ParamType
    _IdType = click.ParamType

#: The ``ID`` that names the newest record in the store (added in 0.1.0).
LAST: Final = "last"
# One store per command run: resolving ``last`` opens it before the command does.
_STORE_KEY: Final = "intentusnet.store"


class Settings:
    """What the global options say, kept on the click context for the commands.

    A plain class, not a dataclass: every command start makes one, and
    ``--help`` would otherwise import ``dataclasses`` for it alone.

    Attributes:
        store_path: ``--store`` or ``INTENTUSNET_STORE``; ``None`` means the
            library's default root.
    """

    __slots__ = ("store_path",)

    def __init__(self, store_path: Path | None) -> None:
        self.store_path = store_path

    def __repr__(self) -> str:
        return f"Settings(store_path={self.store_path!r})"


def open_store() -> FileExecutionStore:
    """Open the store the command line names; it must already exist.

    Reading commands never create a store: a mistyped ``--store`` is an error,
    not a new empty store.

    Raises:
        CliFailure: the path does not exist or is not a directory (exit 2).
    """
    from ..store import FileExecutionStore

    ctx = click.get_current_context()
    opened: FileExecutionStore | None = ctx.meta.get(_STORE_KEY)
    if opened is not None:
        return opened
    settings = ctx.find_object(Settings)
    # None lets the library pick its default root.
    store = FileExecutionStore(settings.store_path if settings else None)
    root = store.root
    if not root.exists():
        raise CliFailure(
            f"no execution store at {str(root)!r} "
            "(give --store PATH or set INTENTUSNET_STORE)",
            USAGE,
        )
    if not root.is_dir():
        raise CliFailure(f"store path {str(root)!r} is not a directory", USAGE)
    ctx.call_on_close(store.close)
    ctx.meta[_STORE_KEY] = store
    return store


def newest_execution_id(store: FileExecutionStore) -> str:
    """The id of the newest record in ``store`` (what ``last`` names).

    Raises:
        RecordNotFound: the store holds no record (exit 3).
    """
    for summary in store.list(limit=1):
        return summary.execution_id
    raise RecordNotFound(
        f"no records in {str(store.root)!r}, so {LAST!r} names none "
        "('last' is the newest record)"
    )


class ExecutionId(_IdType):
    """A click parameter holding an execution id; ``last`` is the newest record."""

    name = "id"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        """Return the id given, or the newest record's id for ``last``."""
        text = str(value)
        if text != LAST:
            return text
        return newest_execution_id(open_store())
