"""The settings every command shares, the one way commands open the store, and IDs.

An ``ID`` argument goes through :class:`ExecutionId`, which reads ``last`` as the
newest record of the store, so every command that takes an id accepts it.
Commands that also take ``--intent NAME`` (:func:`last_intent_option`) read
``last`` as the newest record of that intent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Final, TypeVar

import click

from ..errors import RecordNotFound
from .params import USAGE, CliFailure, close_names, did_you_mean

if TYPE_CHECKING:
    from ..store.naming import NamedStore

    _IdType = click.ParamType[str]
else:  # click < 8.2 has no generic ParamType
    _IdType = click.ParamType

#: The ``ID`` that names the newest record in the store (added in 0.1.0).
LAST: Final = "last"
# One store per command run: resolving ``last`` opens it before the command does.
_STORE_KEY: Final = "intentusnet.store"
# ``--intent NAME`` narrowing ``last``, and whether an ID said ``last``.
_INTENT_KEY: Final = "intentusnet.last_intent"
_LAST_USED_KEY: Final = "intentusnet.last_used"
_F = TypeVar("_F", bound=Callable[..., object])


class Settings:
    """What the global options say, kept on the click context for the commands.

    A plain class, not a dataclass: every command start makes one, and
    ``--help`` would otherwise import ``dataclasses`` for it alone.

    Attributes:
        store_name: ``--store`` or ``INTENTUSNET_STORE``, a directory or a
            ``postgresql://`` URL; ``None`` means the library's default root.
        signing_key: ``--signing-key`` or ``INTENTUSNET_SIGNING_KEY``, the
            private key file the store signs with, or ``None``.
    """

    __slots__ = ("signing_key", "store_name")

    def __init__(self, store_name: str | None, signing_key: str | None = None) -> None:
        self.store_name = store_name
        self.signing_key = signing_key

    def __repr__(self) -> str:
        return (
            f"Settings(store_name={self.store_name!r}, "
            f"signing_key={self.signing_key!r})"
        )


def named_store() -> str | None:
    """The store the command line names (``--store`` or ``INTENTUSNET_STORE``).

    ``None`` when neither is given: the library's default applies.
    """
    settings = click.get_current_context().find_object(Settings)
    return None if settings is None else settings.store_name


def open_store() -> NamedStore:
    """Open the store the command line names (once per command run).

    Reading commands never create a store: a mistyped ``--store`` path is an
    error, not a new empty store.

    Raises:
        CliFailure: the path does not exist or is not a directory, or the URL
            is malformed or needs the ``postgres`` extra (exit 2).
    """
    ctx = click.get_current_context()
    opened: NamedStore | None = ctx.meta.get(_STORE_KEY)
    if opened is not None:
        return opened
    # None lets the library pick its default root.
    settings = ctx.find_object(Settings)
    store = open_named(
        named_store(),
        create=False,
        signing_key=settings.signing_key if settings else None,
    )
    ctx.call_on_close(store.close)
    ctx.meta[_STORE_KEY] = store
    return store


def open_named(
    name: str | None, *, create: bool, signing_key: str | None = None
) -> NamedStore:
    """``store.open_store(name)``, its refusals turned into usage errors (exit 2).

    Raises:
        CliFailure: a missing directory (without ``create``), a path that is
            not a directory, a malformed URL, or the ``postgres`` extra missing.
        SigningKeyError: ``signing_key`` cannot be used (exit 2).
    """
    from ..store.naming import open_store as open_by_name

    try:
        return open_by_name(name, create=create, signing_key=signing_key)
    except FileNotFoundError as exc:
        raise CliFailure(
            f"{exc} (give --store PATH or set INTENTUSNET_STORE)", USAGE
        ) from None
    except (NotADirectoryError, ValueError, ImportError) as exc:
        # from None: the cause of a malformed URL may quote its password.
        raise CliFailure(str(exc), USAGE) from None


def newest_execution_id(store: NamedStore, intent: str | None = None) -> str:
    """The id of the newest record in ``store`` (what ``last`` names).

    Args:
        store: the store.
        intent: only records of this intent (``last --intent NAME``).

    Raises:
        RecordNotFound: the store holds no record (of that intent; exit 3).
    """
    from ..store.filters import ListFilters

    for summary in store.list(ListFilters(intent=intent, limit=1)):
        return summary.execution_id
    if intent is not None:
        raise RecordNotFound(
            f"no records of intent {intent!r} in {store.where!r}, so "
            f"'{LAST} --intent {intent}' names none"
        )
    raise RecordNotFound(
        f"no records in {store.where!r}, so {LAST!r} names none "
        "('last' is the newest record)"
    )


def _keep_intent(ctx: click.Context, param: click.Parameter, value: object) -> None:
    if value is not None:
        ctx.meta[_INTENT_KEY] = str(value)


def last_intent_option(command: _F) -> _F:
    """Add ``--intent NAME``: ``last`` names the newest record of that intent.

    Eager, so that it is known when ``ID`` arguments are read, whatever the
    order on the command line; the command calls :func:`check_last_intent`.
    """
    option = click.option(
        "--intent",
        metavar="NAME",
        is_eager=True,
        expose_value=False,
        callback=_keep_intent,
        help="With ID 'last': the newest record of this intent.",
    )
    return option(command)


def last_intent() -> str | None:
    """The ``--intent NAME`` given to the command, if any."""
    value = click.get_current_context().meta.get(_INTENT_KEY)
    return None if value is None else str(value)


def check_last_intent() -> None:
    """Refuse ``--intent`` when no ``ID`` said ``last`` (it would do nothing).

    Raises:
        CliFailure: ``--intent`` without ``last`` (exit 2).
    """
    meta = click.get_current_context().meta
    if _INTENT_KEY in meta and not meta.get(_LAST_USED_KEY):
        raise CliFailure(
            "--intent narrows 'last' only: give 'last' as the ID, or drop --intent",
            USAGE,
        )


def _refuse_unless_recorded(execution_id: str) -> None:
    """Refuse an id that names no record, suggesting ``last`` (it is close to it).

    Raises:
        RecordNotFound: the store holds no such record (exit 3).
    """
    store = open_store()
    if not store.exists(execution_id):
        raise RecordNotFound(
            f"no record {execution_id!r} in {store.where!r}."
            f"{did_you_mean([LAST])} ('last' is the newest record)"
        )


class ExecutionId(_IdType):
    """A click parameter holding an execution id; ``last`` is the newest record."""

    name = "id"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> str:
        """Return the id given, or the newest record's id for ``last``.

        An id close to ``last`` (``lats``) that names no record is refused
        with ``last`` suggested, rather than as an unknown id.
        """
        text = str(value)
        if text != LAST:
            if close_names(text, [LAST]):
                _refuse_unless_recorded(text)
            return text
        meta = click.get_current_context().meta
        meta[_LAST_USED_KEY] = True
        return newest_execution_id(open_store(), meta.get(_INTENT_KEY))
