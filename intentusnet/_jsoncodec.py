"""The JSON functions the record modules bind: orjson's, or their stdlib twins.

The library reads, hashes and writes records with orjson. ``intentusnet replay
ID`` calls :func:`use_stdlib` before it imports any record module, and those
modules then bind the twins in :mod:`._stdjson`, which give the same results
and import orjson only where the stdlib cannot be sure to. Either way the
modules bind the functions once, at import, so a call costs what it did.

The names (``loads``, ``dumps``, ``JSONDecodeError`` and the ``OPT_*`` flags
``dumps`` takes) are looked up here when a module imports them. The first
lookup settles the choice for the process, so all modules bind the same set.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from json import JSONDecodeError as JSONDecodeError
    from types import ModuleType

    OPT_APPEND_NEWLINE: int
    OPT_INDENT_2: int
    OPT_SORT_KEYS: int

    def loads(data: bytes, /) -> Any:
        """Parse JSON."""

    def dumps(value: object, /, *, option: int | None = None) -> bytes:
        """Serialise ``value`` as JSON."""


_NAMES: Final = frozenset(
    {
        "JSONDecodeError",
        "OPT_APPEND_NEWLINE",
        "OPT_INDENT_2",
        "OPT_SORT_KEYS",
        "dumps",
        "loads",
    }
)
_source: ModuleType | None = None


def use_stdlib() -> bool:
    """Have the record modules imported from now on bind the stdlib twins.

    Returns:
        Whether the twins are in use: not if a module bound orjson's already.
    """
    global _source
    if _source is None:
        from . import _stdjson

        _source = _stdjson
    return _source.__name__ != "orjson"


def __getattr__(name: str) -> object:
    """Look up ``name`` in the chosen JSON module, orjson unless told otherwise."""
    global _source
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    if _source is None:
        import orjson

        _source = orjson
    return getattr(_source, name)
