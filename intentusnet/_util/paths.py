"""The path syntax of redaction rules: where in a JSON value a secret sits.

A path names nodes of a JSON value, from its root::

    user.ssn                  key "ssn" of key "user"
    messages[*].content       "content" of every item of the array "messages"
    items[0].card             "card" of the first item
    headers["x-api.key"]      a key holding a dot, a bracket or a quote
    *.password                "password" of every child of the root
    **.token                  "token" at any depth (the root's included)
    $                         the whole value

Segments are joined by dots; ``[N]`` is an array index, ``[*]`` and ``*`` any
child (every key of an object, every item of an array), ``["..."]`` a key
written as a JSON string, and ``**`` zero or more levels. A leading ``$.`` is
allowed and changes nothing.

:func:`rewrite` replaces the nodes paths (or a predicate) pick in a value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Final, NoReturn, TypeAlias

from .jsonvalue import JSONValue

__all__ = ["ANY", "DEEP", "Path", "Pick", "Segment", "parse", "render", "rewrite"]

#: One step of a path: a key (``str``), an index (``int``), ANY or DEEP.
Segment: TypeAlias = "str | int | _Wild"
Path: TypeAlias = tuple[Segment, ...]
#: ``pick(path, value) -> bool``: also replace this node (``path`` as rendered).
Pick: TypeAlias = Callable[[str, JSONValue], bool]


class _Wild:
    """``*`` (any child) or ``**`` (any depth)."""

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


ANY: Final = _Wild("*")
DEEP: Final = _Wild("**")

_NAME: Final = re.compile(r"[^.\[\]\"*\s]+")
_INDEX: Final = re.compile(r"\[(\d+|\*)\]")


def parse(text: str) -> Path:
    """Return the segments of a path.

    Raises:
        ValueError: not a path; the message names the character at fault.
    """
    if not isinstance(text, str):
        raise TypeError(f"a path is a string, not {type(text).__name__}")
    if text == "$":
        return ()
    rest = text[2:] if text.startswith("$.") else text
    start = len(text) - len(rest)
    segments: list[Segment] = []
    at = 0
    while at < len(rest):
        if rest[at] == "[":
            at = _bracket(text, rest, at, start, segments)
            continue
        if segments or at:  # after a segment: a dot, then a name, * or **
            if rest[at] != ".":
                _fail(text, start + at, "expected '.' or '['")
            at += 1
        if rest.startswith("**", at):
            segments.append(DEEP)
            at += 2
        elif rest.startswith("*", at):
            segments.append(ANY)
            at += 1
        elif (name := _NAME.match(rest, at)) is not None:
            segments.append(name.group())
            at = name.end()
        elif at < len(rest) and rest[at] == "[":
            _fail(text, start + at, "'[' follows a segment directly, without '.'")
        else:
            _fail(text, start + at, "empty segment")
        if at < len(rest) and rest[at] not in ".[":
            _fail(text, start + at, "expected '.' or '['")
    if not segments:
        _fail(text, 0, "empty path (write '$' for the whole value)")
    return tuple(segments)


def _bracket(text: str, rest: str, at: int, start: int, out: list[Segment]) -> int:
    """Parse ``[N]``, ``[*]`` or ``["key"]`` at ``rest[at]``; return the next index."""
    index = _INDEX.match(rest, at)
    if index is not None:
        found = index.group(1)
        out.append(ANY if found == "*" else int(found))
        return index.end()
    if rest.startswith('["', at):
        decoder = json.JSONDecoder()
        try:
            key, end = decoder.raw_decode(rest, at + 1)
        except json.JSONDecodeError:
            _fail(text, start + at + 1, "unterminated or invalid JSON string")
        if end < len(rest) and rest[end] == "]":
            out.append(key)
            return end + 1
        _fail(text, start + end, "expected ']' after the quoted key")
    _fail(text, start + at, 'expected [N], [*] or ["key"]')


def _fail(text: str, at: int, why: str) -> NoReturn:
    raise ValueError(f"bad path {text!r} at character {at + 1}: {why}")


def render(at: tuple[str | int, ...]) -> str:
    """The path of a node, as a hook sees it: ``messages[0].content``, or ``$``."""
    text = ""
    for key in at:
        if isinstance(key, int):
            text += f"[{key}]"
        elif _NAME.fullmatch(key):
            text += f".{key}" if text else key
        else:
            text += f"[{json.dumps(key)}]"
    return text or "$"


def rewrite(
    value: JSONValue,
    paths: tuple[Path, ...],
    replace: Callable[[JSONValue], JSONValue],
    pick: Pick | None = None,
    *,
    whole: bool = True,
) -> JSONValue:
    """``value`` with ``replace(node)`` for each node a path or ``pick`` names.

    ``pick`` is asked about every node from the root down, until it says
    yes; a replaced node is not looked into. Containers are copied only where
    something changed: an untouched value is returned as it is. Without
    ``whole``, the root itself is never replaced nor shown to ``pick``.
    """
    if not paths and pick is None:
        return value
    return _visit(value, paths, replace, pick, (), whole)


def _visit(
    value: JSONValue,
    alive: tuple[Path, ...],
    replace: Callable[[JSONValue], JSONValue],
    pick: Pick | None,
    at: tuple[str | int, ...],
    whole: bool = True,
) -> JSONValue:
    ends, onward = _expand(alive)
    if (ends and whole) or (pick is not None and whole and pick(render(at), value)):
        return replace(value)
    if type(value) is dict:
        changed: dict[str, JSONValue] | None = None
        for key, item in value.items():
            paths = _children(onward, key, str)
            if not paths and pick is None:
                continue
            new = _visit(item, paths, replace, pick, (*at, key))
            if new is not item:
                if changed is None:
                    changed = dict(value)
                changed[key] = new
        return value if changed is None else changed
    if type(value) is list:
        items: list[JSONValue] | None = None
        for index, item in enumerate(value):
            paths = _children(onward, index, int)
            if not paths and pick is None:
                continue
            new = _visit(item, paths, replace, pick, (*at, index))
            if new is not item:
                if items is None:
                    items = list(value)
                items[index] = new
        return value if items is None else items
    return value


def _expand(alive: tuple[Path, ...]) -> tuple[bool, tuple[Path, ...]]:
    """Whether a path ends at this node, and the paths going on to its children.

    ``**`` matches zero levels (the rest applies here) or more (it goes on).
    """
    ends = False
    onward: dict[Path, None] = {}
    stack = list(alive)
    while stack:
        path = stack.pop()
        if not path:
            ends = True
            continue
        onward[path] = None
        if path[0] is DEEP:
            stack.append(path[1:])
    return ends, tuple(onward)


def _children(onward: tuple[Path, ...], key: str | int, kind: type) -> tuple[Path, ...]:
    """The paths that go on into the child at ``key``."""
    found: list[Path] = []
    for path in onward:
        first = path[0]
        if first is DEEP:
            found.append(path)
        elif first is ANY or (type(first) is kind and first == key):
            found.append(path[1:])
    return tuple(found)
