"""Cosignatures (checked by aics-tlog) and the witness's add-checkpoint answers."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from tlogkit import aics_tlog

from intentusnet.errors import LogError, LogIntegrityError
from intentusnet.record.keys import PublicKey, SigningKey
from intentusnet.tlog.checkpoint import LogCheckpoint
from intentusnet.tlog.cosignature import (
    Cosigner,
    cosign,
    cosignature_key_id,
    count_cosigners,
    parse_cosigner,
)
from intentusnet.tlog.log import TileLog
from intentusnet.tlog.merkle import EMPTY_ROOT
from intentusnet.tlog.witness import SIZE_TYPE, Witness

ORIGIN = "example.com/intentusnet"
NAME = "witness.example/w1"
BODY = f"{ORIGIN}\n8\n{base64.b64encode(bytes(range(32))).decode()}\n"


@pytest.fixture(scope="module")
def log_key() -> SigningKey:
    """The log's signing key."""
    return SigningKey.generate()


@pytest.fixture(scope="module")
def witness_key() -> SigningKey:
    """The witness's signing key."""
    return SigningKey.generate()


def grown(path: Path, key: SigningKey, sizes: list[int], tag: str = "") -> TileLog:
    """A log appended to in batches up to each of ``sizes``."""
    log = TileLog(path, origin=ORIGIN, signing_key=key, durable=False)
    for size in sizes:
        log.append([f"{tag}leaf {i}".encode() for i in range(log.size, size)])
    return log


def request(old: int, proof: list[bytes], note: bytes) -> bytes:
    """An add-checkpoint request body."""
    lines = [f"old {old}", *(base64.b64encode(h).decode() for h in proof)]
    return ("\n".join(lines) + "\n\n").encode() + note


def test_a_cosignature_verifies_with_aics_tlog(witness_key: SigningKey) -> None:
    """Our cosignature line has the key id and signed message aics-tlog expects."""
    cosign_mod = aics_tlog().cosign
    line = cosign(BODY, NAME, witness_key, 1_700_000_000)
    assert line.startswith(f"\u2014 {NAME} ")
    assert line.endswith("\n")
    blob = base64.b64decode(line.split(" ")[2])
    raw = witness_key.public_key.raw
    assert blob[:4] == cosign_mod.cosignature_key_id(NAME, raw)
    assert int.from_bytes(blob[4:12], "big") == 1_700_000_000
    checkpoint = LogCheckpoint(ORIGIN, 8, bytes(range(32)))
    assert cosign_mod.verify_cosignature(
        blob[4:], NAME, raw, ORIGIN, 8, checkpoint.root
    )
    assert not cosign_mod.verify_cosignature(
        blob[4:], NAME, raw, ORIGIN, 9, checkpoint.root
    )


def test_an_aics_tlog_cosignature_is_counted_and_a_forged_one_is_not() -> None:
    """count_cosigners accepts aics-tlog's cosignature, refuses it on another body."""
    cosign_mod = aics_tlog().cosign
    private = Ed25519PrivateKey.generate()
    public = PublicKey(private.public_key().public_bytes_raw())
    root = bytes(range(32))
    blob, _ = cosign_mod.sign_cosignature(private, NAME, 1_700_000_000, ORIGIN, 8, root)
    encoded = base64.b64encode(cosignature_key_id(NAME, public) + blob).decode()
    line = f"\u2014 {NAME} {encoded}\n"
    note = f"{BODY}\n{line}".encode()
    assert count_cosigners(note, [Cosigner(NAME, public)]) == (1, [])
    other = note.replace(b"\n8\n", b"\n9\n")
    count, problems = count_cosigners(other, [Cosigner(NAME, public)])
    assert count == 0
    assert "does not match" in problems[0]
    assert count_cosigners(note, [Cosigner("witness.example/w2", public)]) == (0, [])


def test_a_cosigner_vkey_round_trips_and_matches_aics_tlog(
    witness_key: SigningKey,
) -> None:
    """The verifier key is the one aics-tlog formats (type 0x04), and parses back."""
    note_mod = aics_tlog().note
    cosigner = Cosigner(NAME, witness_key.public_key)
    theirs = aics_tlog().cosign.cosignature_vkey(NAME, witness_key.public_key.raw)
    assert cosigner.vkey() == note_mod.format_vkey(theirs)
    assert parse_cosigner(cosigner.vkey()) == cosigner
    for bad in (
        "no-plus",
        cosigner.vkey().replace("+", "+00", 1),
        verifier_key_of_note(witness_key),
    ):
        with pytest.raises(LogIntegrityError):
            parse_cosigner(bad)


def verifier_key_of_note(key: SigningKey) -> str:
    """A note (0x01) verifier key: not a cosigner's."""
    from intentusnet.tlog.note import verifier_key

    return verifier_key(NAME, key.public_key)


