"""The user's application: ``--app MODULE:ATTR``, and the store it records to.

``run``, ``serve`` (and each of its worker processes) and ``rerun`` import the
router through :func:`load_router`. A store named on the command line
(``--store`` or ``INTENTUSNET_STORE``) goes into the environment before the
import, so that an application building its router with
``intentusnet.open_store()`` records there; ``run`` and ``serve`` load it with
:func:`open_app`, which also holds the router to that store.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, TypeVar

import click

from .context import named_store, open_named
from .params import USAGE, CliFailure

#: The variable ``--app`` is read from when not given (as ``INTENTUSNET_STORE`` is
#: for ``--store``); ``debug`` names it in the command it suggests.
APP_ENV: Final = "INTENTUSNET_APP"
_F = TypeVar("_F", bound=Callable[..., object])


def app_option(help_text: str, *, required: bool = True) -> Callable[[_F], _F]:
    """The ``--app MODULE:ATTR`` option (or ``INTENTUSNET_APP``), as ``app_ref``.

    ``help_text`` says what the command does with the router.
    """
    return click.option(
        "--app",
        "app_ref",
        required=required,
        metavar="MODULE:ATTR",
        envvar=APP_ENV,
        show_envvar=True,
        help=help_text,
    )


if TYPE_CHECKING:
    from ..routing.router import IntentRouter
    from ..store.naming import NamedStore
    from ..store.protocol import ExecutionStore


def load_router(ref: str, store_name: str | None = None) -> IntentRouter:
    """Import ``MODULE:ATTR`` (the current directory first on the path).

    Args:
        ref: ``MODULE:ATTR``; ATTR may be dotted.
        store_name: the store the command line names, if any: put in
            ``INTENTUSNET_STORE`` before the import, for the application's
            ``open_store()`` and for ``serve``'s worker processes.

    Raises:
        CliFailure: the reference is malformed, the module or attribute is
            missing, or the object is not an ``IntentRouter`` (exit 2); the
            module's own code raised while importing (exit 1).
    """
    from ..routing.router import IntentRouter

    module_name, _, attr_path = ref.partition(":")
    if not module_name or not attr_path:
        raise CliFailure(f"--app must be MODULE:ATTR, got {ref!r}", USAGE)
    if store_name:
        os.environ["INTENTUSNET_STORE"] = store_name
    if os.getcwd() not in sys.path:
        # As `python -m` does: an application next to the caller is importable.
        sys.path.insert(0, os.getcwd())
    try:
        target: object = importlib.import_module(module_name)
    except Exception as exc:
        missing = exc.name if isinstance(exc, ModuleNotFoundError) else None
        # The module, or a package above it, is missing: a usage error.
        if missing is not None and f"{module_name}.".startswith(f"{missing}."):
            raise CliFailure(f"cannot import {module_name!r}: {exc}", USAGE) from exc
        # The module exists but its own code failed: not a usage error.
        message = f"importing {module_name!r} failed: {type(exc).__name__}: {exc}"
        raise CliFailure(message, 1, cause=exc) from exc
    for attr in attr_path.split("."):
        try:
            target = getattr(target, attr)
        except AttributeError as exc:
            raise CliFailure(f"{ref!r}: no attribute {attr!r}", USAGE) from exc
    if not isinstance(target, IntentRouter):
        kind = type(target).__name__
        raise CliFailure(f"{ref!r} is a {kind}, not an IntentRouter", USAGE)
    return target


def open_app(
    ref: str, store_name: str | None
) -> tuple[IntentRouter, NamedStore | None]:
    """Load the router ``ref`` names, recording to the named store if there is one.

    The named store is opened first (created if it is a new directory), so a
    malformed name is a usage error before any application code runs. Then
    :func:`load_router` imports the application with the name in the
    environment. A router without a store is given the named store; a router
    recording to the same place (a file store's directory, a PostgreSQL
    store's server and database) is left as it is; a router recording
    anywhere else is refused, so that records never go somewhere other than
    where the command line says.

    Returns:
        The router, and the store given to it, which the caller closes
        (``None`` when nothing was named or the router already records there).

    Raises:
        CliFailure: the router records elsewhere, or the name is refused (a
            malformed URL, a path that is not a directory; exit 2); as for
            :func:`load_router`.
    """
    if not store_name:
        return load_router(ref), None
    named = open_named(store_name, create=True)
    try:
        router = load_router(ref, store_name)
    except BaseException:
        named.close()
        raise
    if router.store is None:
        router.store = named
        return router, named
    ours, theirs = _place(named), _place(router.store)
    named.close()
    if ours == theirs:
        return router, None
    raise CliFailure(
        f"--store/INTENTUSNET_STORE names {ours}, but {ref} records to {theirs}; "
        "name the store once: drop --store and INTENTUSNET_STORE to use the "
        "application's store, or build the router with "
        "IntentRouter(store=intentusnet.open_store()) so that it follows them",
        USAGE,
    )


@contextmanager
def running_app(ref: str) -> Iterator[IntentRouter]:
    """The router of ``ref`` over the named store (:func:`open_app`), closed after."""
    router, given = open_app(ref, named_store())
    try:
        yield router
    finally:
        router.close()
        if given is not None:
            given.close()


def _place(store: ExecutionStore) -> str:
    """Where ``store`` keeps its records, for comparing two stores and for people.

    A local directory, resolved; else the store's own ``where`` (a PostgreSQL
    store's server and database, never the password).
    """
    directory = store.directory
    return store.where if directory is None else str(directory.resolve())
