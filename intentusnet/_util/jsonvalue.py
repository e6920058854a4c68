"""The JSON value type, the one check that a Python value is JSON, wire forms."""

from __future__ import annotations

import dataclasses
import json
import math
from typing import TYPE_CHECKING, Any, Final, TypeAlias, cast

import orjson

from ..errors import EnvelopeValidationError

if TYPE_CHECKING:
    from collections.abc import Collection, Iterable

    from _typeshed import DataclassInstance

    JSONValue: TypeAlias = (
        dict[str, "JSONValue"] | list["JSONValue"] | str | int | float | bool | None
    )
    JSONObject: TypeAlias = dict[str, JSONValue]
else:
    # The recursive alias is for type checkers; at run time a flat union keeps
    # ``X | JSONValue`` and pydantic happy.
    JSONValue = dict[str, Any] | list[Any] | str | int | float | bool | None
    JSONObject = dict[str, Any]

__all__ = [
    "MAX_DEPTH",
    "MAX_SAFE_INT",
    "JSONObject",
    "JSONValue",
    "as_float",
    "as_int",
    "as_str",
    "check_json",
    "copy_json",
    "parse_json",
    "render_path",
    "wire_form",
]

#: Integers JSON numbers carry exactly in every language (IEEE 754 doubles).
MAX_SAFE_INT = 2**53 - 1
#: Nesting deeper than this is refused; it also keeps every serializer we use
#: (orjson stops at 255) and every recursive reader safely inside its limits.
MAX_DEPTH = 200

# A path is built only when it is reported: (parent, key) pairs, rooted in a str.
_Path: TypeAlias = "tuple[_Path, str | int] | str"

#: Floats whose orjson text equals their RFC 8785 text: not integral (orjson
#: writes ``1.0``, RFC 8785 ``1``) and in the range where both use plain
#: decimal notation with the same shortest round-trip digits.
_PLAIN_FLOAT_MIN: Final = 1e-5
_PLAIN_FLOAT_MAX: Final = 1e15
#: Integers with at most 15 digits: orjson and RFC 8785 agree on them.
_PLAIN_INT_MAX: Final = 10**15 - 1


def render_path(path: _Path) -> str:
    """Turn a lazily built path into ``payload.items[3].price`` form."""
    keys: list[str | int] = []
    while isinstance(path, tuple):
        path, key = path
        keys.append(key)
    text = path
    for key in reversed(keys):
        if isinstance(key, int):
            text += f"[{key}]"
        elif key.isidentifier():
            text += f".{key}" if text else key
        else:
            text += f"[{key!r}]"
    return text or "$"


def check_json(value: object, path: str = "") -> bool:
    """Raise ``EnvelopeValidationError`` naming the path unless ``value`` is JSON.

    JSON here is what survives a round trip through any JSON implementation:
    dicts with string keys, lists (tuples are read as lists), strings, booleans,
    ``None``, integers within +-(2**53-1) and finite floats. Strings must be
    encodable as UTF-8 (no lone surrogates). Iterative, so hostile nesting cannot
    exhaust the stack.

    Returns:
        True when orjson with sorted keys writes ``value`` exactly as RFC 8785
        does (no float, integer or key of the few shapes where they differ), so
        the canonical form can take the fast path.
    """
    if value is None or (type(value) is str and value.isascii()):
        return True  # the scalars of an envelope's hashed view (version, tenant)
    plain = True
    # The stack holds containers still to walk, as (children, path, depth, is_dict);
    # scalars are checked where they are met, and a child's path is built only
    # when it is reported or when the child is itself a container. A root that
    # is not a dict is the only child of a pseudo-container at depth -1, whose
    # child sits at ``path`` itself.
    stack: list[tuple[Iterable[tuple[Any, Any]], _Path, int, bool]] = [
        (value.items(), path, 0, True)
        if type(value) is dict
        else (((None, value),), path, -1, False)
    ]
    pop, push = stack.pop, stack.append
    while stack:
        children, where, depth, is_dict = pop()
        for key, item in children:
            kind = type(item)
            if kind is str:
                if not item.isascii():
                    _check_utf8(item, _child(where, key, depth))
            elif kind is int:
                if not -_PLAIN_INT_MAX <= item <= _PLAIN_INT_MAX:
                    plain = False
                    if not -MAX_SAFE_INT <= item <= MAX_SAFE_INT:
                        raise EnvelopeValidationError(
                            f"integer {item} is beyond +-(2**53-1) and would lose "
                            "precision in JSON; send it as a string",
                            render_path(_child(where, key, depth)),
                        )
            elif kind is float:
                if not math.isfinite(item):
                    raise EnvelopeValidationError(
                        f"{item} is not a JSON number (NaN and infinities are not "
                        "allowed)",
                        render_path(_child(where, key, depth)),
                    )
                if plain and (
                    item.is_integer()
                    or not _PLAIN_FLOAT_MIN <= abs(item) < _PLAIN_FLOAT_MAX
                ):
                    plain = False
            elif kind is bool or item is None:
                pass
            elif kind is dict or kind is list or kind is tuple:
                here = _child(where, key, depth)
                if depth + 1 >= MAX_DEPTH:
                    raise EnvelopeValidationError(
                        f"nested deeper than {MAX_DEPTH} levels", render_path(here)
                    )
                if kind is dict:
                    push((item.items(), here, depth + 1, True))
                else:
                    push((enumerate(item), here, depth + 1, False))
            elif isinstance(item, str | int | float | dict | list):
                # Subclasses (enums, IntEnum, OrderedDict, ...) serialize differently
                # across libraries; refuse rather than guess.
                raise EnvelopeValidationError(
                    f"{kind.__name__} is a subclass of a JSON type; "
                    "pass a plain str, int, float, dict or list",
                    render_path(_child(where, key, depth)),
                )
            else:
                raise EnvelopeValidationError(
                    f"{kind.__name__} is not a JSON value",
                    render_path(_child(where, key, depth)),
                )
            if is_dict:
                if type(key) is not str:
                    raise EnvelopeValidationError(
                        f"object key {key!r} is a {type(key).__name__}, "
                        "JSON keys must be strings",
                        render_path(where),
                    )
                if not key.isascii():
                    _check_utf8(key, where)
                    if plain and max(key) > "\uffff":
                        plain = False  # RFC 8785 sorts keys in UTF-16 order
    return plain