def test_a_cosignature_needs_a_timestamp(witness_key: SigningKey) -> None:
    """Timestamp 0 (or past 2**63 - 1) is refused: a witness never omits it."""
    for bad in (0, 2**63):
        with pytest.raises(LogIntegrityError):
            cosign(BODY, NAME, witness_key, bad)


@pytest.fixture
def witness(tmp_path: Path, log_key: SigningKey, witness_key: SigningKey) -> Witness:
    """A witness of ORIGIN with its state under tmp_path."""
    made = Witness(NAME, witness_key, {ORIGIN: log_key.public_key}, tmp_path / "w")
    yield made
    made.close()


def test_each_status_of_add_checkpoint(
    tmp_path: Path, log_key: SigningKey, witness_key: SigningKey, witness: Witness
) -> None:
    """200, 409 (with the size held), 422, 403, 404 and 400, as the spec says."""
    log = grown(tmp_path / "log", log_key, [5])
    five = log.checkpoint_note()
    assert five is not None
    answer = witness.add_checkpoint(request(0, [], five))
    assert answer.status == 200
    assert count_cosigners(
        five + answer.body.encode(), [Cosigner(NAME, witness_key.public_key)]
    ) == (1, [])
    # the same checkpoint again: old 5, no proof, same root
    assert witness.add_checkpoint(request(5, [], five)).status == 200
    log.append([b"leaf 5", b"leaf 6", b"leaf 7"])
    eight = log.checkpoint_note()
    assert eight is not None
    conflict = witness.add_checkpoint(request(0, [], eight))
    assert conflict == (409, "5\n", SIZE_TYPE)
    proof = log.prove_consistency(5, 8)
    wrong = [proof[0][::-1], *proof[1:]]
    assert witness.add_checkpoint(request(5, wrong, eight)).status == 422
    assert witness.add_checkpoint(request(5, proof[:-1], eight)).status == 422
    assert witness.add_checkpoint(request(5, proof, eight)).status == 200
    assert witness.size_of(ORIGIN) == 8
    fork = grown(tmp_path / "fork", log_key, [8], tag="other ")
    forked = fork.checkpoint_note()
    assert forked is not None
    assert witness.add_checkpoint(request(8, [], forked)).status == 422
    stranger = SigningKey.generate()
    foreign = LogCheckpoint(ORIGIN, 9, bytes(32)).sign(stranger)
    assert witness.add_checkpoint(request(8, [], foreign)).status == 403
    unknown = LogCheckpoint("other.example/log", 1, bytes(32)).sign(log_key)
    assert witness.add_checkpoint(request(0, [], unknown)).status == 404
    assert witness.add_checkpoint(request(9, [], eight)).status == 400
    for body in (b"", b"old 1\n", b"old 01\n\n" + eight, b"old 0\nnot base64\n\n"):
        assert witness.add_checkpoint(body).status == 400
    assert witness.size_of(ORIGIN) == 8


def test_from_size_0_the_proof_is_empty_and_the_empty_tree_has_its_root(
    tmp_path: Path, log_key: SigningKey, witness: Witness
) -> None:
    """A proof sent with old 0 is 422; a size-0 checkpoint must have the empty root."""
    log = grown(tmp_path / "log", log_key, [3])
    note = log.checkpoint_note()
    assert note is not None
    assert witness.add_checkpoint(request(0, [bytes(32)], note)).status == 422
    bad_empty = LogCheckpoint(ORIGIN, 0, bytes(32)).sign(log_key)
    assert witness.add_checkpoint(request(0, [], bad_empty)).status == 422
    empty = LogCheckpoint(ORIGIN, 0, EMPTY_ROOT).sign(log_key)
    assert witness.add_checkpoint(request(0, [], empty)).status == 200
    assert witness.size_of(ORIGIN) == 0


def test_the_state_outlives_the_witness_and_one_witness_holds_it(
    tmp_path: Path, log_key: SigningKey, witness_key: SigningKey
) -> None:
    """A new witness on the same folder refuses a rollback; two at once cannot be."""
    state = tmp_path / "w"
    first = Witness(NAME, witness_key, {ORIGIN: log_key.public_key}, state)
    log = grown(tmp_path / "log", log_key, [4, 9])
    note = log.checkpoint_note()
    assert note is not None
    assert first.add_checkpoint(request(0, [], note)).status == 200
    with pytest.raises(LogError, match="another witness"):
        Witness(NAME, witness_key, {ORIGIN: log_key.public_key}, state)
    first.close()
    again = Witness(NAME, witness_key, {ORIGIN: log_key.public_key}, state)
    older = grown(tmp_path / "older", log_key, [4]).checkpoint_note()
    assert older is not None
    assert again.add_checkpoint(request(0, [], older)) == (409, "9\n", SIZE_TYPE)
    assert again.add_checkpoint(request(9, [], older)).status == 400
    again.close()


