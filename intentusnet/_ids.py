"""Time-sortable identifiers (light: no third-party imports)."""

from __future__ import annotations

import os
import random
import time

# Ids need uniqueness, not secrecy: a Mersenne Twister seeded from the OS costs a
# fraction of an os.urandom call on the routing hot path. Forked children reseed
# so that they never repeat their parent's sequence.
_rng = random.Random()
_random_bits = _rng.getrandbits
os.register_at_fork(after_in_child=_rng.seed)


def uuid7_hex() -> str:
    """Return a UUIDv7 (RFC 9562) as 32 hex digits: sortable by creation time."""
    ms = time.time_ns() // 1_000_000
    # 12 bits rand_a, then the variant, then 62 bits rand_b
    return f"{ms:012x}7{_random_bits(12):03x}{0x8 << 60 | _random_bits(62):016x}"


def new_execution_id() -> str:
    """Return a new, time-sortable execution id: ``exec-`` + a UUIDv7 in hex."""
    return "exec-" + uuid7_hex()


def new_request_id() -> str:
    """Return a new request id: ``req-`` + a UUIDv7 in hex."""
    return "req-" + uuid7_hex()
