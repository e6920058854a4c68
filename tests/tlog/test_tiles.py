"""Tile paths and entry bundles as c2sp.org/tlog-tiles spells them."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tlogkit import aics_tlog

from intentusnet.errors import LogIntegrityError
from intentusnet.tlog.tiles import (
    bundle_path,
    decode_bundle,
    encode_bundle,
    index_path,
    tile_path,
)


@pytest.mark.parametrize(
    ("index", "path"),
    [
        (0, "000"),
        (5, "005"),
        (999, "999"),
        (1000, "x001/000"),
        (1234067, "x001/x234/067"),
    ],
)
def test_index_paths_as_the_spec_writes_them(index: int, path: str) -> None:
    """Indexes are 3-digit elements, all but the last prefixed x (as in the spec)."""
    assert index_path(index) == path


def test_tile_and_bundle_paths() -> None:
    """Full tiles have no suffix, partial ones ``.p/<width>``; bundles: entries/."""
    assert tile_path(0, 1234067) == "tile/0/x001/x234/067"
    assert tile_path(2, 3, 17) == "tile/2/003.p/17"
    assert bundle_path(1000) == "tile/entries/x001/000"
    assert bundle_path(0, 1) == "tile/entries/000.p/1"


@given(st.integers(0, 10**12), st.integers(0, 63), st.integers(1, 256))
def test_paths_agree_with_aics_tlog(index: int, level: int, width: int) -> None:
    """Every path equals the oracle's for the same tile or bundle."""
    tiles = aics_tlog().tiles
    partial = None if width == 256 else width
    assert tile_path(level, index, width) == tiles.tile_path(level, index, partial)
    assert bundle_path(index, width) == tiles.entry_bundle_path(index, partial)


@given(st.lists(st.binary(max_size=300), max_size=20))
def test_bundles_round_trip(leaves: list[bytes]) -> None:
    """A bundle decodes to its leaves, and is the oracle's encoding."""
    tiles = aics_tlog().tiles
    data = encode_bundle(leaves)
    assert decode_bundle(data) == leaves
    assert data == tiles.build_entry_bundle(leaves)


@pytest.mark.parametrize("data", [b"\x00", b"\x00\x05abc", b"\x00\x01a\x00"])
def test_a_bundle_cut_inside_an_entry_is_refused(data: bytes) -> None:
    """A length running past the end of the bundle raises LogIntegrityError."""
    with pytest.raises(LogIntegrityError, match="ends inside an entry"):
        decode_bundle(data)
