"""What every file of a tiled log directory must hold, computed by the oracle."""

from __future__ import annotations

from pathlib import Path

from .oracle import aics_tlog


def disagreeing_files(directory: Path, leaves: list[bytes]) -> list[str]:
    """The tile and bundle files under ``directory`` not as ``leaves`` make them.

    Each file is recomputed from the leaves by ``aics-tlog``: a tile's hashes
    as the roots of the ranges of leaves they stand for, a bundle's entries as
    the leaves. A file for leaves past the end of ``leaves`` disagrees.
    """
    oracle = aics_tlog()
    from aics_tlog import tiles

    wrong: list[str] = []
    for path in sorted((directory / "tile").rglob("*")):
        if path.is_dir():
            continue
        name = path.relative_to(directory).as_posix()
        data = path.read_bytes()
        if name.startswith("tile/entries/"):
            index, width = tiles.parse_entry_bundle_path(name)
            start = index * 256
            wanted = leaves[start : start + (width or 256)]
            if (
                len(wanted) != (width or 256)
                or tiles.build_entry_bundle(wanted) != data
            ):
                wrong.append(name)
            continue
        level, index, width = tiles.parse_tile_path(name)
        span = 256**level
        expected = b""
        for j in range(index * 256, index * 256 + (width or 256)):
            part = leaves[j * span : (j + 1) * span]
            if len(part) != span:
                expected = b"past the end"
                break
            expected += oracle.MerkleTree(part).root()
        if expected != data:
            wrong.append(name)
    return wrong
