"""tlog-proof files: made from the log, read back, checked, and refused when wrong."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from intentusnet.errors import LogIntegrityError
from intentusnet.record.keys import SigningKey
from intentusnet.tlog.log import TileLog
from intentusnet.tlog.proof import LogProof

ORIGIN = "example.com/proofs"


@pytest.fixture(scope="module")
def key() -> SigningKey:
    """The log's signing key."""
    return SigningKey.generate()


@pytest.fixture
def log(tmp_path: Path, key: SigningKey) -> TileLog:
    """A log of 20 leaves."""
    log = TileLog(tmp_path, origin=ORIGIN, signing_key=key, durable=False)
    log.append([f"leaf {i}".encode() for i in range(20)])
    return log


def test_a_proof_round_trips_and_verifies(log: TileLog, key: SigningKey) -> None:
    """A proof file reads back equal, and verifies under its own origin by default."""
    proof = log.proof_of(13)
    assert LogProof.from_bytes(proof.to_bytes()) == proof
    assert LogProof.from_bytes(proof.to_bytes()) == proof
    checkpoint = proof.verify(key.public_key)
    assert (checkpoint.origin, checkpoint.size) == (ORIGIN, 20)
    assert proof.verify(key.public_key, ORIGIN) == checkpoint
    assert proof.leaf == b"leaf 13"


def test_an_empty_log_has_no_proof(tmp_path: Path) -> None:
    """Before the first checkpoint there is nothing to prove under."""
    with pytest.raises(LogIntegrityError, match="no checkpoint yet"):
        TileLog(tmp_path).proof_of(0)


def test_a_proof_under_the_wrong_leaf_fails(log: TileLog, key: SigningKey) -> None:
    """Another leaf, index or path than the log's fails to verify."""
    proof = log.proof_of(13)
    for wrong in (
        proof._replace(leaf=b"leaf 12"),
        proof._replace(leaf_index=12),
        proof._replace(path=proof.path[:-1]),
        proof._replace(path=(*proof.path, proof.path[0])),
    ):
        with pytest.raises(LogIntegrityError, match="does not hold"):
            wrong.verify(key.public_key)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"c2sp.org/tlog-proof@v1\nindex 0\n\ncheckpoint",
        b"c2sp.org/tlog-proof@v1\nextra AA==\nindex 01\n\ncheckpoint",
        b"c2sp.org/tlog-proof@v1\nextra AA==\nindex -1\n\ncheckpoint",
        b"c2sp.org/tlog-proof@v1\nextra !!\nindex 0\n\ncheckpoint",
        b"c2sp.org/tlog-proof@v1\nextra AA==\nindex 0\nAAAA\n\ncheckpoint",
        b"c2sp.org/tlog-proof@v1\nextra AA==\nindex 0\n" + b"\n".join(
            [base64.b64encode(bytes(32))] * 65) + b"\n\ncheckpoint",
        "c2sp.org/tlog-proof@v1\nextra AA==\nindex \u0660\n\ncheckpoint".encode(),
    ],
    ids=["empty", "no extra", "leading zero", "negative", "bad base64", "short hash",
         "65 hashes", "non-ascii"],
)  # fmt: skip
def test_malformed_proof_files_are_refused(data: bytes) -> None:
    """A file not of the tlog-proof form raises LogIntegrityError."""
    with pytest.raises(LogIntegrityError):
        LogProof.from_bytes(data)


def test_a_proof_with_no_signed_checkpoint_is_refused(key: SigningKey) -> None:
    """A checkpoint part that is no signed note fails before any hashing."""
    proof = LogProof(b"x", 0, (), b"example.com/proofs\n1\nAAAA\n")
    with pytest.raises(LogIntegrityError, match="not a signed note"):
        proof.verify(key.public_key)
