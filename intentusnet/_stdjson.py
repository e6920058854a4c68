r"""Stdlib twins of the orjson calls the record modules make, for a fast CLI start.

Importing orjson is the largest part of what ``intentusnet replay ID`` adds to a
bare Python start: it imports ``uuid``, ``platform``, ``dataclasses``,
``inspect``, ``datetime`` and ``json``. The twins here give the same results
with the stdlib ``json`` module alone, under one rule: a twin answers only where
the stdlib provably gives exactly what orjson gives, and calls orjson (importing
it then) anywhere else. So a value read, hashed or printed is the same either
way, and so is every error, which only orjson raises. Each limit below stands on
one side of a difference between the two, found by running both; the tests hold
the twins against orjson over generated values and hostile bytes.

:func:`loads` answers bytes that json reads without error and that

- are UTF-8 (json would read an encoded surrogate, which orjson refuses),
- hold no ``\u`` escape of a surrogate (json reads a lone one, orjson refuses it),
- hold at most 1024 ``[`` and ``{`` (orjson refuses nesting deeper than 1024),
- write no integer in more than 15 characters (orjson reads one beyond 64 bits
  as a float),
- write every other number as Python's repr writes its float, without exponent:
  the shortest digits that round-trip, which every correct reader reads as the
  same float (and which is how orjson writes every float from 1e-4 up to 1e16),
- hold no ``NaN`` or ``Infinity`` (json reads them, orjson refuses them).

:func:`dumps` answers values made only of dicts with str keys, lists, strs,
bools, ``None``, 64-bit integers (orjson refuses others) and floats that are
zero or of magnitude from 1e-4 up to 1e16, where both write the same plain
decimals (below, orjson writes ``0.00001`` and ``1e-7`` where repr writes
``1e-05`` and ``1e-07``; above, both write exponents, which nothing here needs),
nested at most 200 deep (orjson refuses 255), with any of the options the
library uses.
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from types import ModuleType

#: What the record modules catch: orjson's error, the only one raised, is a subclass.
JSONDecodeError = json.JSONDecodeError

# This module's own option flags; :func:`_orjson_option` translates them.
OPT_APPEND_NEWLINE: Final = 1
OPT_INDENT_2: Final = 2
OPT_SORT_KEYS: Final = 4
_OPTIONS: Final = OPT_APPEND_NEWLINE | OPT_INDENT_2 | OPT_SORT_KEYS

#: A ``\u`` escape of a UTF-16 surrogate (D800-DFFF). After an escaped
#: backslash it is no escape, but then stepping aside is merely slower.
_SURROGATE_ESCAPE: Final = re.compile(rb"\\u[dD][89a-fA-F]")
_MAX_OPENINGS: Final = 1024
_MAX_INT_TEXT: Final = 15
_INT_MIN: Final = -(2**63)
_INT_MAX: Final = 2**64 - 1
_FLOAT_MIN: Final = 1e-4
_FLOAT_MAX: Final = 1e16
_MAX_DEPTH: Final = 200


class _Unsure(ValueError):
    """The stdlib's reading of some text might differ from orjson's."""


def _read_int(text: str) -> int:
    if len(text) > _MAX_INT_TEXT:
        raise _Unsure(text)
    return int(text)


def _read_float(text: str) -> float:
    value = float(text)
    if "e" in text or repr(value) != text:
        raise _Unsure(text)
    return value


def _read_constant(text: str) -> float:
    raise _Unsure(text)


_decode = json.JSONDecoder(
    parse_float=_read_float, parse_int=_read_int, parse_constant=_read_constant
).decode
_COMPACT: Final = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, allow_nan=False, separators=(",", ":")
)
_COMPACT_SORTED: Final = json.JSONEncoder(
    ensure_ascii=False,
    check_circular=False,
    allow_nan=False,
    separators=(",", ":"),
    sort_keys=True,
)
_INDENTED: Final = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, allow_nan=False, indent=2
)
_INDENTED_SORTED: Final = json.JSONEncoder(
    ensure_ascii=False, check_circular=False, allow_nan=False, indent=2, sort_keys=True
)
#: The encoder for each combination of OPT_INDENT_2 and OPT_SORT_KEYS.
_ENCODERS: Final = {
    0: _COMPACT,
    OPT_SORT_KEYS: _COMPACT_SORTED,
    OPT_INDENT_2: _INDENTED,
    OPT_INDENT_2 | OPT_SORT_KEYS: _INDENTED_SORTED,
}


def loads(data: bytes, /) -> Any:
    """Parse JSON as ``orjson.loads(data)`` does.

    Raises:
        orjson.JSONDecodeError: as orjson does (a subclass of ``JSONDecodeError``).
    """
    if (
        type(data) is bytes
        and data.count(b"[") + data.count(b"{") <= _MAX_OPENINGS
        and _SURROGATE_ESCAPE.search(data) is None
    ):
        try:
            return _decode(data.decode())
        except (ValueError, RecursionError):
            pass  # invalid, or not provably read alike: orjson decides
    return _orjson().loads(data)


def dumps(value: object, /, *, option: int | None = None) -> bytes:
    """Serialise ``value`` as ``orjson.dumps`` does with the matching options.

    Args:
        value: the value to write.
        option: ``OPT_APPEND_NEWLINE``, ``OPT_INDENT_2`` and ``OPT_SORT_KEYS`` of
            this module, combined with ``|``.

    Raises:
        TypeError: as orjson does, for a value it cannot write.
    """
    option = option or 0
    if option & ~_OPTIONS:
        raise ValueError(f"option {option} is not one this module knows")
    if _writes_alike(value, 0):
        try:
            text = _ENCODERS[option & ~OPT_APPEND_NEWLINE].encode(value)
            if option & OPT_APPEND_NEWLINE:
                text += "\n"
            return text.encode()
        except ValueError:
            pass  # a lone surrogate in a str: orjson says what is wrong
    written: bytes = _orjson().dumps(value, option=_orjson_option(option))
    return written


def _writes_alike(value: object, depth: int) -> bool:
    """Whether json writes ``value`` with the same bytes as orjson."""
    if type(value) is str or type(value) is bool or value is None:
        return True
    if type(value) is int:
        return _INT_MIN <= value <= _INT_MAX
    if type(value) is float:
        # False for NaN and the infinities too.
        return value == 0.0 or _FLOAT_MIN <= abs(value) < _FLOAT_MAX
    if depth >= _MAX_DEPTH:
        return False
    if type(value) is list:
        return all(_writes_alike(item, depth + 1) for item in value)
    if type(value) is dict:
        return all(
            type(key) is str and _writes_alike(item, depth + 1)
            for key, item in value.items()
        )
    return False


def _orjson() -> ModuleType:
    import orjson

    return orjson


def _orjson_option(option: int) -> int:
    orjson = _orjson()
    flags = 0
    if option & OPT_APPEND_NEWLINE:
        flags |= orjson.OPT_APPEND_NEWLINE
    if option & OPT_INDENT_2:
        flags |= orjson.OPT_INDENT_2
    if option & OPT_SORT_KEYS:
        flags |= orjson.OPT_SORT_KEYS
    return int(flags)
