"""One of an enum's values, named by a user: the member, or an error listing them."""

from __future__ import annotations

from enum import Enum
from typing import TypeVar

__all__ = ["choice"]

_E = TypeVar("_E", bound=Enum)


def choice(enum: type[_E], value: object, what: str) -> _E:
    """The member of ``enum`` whose value is ``value``.

    Raises:
        ValueError: none is; the message names ``what`` and lists the values.
    """
    for member in enum:
        if value == member.value:
            return member
    valid = ", ".join(repr(member.value) for member in enum)
    raise ValueError(f"unknown {what} {value!r}; use one of {valid}")
