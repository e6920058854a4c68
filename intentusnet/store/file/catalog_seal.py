"""The catalog's checksum, computed in Python and, by triggers, in SQL.

A CRC-32: enough to find any flipped bit, and cheap: the catalog guards against
damage, not forgery (the record files, sealed with SHA-256, are the truth).
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence
from typing import Final

#: The SQL function computing :func:`crc`, registered on each catalog connection.
SEAL_FUNCTION: Final = "intentusnet_seal"


class DamagedRow(ValueError):
    """A row of a catalog table does not match its checksum."""


def crc(text: str) -> int:
    """The CRC-32 of ``text``: what :data:`SEAL_FUNCTION` computes in SQL."""
    return zlib.crc32(text.encode("utf-8", "surrogatepass"))


def row_seal(values: Sequence[object]) -> int:
    """The seal of a row's values: the checksum of their ``repr``.

    The values are those the row is read back as (see ``catalog.sealed_values``).
    """
    return crc(repr(tuple(values)))


def parts_seal(*parts: object) -> int:
    """The seal of a row kept by triggers: the text :func:`seal_sql` seals in SQL."""
    return crc("\x1f".join(map(str, parts)))


def seal_sql(*parts: str) -> str:
    """SQL of the seal of these SQL values: the same text as :func:`parts_seal`."""
    # Each part in parentheses: || binds tighter than + in SQL.
    text = " || char(31) || ".join(f"({part})" for part in parts)
    return f"{SEAL_FUNCTION}({text})"
