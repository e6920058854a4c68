"""Helpers of the transparency log's tests: the oracle, and what the files must hold.

The independent implementation the log is checked against is ``aics-tlog``. It
declares Python >= 3.12 but runs on 3.11, so it is not in the ``dev`` extra
(pip would refuse the extra); ``.ci/run`` installs it with
``pip install --ignore-requires-python aics-tlog``. Without it the tests that
need it skip, and fail under ``CI=true``: CI must run them.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import ModuleType

import pytest


def aics_tlog() -> ModuleType:
    """The ``aics_tlog`` module, or fail (CI) or skip (elsewhere)."""
    try:
        import aics_tlog
    except ImportError:
        reason = (
            "aics-tlog is not installed "
            "(pip install --ignore-requires-python aics-tlog)"
        )
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(reason + "; CI must run these tests", pytrace=False)
        pytest.skip(reason)
    return aics_tlog


def disagreeing_files(directory: Path, leaves: list[bytes]) -> list[str]:
    """The tile and bundle files under ``directory`` not as ``leaves`` make them.

    Each file is recomputed from the leaves by ``aics-tlog``: a tile's hashes
    as the roots of the ranges of leaves they stand for, a bundle's entries as
    the leaves. A file for leaves past the end of ``leaves`` disagrees.
    """
    oracle = aics_tlog()
    tiles = oracle.tiles
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
