"""Time-sortable identifiers."""

from __future__ import annotations

import random
import time
from typing import Final

__all__ = [
    "ID_PART_PATTERN",
    "new_execution_id",
    "new_request_id",
    "uuid7_hex",
]

#: The start of an execution id (a regular expression to match whole): the
#: characters an id may hold, at most as many as an id may be long.
ID_PART_PATTERN: Final = r"[A-Za-z0-9_.-]{1,128}"

# Ids need uniqueness, not secrecy: the module's generator is seeded from the
# OS, and reseeded in forked children, so they never repeat their parent's ids.
_VARIANT = 0x8 << 60
_VERSION = 0x7 << 12
_RAND_B = (1 << 62) - 1


def uuid7_hex() -> str:
    """Return a UUIDv7 (RFC 9562) as 32 hex digits: sortable by creation time."""
    # 48 bits of milliseconds, version 7, 12 random bits (rand_a), the RFC 9562
    # variant (binary 10) and 62 random bits (rand_b), drawn at once.
    ms = time.time_ns() // 1_000_000
    rand = random.getrandbits(74)
    rand_a = _VERSION | rand >> 62
    value = ms << 80 | rand_a << 64 | _VARIANT | rand & _RAND_B
    return value.to_bytes(16).hex()


def new_execution_id() -> str:
    """Return a new, time-sortable execution id: ``exec-`` + a UUIDv7 in hex."""
    return "exec-" + uuid7_hex()


def new_request_id() -> str:
    """Return a new request id: ``req-`` + a UUIDv7 in hex."""
    return "req-" + uuid7_hex()
