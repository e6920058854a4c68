"""One way to name a store: a directory path or a ``postgresql://`` URL.

:func:`open_store` is what ``--store`` and ``INTENTUSNET_STORE`` go through: a
URL opens a :class:`PostgresExecutionStore` (and only then imports psycopg),
anything else a :class:`FileExecutionStore`. Messages about a URL never show
its password: :func:`public_url` drops it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final, TypeAlias

from .urls import is_url, public_url, scrub

if TYPE_CHECKING:
    from ..record.keys import SigningKey
    from .file import Durability, FileExecutionStore
    from .postgres import PostgresExecutionStore

    #: What :func:`open_store` returns: a store that is also a cache-hit journal.
    NamedStore: TypeAlias = FileExecutionStore | PostgresExecutionStore

__all__ = ["NamedStore", "is_url", "open_store", "public_url"]

_EXTRA_HINT: Final = "pip install 'intentusnet[postgres]'"


def open_store(
    name: str | os.PathLike[str] | None = None,
    *,
    create: bool = True,
    durability: Durability = "flush",
    signing_key: SigningKey | str | os.PathLike[str] | None = None,
) -> NamedStore:
    """Open the store ``name`` names: a ``postgresql://`` URL or a directory.

    How an application names its store: ``IntentRouter(store=open_store())``
    records where ``INTENTUSNET_STORE`` says, a directory or a URL, and in
    ``.intentusnet/records`` without it; ``intentusnet run``, ``serve`` and
    ``rerun`` put their ``--store`` there before importing the application.
    Added in 0.1.0.

    Args:
        name: a ``postgresql://`` or ``postgres://`` URL (a
            :class:`PostgresExecutionStore`; needs the ``postgres`` extra), a
            directory (a :class:`FileExecutionStore`), or ``None``:
            ``$INTENTUSNET_STORE``, else ``.intentusnet/records``.
        create: whether a directory that does not exist yet may become a new
            store. With ``False`` it is an error, so that a mistyped path is
            not taken for an empty store. A URL's database must exist in any
            case (its tables are made on first use).
        durability: ``"flush"`` or ``"fsync"``, as for either store.
        signing_key: a ``SigningKey`` or its private key file, as for either
            store (added in 0.1.0).

    Raises:
        ValueError: a malformed URL (the message does not show the password).
        ImportError: a URL, and the ``postgres`` extra is not installed.
        FileNotFoundError, NotADirectoryError: with ``create=False``, the
            directory does not exist, or is not a directory.
        SigningKeyError: ``signing_key`` cannot be read as a private key.
    """
    if name is None:
        name = os.environ.get("INTENTUSNET_STORE") or None
    if name is not None and is_url(name):
        return _open_url(str(name), durability, signing_key)
    from .file import DEFAULT_ROOT, FileExecutionStore

    store = FileExecutionStore(
        name or DEFAULT_ROOT, durability=durability, signing_key=signing_key
    )
    if not create:
        if not store.root.exists():
            raise FileNotFoundError(f"no execution store at {str(store.root)!r}")
        if not store.root.is_dir():
            raise NotADirectoryError(
                f"store path {str(store.root)!r} is not a directory"
            )
    return store


def _open_url(
    url: str,
    durability: Durability,
    signing_key: SigningKey | str | os.PathLike[str] | None,
) -> PostgresExecutionStore:
    try:
        from psycopg.conninfo import conninfo_to_dict

        from .postgres import PostgresExecutionStore
    except ImportError as exc:
        raise ImportError(
            f"a PostgreSQL store ({public_url(url)}) needs the postgres extra: "
            f"{_EXTRA_HINT}"
        ) from exc
    import psycopg

    try:
        params = conninfo_to_dict(url)
    except psycopg.Error as exc:
        detail = scrub(str(exc).strip().splitlines()[0], url)
        raise ValueError(
            f"malformed PostgreSQL URL {public_url(url)}: {detail}"
        ) from None
    port = str(params.get("port") or "")
    if port and not all(part.isdigit() for part in port.split(",")):
        raise ValueError(
            f"malformed PostgreSQL URL {public_url(url)}: the port must be a number"
        )
    return PostgresExecutionStore(url, durability=durability, signing_key=signing_key)
