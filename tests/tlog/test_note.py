"""C2SP signed notes and checkpoints: the spec's example, the oracle, every refusal."""

from __future__ import annotations

import base64

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from tlogkit import aics_tlog

from intentusnet.errors import LogIntegrityError
from intentusnet.record.keys import PublicKey, SigningKey
from intentusnet.tlog.checkpoint import LogCheckpoint, parse_checkpoint
from intentusnet.tlog.note import note_key_id, open_note, sign_note, verifier_key

# The example of c2sp.org/signed-note ("Verifier keys", "Example").
SPEC_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
SPEC_NOTE = (
    "This is an example message.\n\n"
    "\u2014 example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1E"
    "RYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
).encode()
ORIGIN = "example.com/intentusnet"
ROOT = bytes(range(32))


@pytest.fixture(scope="module")
def key() -> SigningKey:
    """The log's signing key."""
    return SigningKey.generate()


def spec_key() -> PublicKey:
    """The spec example's public key."""
    return PublicKey(base64.b64decode(SPEC_VKEY.split("+")[2])[1:])


def test_the_spec_example_verifies() -> None:
    """The signed-note spec's example note opens with its key; its key id matches."""
    assert note_key_id("example.com/foo", spec_key()).hex() == "530d903a"
    assert verifier_key("example.com/foo", spec_key()) == SPEC_VKEY
    assert open_note(SPEC_NOTE, "example.com/foo", spec_key()) == (
        "This is an example message.\n"
    )


def test_a_note_signed_here_opens(key: SigningKey) -> None:
    """A note signed with a key opens with its public key, giving the text back."""
    note = sign_note("hello\nworld\n", "example.com/x", key)
    assert open_note(note, "example.com/x", key.public_key) == "hello\nworld\n"


def test_aics_tlog_verifies_our_checkpoints(key: SigningKey) -> None:
    """The oracle accepts our checkpoint with our verifier key and reads it alike."""
    oracle = aics_tlog()
    note = LogCheckpoint(ORIGIN, 1234, ROOT).sign(key)
    vkey = oracle.parse_vkey(verifier_key(ORIGIN, key.public_key))
    result = oracle.verify_checkpoint(oracle.parse_note(note), vkey)
    assert result.ok
    assert (result.origin, result.size, result.root) == (ORIGIN, 1234, ROOT)


def test_we_verify_aics_tlog_checkpoints() -> None:
    """A checkpoint the oracle signs opens here with the same key."""
    oracle = aics_tlog()
    private = Ed25519PrivateKey.generate()
    note = oracle.sign_checkpoint(oracle.Checkpoint(ORIGIN, 77, ROOT), private, ORIGIN)
    public = SigningKey(private).public_key
    assert LogCheckpoint.open(note.to_bytes(), ORIGIN, public) == LogCheckpoint(
        ORIGIN, 77, ROOT
    )


def test_other_signers_are_ignored(key: SigningKey) -> None:
    """Lines by unknown keys (another name, or the name with another id) are skipped."""
    other = SigningKey.generate()
    note = sign_note("text\n", ORIGIN, key)
    foreign = sign_note("text\n", ORIGIN, other).split(b"\n\n")[1]
    renamed = sign_note("text\n", "example.com/witness", other).split(b"\n\n")[1]
    assert open_note(note + foreign + renamed, ORIGIN, key.public_key) == "text\n"


def _signature(note: bytes) -> bytes:
    return note.split(b"\n\n")[1]


@pytest.mark.parametrize(
    "change",
    [
        "unsigned by the key",
        "signature changed",
        "text changed",
        "signed twice",
        "no blank line",
        "no last newline",
        "not a signature line",
        "not base64",
        "short signature",
        "control character",
        "not utf-8",
        "space in name",
    ],
)
def test_notes_that_do_not_hold_are_refused(key: SigningKey, change: str) -> None:
    """Each kind of bad note raises LogIntegrityError; no text comes out."""
    note = sign_note("text\n", ORIGIN, key)
    sig = _signature(note)
    blob = base64.b64decode(sig.split(b" ")[-1])
    bad = {
        "unsigned by the key": sign_note("text\n", ORIGIN, SigningKey.generate()),
        "signature changed": note[: -len(sig)]
        + sig.replace(
            sig.split(b" ")[-1],
            base64.b64encode(blob[:-1] + bytes([blob[-1] ^ 1])) + b"\n",
        ),
        "text changed": b"texT\n\n" + sig,
        "signed twice": note + sig,
        "no blank line": b"text\n" + sig,
        "no last newline": note[:-1],
        "not a signature line": note + b"-- x y\n",
        "not base64": note + "\u2014 a !!!!\n".encode(),
        "short signature": note + "\u2014 a AAAA\n".encode(),
        "control character": b"te\txt\n\n" + sig,
        "not utf-8": b"te\xffxt\n\n" + sig,
        "space in name": note + "\u2014 a\u00a0b AAAAAAAA\n".encode(),
    }[change]
    with pytest.raises(LogIntegrityError):
        open_note(bad, ORIGIN, key.public_key)


def test_checkpoint_body_is_three_lines() -> None:
    """The body is origin, decimal size and base64 root, each ending in a newline."""
    body = LogCheckpoint(ORIGIN, 20852163, ROOT).body()
    assert body == f"{ORIGIN}\n20852163\n{base64.b64encode(ROOT).decode()}\n"
    assert parse_checkpoint(body) == LogCheckpoint(ORIGIN, 20852163, ROOT)


def test_extension_lines_of_others_are_accepted() -> None:
    """A checkpoint with extension lines parses; they are not part of the head."""
    body = LogCheckpoint(ORIGIN, 5, ROOT).body() + "extension\n"
    assert parse_checkpoint(body) == LogCheckpoint(ORIGIN, 5, ROOT)


@pytest.mark.parametrize(
    "body",
    [
        f"{ORIGIN}\n5\n",
        f"{ORIGIN}\n05\n{base64.b64encode(ROOT).decode()}\n",
        f"{ORIGIN}\n-5\n{base64.b64encode(ROOT).decode()}\n",
        f"{ORIGIN}\n5\n{base64.b64encode(ROOT[:31]).decode()}\n",
        f"{ORIGIN}\n5\nnot base64!\n",
        f"{ORIGIN}\n5\n{base64.b64encode(ROOT).decode()}",
        f"{ORIGIN}\n5\n\n{base64.b64encode(ROOT).decode()}\n",
        f"two words\n5\n{base64.b64encode(ROOT).decode()}\n",
    ],
    ids=["two lines", "leading zero", "negative", "short root", "bad base64",
         "no newline", "empty line", "space in origin"],
)  # fmt: skip
def test_malformed_checkpoints_are_refused(body: str) -> None:
    """A body not of the tlog-checkpoint form raises LogIntegrityError."""
    with pytest.raises(LogIntegrityError):
        parse_checkpoint(body)


def test_a_checkpoint_of_another_origin_is_refused(key: SigningKey) -> None:
    """A checkpoint whose origin line differs from its signer's name is refused."""
    body = LogCheckpoint("example.com/other", 5, ROOT).body()
    note = sign_note(body, ORIGIN, key)
    with pytest.raises(LogIntegrityError, match=r"of log 'example\.com/other'"):
        LogCheckpoint.open(note, ORIGIN, key.public_key)
