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
"""

from __future__ import annotations

import json
import re
from typing import Final, NoReturn, TypeAlias

__all__ = ["ANY", "DEEP", "Path", "Segment", "parse", "render"]

#: One step of a path: a key (``str``), an index (``int``), ANY or DEEP.
Segment: TypeAlias = "str | int | _Wild"
Path: TypeAlias = tuple[Segment, ...]


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
