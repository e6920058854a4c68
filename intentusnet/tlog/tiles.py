"""Where a tiled log keeps its hashes and entries (c2sp.org/tlog-tiles).

A tile holds 256 consecutive hashes of one level: at level 0 leaf hashes, at
level ``L`` the roots of full tiles of level ``L - 1``. A tile's index is
written as 3-digit path elements, all but the last prefixed ``x``
(``1234067`` -> ``x001/x234/067``); a partial tile (1 to 255 hashes, at the
right edge) adds ``.p/<width>``. Entry bundles hold the leaves themselves,
each prefixed by its length as a big-endian uint16.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from ..errors import LogIntegrityError

__all__ = [
    "MAX_LEAF",
    "TILE_WIDTH",
    "bundle_path",
    "decode_bundle",
    "encode_bundle",
    "index_path",
    "tile_path",
]

TILE_WIDTH: Final = 256
#: The longest leaf an entry bundle can hold (its length is a uint16).
MAX_LEAF: Final = 0xFFFF


def index_path(index: int) -> str:
    """A tile index as path elements: ``1234067`` -> ``x001/x234/067``."""
    digits = str(index)
    digits = "0" * (-len(digits) % 3) + digits
    parts = [digits[i : i + 3] for i in range(0, len(digits), 3)]
    return "/".join([*("x" + part for part in parts[:-1]), parts[-1]])


def tile_path(level: int, index: int, width: int = TILE_WIDTH) -> str:
    """``tile/<level>/<index>``, with ``.p/<width>`` for a partial tile."""
    partial = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/{level}/{index_path(index)}{partial}"


def bundle_path(index: int, width: int = TILE_WIDTH) -> str:
    """``tile/entries/<index>``, with ``.p/<width>`` for a partial bundle."""
    partial = "" if width == TILE_WIDTH else f".p/{width}"
    return f"tile/entries/{index_path(index)}{partial}"


def encode_bundle(leaves: Sequence[bytes]) -> bytes:
    """Leaves as an entry bundle: each one's length (uint16, big-endian), then it."""
    return b"".join(len(leaf).to_bytes(2, "big") + leaf for leaf in leaves)


def decode_bundle(data: bytes) -> list[bytes]:
    """The leaves of an entry bundle.

    Raises:
        LogIntegrityError: a length runs past the end of the bundle.
    """
    leaves: list[bytes] = []
    at = 0
    while at < len(data):
        end = at + 2 + int.from_bytes(data[at : at + 2], "big")
        if at + 2 > len(data) or end > len(data):
            raise LogIntegrityError("an entry bundle ends inside an entry")
        leaves.append(data[at + 2 : end])
        at = end
    return leaves
