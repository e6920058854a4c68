"""Time-sortable identifiers (light: no third-party imports)."""

from __future__ import annotations

import _random
import os
import time

# Ids need uniqueness, not secrecy: a Mersenne Twister seeded from the OS costs a
# fraction of an os.urandom call on the routing hot path. Forked children reseed
# so that they never repeat their parent's sequence. ``_random.Random`` is the C
# generator that ``random.Random`` extends: the same seeding and getrandbits,
# without importing ``random`` (with bisect and _sha512) into every process.
_rng = _random.Random()
_random_bits = _rng.getrandbits
os.register_at_fork(after_in_child=_rng.seed)
_time_ns = time.time_ns
_VARIANT = 0x8 << 60
_VERSION = 0x7 << 12


def uuid7_hex() -> str:
    """Return a UUIDv7 (RFC 9562) as 32 hex digits: sortable by creation time."""
    # 48 bits of milliseconds, version 7, 12 random bits (rand_a), the RFC 9562
    # variant (binary 10) and 62 random bits (rand_b).
    ms = _time_ns() // 1_000_000
    rand_a = _VERSION | _random_bits(12)
    value = ms << 80 | rand_a << 64 | _VARIANT | _random_bits(62)
    return value.to_bytes(16).hex()


def new_execution_id() -> str:
    """Return a new, time-sortable execution id: ``exec-`` + a UUIDv7 in hex."""
    return "exec-" + uuid7_hex()


def new_request_id() -> str:
    """Return a new request id: ``req-`` + a UUIDv7 in hex."""
    return "req-" + uuid7_hex()
