"""The settings every command shares and the one way commands open the store."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from .params import USAGE, CliFailure

if TYPE_CHECKING:
    from ..store import FileExecutionStore


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
    return store