def test_signatures_of_other_keys_are_ignored(
    tmp_path: Path, log_key: SigningKey, witness_key: SigningKey, witness: Witness
) -> None:
    """Signatures of keys the witness does not know are ignored.

    A checkpoint carrying other witnesses' cosignatures and other keys' signatures is
    cosigned; one whose log signature is altered is 403.
    """
    log = grown(tmp_path / "log", log_key, [6])
    note = log.checkpoint_note()
    assert note is not None
    text = note[: note.index(b"\n\n") + 1].decode()
    other = cosign(text, "witness.example/w9", SigningKey.generate(), 1_700_000_000)
    stranger = LogCheckpoint(ORIGIN, 6, bytes(32)).sign(SigningKey.generate())
    foreign_line = stranger[stranger.index(b"\n\n") + 2 :]
    carried = note + other.encode() + foreign_line
    answer = witness.add_checkpoint(request(0, [], carried))
    assert answer.status == 200
    cosigner = Cosigner(NAME, witness_key.public_key)
    assert count_cosigners(note + answer.body.encode(), [cosigner]) == (1, [])
    at = note.index(b"\n\n") + 2 + len(f"\u2014 {ORIGIN} ".encode()) + 10
    altered = note[:at] + (b"A" if note[at : at + 1] != b"A" else b"B") + note[at + 1 :]
    assert witness.add_checkpoint(request(6, [], altered)).status == 403


def test_request_cosignature_follows_a_409_and_refuses_a_larger_tree(
    tmp_path: Path, log_key: SigningKey, witness_key: SigningKey, witness: Witness
) -> None:
    """The log follows a 409 with a proof and refuses a witness holding more.

    From size 0 it is told 5, asks again with a proof, gets a cosignature; a witness
    holding more than the log is a rollback; failures are said.
    """
    from intentusnet.tlog.witness import request_cosignature

    def post(body: bytes) -> tuple[int, str]:
        answer = witness.add_checkpoint(body)
        return answer.status, answer.body

    cosigner = Cosigner(NAME, witness_key.public_key)
    log = grown(tmp_path / "log", log_key, [5])
    five = log.checkpoint_note()
    assert five is not None
    assert request_cosignature(post, cosigner, log, five, 5, 0)[0] is not None
    log.append([f"leaf {i}".encode() for i in range(5, 12)])
    twelve = log.checkpoint_note()
    assert twelve is not None
    line, _ = request_cosignature(post, cosigner, log, twelve, 12, 0)
    assert line is not None
    assert count_cosigners(twelve + line.encode(), [cosigner]) == (1, [])
    assert witness.size_of(ORIGIN) == 12
    older = grown(tmp_path / "older", log_key, [8])
    eight = older.checkpoint_note()
    assert eight is not None
    assert request_cosignature(post, cosigner, older, eight, 8, 0) == (
        None,
        "it holds a larger tree (12 leaves): a rollback",
    )
    someone = Cosigner(NAME, SigningKey.generate().public_key)
    assert request_cosignature(post, someone, log, twelve, 12, 12) == (
        None,
        "its answer holds no valid cosignature by its key",
    )

    def down(body: bytes) -> tuple[int, str]:
        raise LogError("cannot reach it: refused")

    assert request_cosignature(down, cosigner, log, twelve, 12, 12) == (
        None,
        "cannot reach it: refused",
    )


def test_concurrent_requests_from_one_size_get_one_cosignature(
    tmp_path: Path, log_key: SigningKey, witness: Witness
) -> None:
    """Concurrent requests from one size get exactly one cosignature.

    Eight threads send old 0 at once, for checkpoints of 3 to 10 leaves: one is
    cosigned, seven get 409 with its size (the check and the write are one step).
    """
    import threading

    bodies = []
    log = grown(tmp_path / "log", log_key, [])
    for size in range(3, 11):
        log.append([f"leaf {size - 1}".encode()] if size > 3 else [b"a", b"b", b"c"])
        note = log.checkpoint_note()
        assert note is not None
        bodies.append(request(0, [], note))
    start = threading.Barrier(len(bodies))
    answers: list[tuple[int, str]] = []

    def send(body: bytes) -> None:
        start.wait(timeout=30)
        answer = witness.add_checkpoint(body)
        answers.append((answer.status, answer.body))

    threads = [threading.Thread(target=send, args=(body,)) for body in bodies]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert sorted(status for status, _ in answers) == [200] + [409] * 7
    held = f"{witness.size_of(ORIGIN)}\n"
    assert all(body == held for status, body in answers if status == 409)
