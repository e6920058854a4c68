"""TileLog: appending, reading and proving, against the oracle and the spec's layout."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tlogkit import aics_tlog, disagreeing_files

from intentusnet.errors import LogError, LogIntegrityError
from intentusnet.record.keys import SigningKey
from intentusnet.tlog.checkpoint import LogCheckpoint
from intentusnet.tlog.log import TileLog
from intentusnet.tlog.merkle import (
    EMPTY_ROOT,
    leaf_hash,
    verify_consistency,
    verify_inclusion,
)
from intentusnet.tlog.note import verifier_key

ORIGIN = "example.com/intentusnet"


@pytest.fixture(scope="module")
def key() -> SigningKey:
    """The log's signing key."""
    return SigningKey.generate()


def leaves(first: int, count: int) -> list[bytes]:
    """Distinct leaves ``first .. first + count``."""
    return [f"leaf {i}".encode() for i in range(first, first + count)]


def open_log(path: Path, key: SigningKey) -> TileLog:
    """A log appending without flushing (the files are thrown away)."""
    return TileLog(path, origin=ORIGIN, signing_key=key, durable=False)


def test_an_empty_log_has_size_0_and_the_empty_root(
    tmp_path: Path, key: SigningKey
) -> None:
    """Before the first append: no checkpoint, size 0, the empty tree's root."""
    log = open_log(tmp_path / "log", key)
    assert log.checkpoint_note() is None
    assert log.size == 0
    assert log.tree_head(key.public_key).root == EMPTY_ROOT
    assert log.append([]) == 0
    assert log.checkpoint_note() is None


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(batches=st.lists(st.integers(0, 600), min_size=1, max_size=6))
def test_appends_agree_with_aics_tlog(
    tmp_path_factory: pytest.TempPathFactory, key: SigningKey, batches: list[int]
) -> None:
    """After each batch: the oracle's root and proofs; it reads our tiles back."""
    oracle = aics_tlog()
    path = tmp_path_factory.mktemp("log")
    log = open_log(path, key)
    written: list[bytes] = []
    vkey = oracle.parse_vkey(verifier_key(ORIGIN, key.public_key))
    for count in batches:
        batch = leaves(len(written), count)
        written += batch
        assert log.append(batch) == len(written)
        if not written:
            assert log.checkpoint_note() is None
            continue
        tree = oracle.MerkleTree(written)
        head = log.tree_head(key.public_key)
        checked = oracle.verify_checkpoint(
            oracle.parse_note(log.checkpoint_note()), vkey
        )
        assert checked.ok
        assert (
            (head.size, head.root)
            == (checked.size, checked.root)
            == (len(written), tree.root())
        )
        reader = oracle.FileSystemTileReader(path)
        oracle.audit_tiles(reader, len(written), head.root)
        for index in {0, len(written) // 2, len(written) - 1}:
            proof = log.prove_inclusion(index)
            assert proof == oracle.inclusion_proof_from_tiles(
                reader, index, len(written)
            )
            assert log.leaf(index) == written[index]
        for old in {0, 1, len(written) // 3, len(written)}:
            assert log.prove_consistency(old) == tree.consistency_proof(
                old, len(written)
            )
    assert disagreeing_files(path, written) == []


def test_the_spec_example_of_70000_leaves(tmp_path: Path, key: SigningKey) -> None:
    """70,000 leaves make the tiles the spec lists: 273 full + 112 wide, 1 + 17, 1."""
    log = open_log(tmp_path, key)
    log.append(leaves(0, 70_000))
    tiles = tmp_path / "tile"
    full0 = [
        p for p in (tiles / "0").rglob("*") if p.is_file() and ".p" not in p.parts[-2]
    ]
    assert len(full0) == 273
    assert (tiles / "0" / "273.p" / "112").is_file()
    assert (tiles / "1" / "000").is_file()
    assert (tiles / "1" / "001.p" / "17").is_file()
    assert (tiles / "2" / "000.p" / "1").is_file()
    assert not (tiles / "3").exists()
    bundles = sorted(p.name for p in (tiles / "entries").glob("*"))
    assert bundles == [f"{i:03d}" for i in range(273)] + ["273.p"]
    assert list((tiles / "entries" / "273.p").iterdir()) == [
        tiles / "entries" / "273.p" / "112"
    ]


def test_proofs_verify_against_the_checkpoint(tmp_path: Path, key: SigningKey) -> None:
    """A proof from the tiles verifies against the signed root, at older sizes too."""
    log = open_log(tmp_path, key)
    log.append(leaves(0, 300))
    old = log.tree_head(key.public_key)
    log.append(leaves(300, 700))
    new = log.tree_head(key.public_key)
    for index in (0, 255, 256, 299):
        proof = log.prove_inclusion(index, 300)
        assert verify_inclusion(leaf_hash(log.leaf(index)), index, 300, proof, old.root)
    assert log.root(300) == old.root
    proof = log.prove_consistency(300)
    assert verify_consistency(300, 1000, old.root, new.root, proof)


def test_a_second_log_object_goes_on_appending(tmp_path: Path, key: SigningKey) -> None:
    """Another process's log object resumes from the checkpoint and the edge tiles."""
    open_log(tmp_path, key).append(leaves(0, 300))
    assert (
        TileLog(tmp_path, origin=ORIGIN, signing_key=key).append(leaves(300, 5)) == 305
    )
    assert disagreeing_files(tmp_path, leaves(0, 305)) == []


def test_appending_needs_origin_and_key(tmp_path: Path, key: SigningKey) -> None:
    """A log opened for reading refuses to append, with LogError."""
    with pytest.raises(LogError, match="needs its origin and signing key"):
        TileLog(tmp_path).append([b"x"])
    with pytest.raises(LogError, match="needs its origin and signing key"):
        TileLog(tmp_path, origin=ORIGIN).append([b"x"])


def test_a_leaf_too_long_for_a_bundle_is_refused(
    tmp_path: Path, key: SigningKey
) -> None:
    """A leaf over 65,535 bytes raises before anything is written."""
    log = open_log(tmp_path, key)
    with pytest.raises(LogIntegrityError, match="at most 65535"):
        log.append([b"x", b"y" * 65_536])
    assert log.size == 0
    assert not (tmp_path / "tile").exists()


def test_another_key_cannot_append(tmp_path: Path, key: SigningKey) -> None:
    """A writer whose key did not sign the checkpoint refuses to extend it."""
    open_log(tmp_path, key).append(leaves(0, 3))
    with pytest.raises(LogIntegrityError, match="not signed by"):
        open_log(tmp_path, SigningKey.generate()).append(leaves(3, 1))
    with pytest.raises(LogIntegrityError, match="not signed by"):
        TileLog(tmp_path, origin="example.com/other", signing_key=key).append([b"z"])


@pytest.mark.parametrize("damaged", ["tile/0/000.p/3", "tile/entries/000.p/3"])
def test_edge_files_that_disagree_stop_the_append(
    tmp_path: Path, key: SigningKey, damaged: str
) -> None:
    """A changed right-edge tile or bundle is found before anything is appended."""
    log = open_log(tmp_path, key)
    log.append(leaves(0, 3))
    path = tmp_path / damaged
    data = bytearray(path.read_bytes())
    data[-1] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(LogIntegrityError, match="disagree"):
        log.append(leaves(3, 1))
    assert log.size == 3


def test_reading_past_the_log_is_refused(tmp_path: Path, key: SigningKey) -> None:
    """Leaves, roots and proofs past the checkpoint's size raise LogIntegrityError."""
    log = open_log(tmp_path, key)
    log.append(leaves(0, 4))
    for call in (
        lambda: log.leaf(4),
        lambda: log.leaf(-1),
        lambda: log.root(5),
        lambda: log.prove_inclusion(4),
        lambda: log.prove_inclusion(0, 5),
        lambda: log.prove_consistency(5),
        lambda: log.prove_consistency(3, 2),
    ):
        with pytest.raises(LogIntegrityError):
            call()


def test_a_missing_tile_is_named(tmp_path: Path, key: SigningKey) -> None:
    """A proof needing a deleted tile raises LogIntegrityError naming it."""
    log = open_log(tmp_path, key)
    log.append(leaves(0, 600))
    (tmp_path / "tile" / "0" / "000").unlink()
    with pytest.raises(LogIntegrityError, match="tile/0/000"):
        log.prove_inclusion(0)


def test_an_unwritable_directory_is_a_log_error(
    tmp_path: Path, key: SigningKey
) -> None:
    """A log path under a regular file raises LogError, not a bare OSError."""
    (tmp_path / "file").write_text("")
    with pytest.raises(LogError, match="cannot append"):
        open_log(tmp_path / "file" / "log", key).append([b"x"])


def test_a_checkpoint_checks_proofs_offline(tmp_path: Path, key: SigningKey) -> None:
    """Given only notes and proofs, a checkpoint checks leaves and its own history."""
    log = open_log(tmp_path, key)
    log.append(leaves(0, 10))
    old_note = log.checkpoint_note()
    log.append(leaves(10, 290))
    assert old_note is not None
    new_note = log.checkpoint_note()
    assert new_note is not None
    old = LogCheckpoint.open(old_note, ORIGIN, key.public_key)
    new = LogCheckpoint.open(new_note, ORIGIN, key.public_key)
    proof = log.prove_inclusion(7)
    assert new.proves_inclusion(b"leaf 7", 7, proof)
    assert not new.proves_inclusion(b"leaf 8", 7, proof)
    assert not new.proves_inclusion(b"leaf 7", 8, proof)
    consistency = log.prove_consistency(10)
    assert new.proves_consistency(old, consistency)
    assert not old.proves_consistency(new, consistency)
    other = LogCheckpoint("example.com/other", old.size, old.root)
    assert not new.proves_consistency(other, consistency)