def parse_json(data: bytes | bytearray | str) -> JSONValue:
    """Parse JSON text from outside (a request body, a file, an agent's answer).

    Integers are kept exact, however long (orjson would turn one beyond 64 bits
    into a float and lose its digits), so that :func:`check_json` refuses one
    beyond +-(2**53-1) with the same error as a Python value. ``NaN`` and
    ``Infinity``, invalid UTF-8, lone surrogates, trailing data, nesting
    deeper than about 200 levels, an object naming a key twice and a key
    holding a NUL (``\u0000``) are not JSON here: two readers of a key given
    twice may each take another value, and a NUL ends a key in C. A number
    too large for a float (``1E400``) reads as an infinity, which
    :func:`check_json` refuses.

    Raises:
        ValueError: the text is not JSON; the message says where.
    """
    # pydantic-core's parser (the one pydantic uses): exact integers and fast.
    # Without its string cache: filling it makes a process's first parse cost
    # about 0.1 ms more, and the documents read here are mostly read once.
    from pydantic_core import from_json

    value = from_json(data, allow_inf_nan=False, cache_strings=False)
    if isinstance(value, dict | list):
        # It keeps the last of a key given twice without a word: the standard
        # library's scanner shows each object's keys (only keys are looked at).
        text = data if isinstance(data, str) else bytes(data).decode()
        _KEYS_CHECK.decode(text)
    return cast("JSONValue", value)


def _distinct_keys(pairs: list[tuple[str, object]]) -> None:
    """Refuse an object naming a key twice, or a key holding a NUL."""
    keys = {key for key, _ in pairs}
    if len(keys) < len(pairs):
        twice = next(k for i, (k, _) in enumerate(pairs) if k in dict(pairs[:i]))
        raise ValueError(f"the key {twice!r} is given twice in one object")
    for key in keys:
        if "\0" in key:
            raise ValueError(f"the key {key!r} holds a NUL character")


#: The standard library's scanner, telling :func:`_distinct_keys` each
#: object's keys (what it builds is thrown away).
_KEYS_CHECK: Final = json.JSONDecoder(object_pairs_hook=_distinct_keys)


def _child(where: _Path, key: str | int, depth: int) -> _Path:
    """The path of the child at ``key`` of the container at ``where``."""
    return where if depth < 0 else (where, key)


def _check_utf8(text: str, where: _Path) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise EnvelopeValidationError(
            "string holds a lone surrogate and cannot be encoded as UTF-8",
            render_path(where),
        ) from exc


def copy_json(value: JSONValue) -> JSONValue:
    """A deep copy of ``value``, sharing nothing with it."""
    if isinstance(value, dict | list):
        copied: JSONValue = orjson.loads(orjson.dumps(value))
        return copied
    return value


def wire_form(value: DataclassInstance, *, skip: Collection[str] = ()) -> JSONObject:
    """The camelCase wire form of a dataclass: its fields in order, but ``skip``.

    A field holding a value with a wire form of its own (``to_json``) gives
    that; a tuple gives a list.
    """
    return {
        _camel(field.name): _wire(getattr(value, field.name))
        for field in dataclasses.fields(value)
        if field.name not in skip
    }


def _camel(name: str) -> str:
    first, *rest = name.split("_")
    return first + "".join(part.capitalize() for part in rest)


def _wire(value: object) -> JSONValue:
    to_json = getattr(value, "to_json", None)
    if to_json is not None:
        return cast(JSONValue, to_json())
    if isinstance(value, tuple):
        return [_wire(item) for item in value]
    return cast(JSONValue, value)


def as_str(value: JSONValue | None) -> str | None:
    """``value`` if it is a string, else ``None``."""
    return value if isinstance(value, str) else None


def as_int(value: JSONValue | None) -> int | None:
    """``value`` if it is an int (not a boolean), else ``None``."""
    return value if type(value) is int else None


def as_float(value: JSONValue | None) -> float | None:
    """``value`` as a float if it is a number (not a boolean), else ``None``."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)
