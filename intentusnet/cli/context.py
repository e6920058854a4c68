"""The settings every command shares and the one way commands open the store."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .params import USAGE, CliFailure

if TYPE_CHECKING:
    from ..store import FileExecutionStore


@dataclass
class Settings:
    """What the global options say, kept on the click context for the commands.

    Attributes:
        store_path: ``--store`` or ``INTENTUSNET_STORE``; ``None`` means the
            library's default root.
    """

    store_path: Path | None


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
