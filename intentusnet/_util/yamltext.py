"""JSON values written as YAML block text, for people to read (``records show``).

Only what JSON holds: objects, arrays, strings, numbers, booleans and null,
written in block style, one key or item a line. A YAML parser reads the text
back as the same value (YAML 1.1 parsers too, PyYAML's ``safe_load``): a
string is written plain only when it cannot be read as anything else (a
number, a boolean, null, a date ...), else single-quoted, or double-quoted
with escapes when it holds characters YAML does not print; a string of
several lines is a literal block (``|``) when that keeps it exactly.
"""

from __future__ import annotations

import re
from typing import Final

from .jsonvalue import JSONValue

__all__ = ["yaml_text"]

#: Plain scalars: a letter or ``_`` first, then a few safe characters; words a
#: YAML 1.1 parser reads as booleans or null are quoted.
_PLAIN: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_ .,:/@+()-]*")
_WORDS: Final = frozenset({"true", "false", "yes", "no", "on", "off", "null", "y", "n"})
#: Characters printed as they are in a quoted scalar (YAML's printable ones,
#: less its other line breaks, the byte order mark and, in single quotes, tab).
_PRINTABLE: Final = re.compile(
    "[\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]*"
)
_ESCAPES: Final = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\t": "\\t"}
#: Longest key written as ``key: value``; YAML allows 1,024 characters.
_KEY_KEPT: Final = 1000


def yaml_text(value: JSONValue) -> str:
    """``value`` as YAML block text, ending with a newline."""
    if isinstance(value, dict | list) and value:
        return "\n".join(_block(value, 0)) + "\n"
    return _scalar(value, 2) + "\n"


def _block(value: dict[str, JSONValue] | list[JSONValue], indent: int) -> list[str]:
    """The lines of a non-empty object or array at ``indent`` spaces."""
    pad = " " * indent
    lines: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            name = _single_line(key)
            if len(name) > _KEY_KEPT:  # an explicit key: "? key" then ": value"
                lines.append(f"{pad}? {name}")
                lines.extend(_entry(f"{pad}:", item, indent))
            else:
                lines.extend(_entry(f"{pad}{name}:", item, indent))
        return lines
    for item in value:
        if isinstance(item, dict | list) and item:
            inner = _block(item, indent + 2)
            lines.append(f"{pad}- {inner[0][indent + 2 :]}")
            lines.extend(inner[1:])
        else:
            lines.append(f"{pad}- {_scalar(item, indent + 2)}")
    return lines


def _entry(lead: str, item: JSONValue, indent: int) -> list[str]:
    """``lead`` (a key and its colon) followed by ``item``, nested below when needed."""
    if isinstance(item, dict | list) and item:
        return [lead, *_block(item, indent + 2)]
    return [f"{lead} {_scalar(item, indent + 2)}"]


def _scalar(value: JSONValue, indent: int) -> str:
    """A scalar or an empty collection; a literal block's lines at ``indent``."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return _number(value)
    if isinstance(value, str):
        return _literal(value, indent) or _single_line(value)
    return "{}" if isinstance(value, dict) else "[]"


def _number(value: float) -> str:
    """A float as YAML 1.1 reads one: a dot in the mantissa, a signed exponent."""
    if value != value:
        return ".nan"
    if value in (float("inf"), float("-inf")):
        return ".inf" if value > 0 else "-.inf"
    text = repr(value)
    mantissa, e, exponent = text.partition("e")
    if e and "." not in mantissa:
        return f"{mantissa}.0e{exponent}"
    return text


def _single_line(text: str) -> str:
    """A string on one line: plain, single-quoted, or double-quoted with escapes."""
    if (
        _PLAIN.fullmatch(text)
        and text.lower() not in _WORDS
        and not text.endswith((" ", ":"))
        and ": " not in text
    ):
        return text
    if _PRINTABLE.fullmatch(text):
        return "'" + text.replace("'", "''") + "'"
    return '"' + "".join(_escaped(c) for c in text) + '"'


def _escaped(char: str) -> str:
    if char in _ESCAPES:
        return _ESCAPES[char]
    if _PRINTABLE.fullmatch(char):
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _literal(text: str, indent: int) -> str | None:
    """A string of several lines as a literal block, or None if it cannot be one.

    Every character must be printable (tabs too), and the first line with
    text must not start with a space or tab (it sets the block's
    indentation); the chomping indicator keeps the ending newlines exactly
    (``|-`` none, ``|`` one, ``|+`` more).
    """
    if "\n" not in text:
        return None
    lines = text.split("\n")
    if text.endswith("\n"):
        lines.pop()  # the last line's own line break
    first = next((line for line in lines if line), "")
    if (
        not first
        or first[0] in " \t"
        or not all(_PRINTABLE.fullmatch(line.replace("\t", " ")) for line in lines)
    ):
        return None
    ending = len(text) - len(text.rstrip("\n"))
    chomp = "-" if ending == 0 else "" if ending == 1 else "+"
    pad = " " * indent
    return f"|{chomp}\n" + "\n".join(pad + line if line else "" for line in lines)
