"""Key files: generated, read back, and every way one can be the wrong file."""

from __future__ import annotations

import hashlib
import os
import pickle
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from intentusnet.errors import SigningKeyError
from intentusnet.record.keys import PublicKey, SigningKey, key_id_for
from intentusnet.record.signing import KeyRing


@pytest.fixture(scope="module")
def key() -> SigningKey:
    """One generated key."""
    return SigningKey.generate()


@pytest.fixture
def saved(tmp_path: Path, key: SigningKey) -> tuple[Path, Path]:
    """The key saved in a new directory: (private file, public file)."""
    return key.save(tmp_path / "keys")


def test_save_writes_a_private_file_only_the_owner_reads(
    saved: tuple[Path, Path], key: SigningKey
) -> None:
    """The private key is 0600 PEM, the public key PEM; both named by the key id."""
    private, public = saved
    stem = key.key_id.replace(":", "-")
    assert (private.name, public.name) == (f"{stem}.key", f"{stem}.pub")
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(private.parent.stat().st_mode) == 0o700
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----")
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")
    assert SigningKey.load(private).key_id == key.key_id
    assert PublicKey.load(public) == key.public_key


def test_key_id_is_a_fingerprint_of_the_public_key(key: SigningKey) -> None:
    """ed25519: and the first 16 hex digits of the raw public key's SHA-256."""
    digest = hashlib.sha256(key.public_key.raw).hexdigest()
    assert key.key_id == key_id_for(key.public_key.raw) == f"ed25519:{digest[:16]}"


def test_a_private_key_never_shows_or_travels(key: SigningKey) -> None:
    """repr shows the key id only, and pickling is refused."""
    assert repr(key) == f"SigningKey({key.key_id!r})"
    with pytest.raises(TypeError, match="cannot be pickled"):
        pickle.dumps(key)


def test_saving_over_an_existing_key_is_refused(
    saved: tuple[Path, Path], key: SigningKey
) -> None:
    """A key file is never overwritten."""
    with pytest.raises(SigningKeyError, match="exists already"):
        key.save(saved[0].parent)


def _pem(private: object, *, public: bool = False) -> bytes:
    if public:
        return private.public_key().public_bytes(  # type: ignore[attr-defined]
            serialization.Encoding.PEM,
            serialization.PublicFormat.SubjectPublicKeyInfo,
        )
    return private.private_bytes(  # type: ignore[attr-defined]
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        ("dir", "is a directory"),
        (b"hello", "is not a PEM private key file"),
        ("public", "holds a public key; signing needs the private key"),
        ("encrypted", "is encrypted"),
        ("rsa", "holds a key of type RSA; intentusnet signs records with Ed25519"),
    ],
)
def test_signing_key_files_that_are_wrong_say_why(
    tmp_path: Path,
    saved: tuple[Path, Path],
    content: object,
    message: str,
) -> None:
    """Each wrong private key file gets its own SigningKeyError naming the file."""
    path = tmp_path / "given"
    if content == "dir":
        path.mkdir()
    elif content == "public":
        path.write_bytes(saved[1].read_bytes())
    elif content == "encrypted":
        private = SigningKey.load(saved[0])._key
        path.write_bytes(
            private.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.BestAvailableEncryption(b"secret"),
            )
        )
    elif content == "rsa":
        path.write_bytes(_pem(rsa.generate_private_key(65537, 2048)))
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(SigningKeyError, match=message) as caught:
        SigningKey.load(path)
    assert str(path) in str(caught.value)
    assert caught.value.exit_code == 2


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "does not exist"),
        (b"-----BEGIN PUBLIC KEY-----\nnope\n", "is not a PEM public key file"),
        ("private", "holds a private key; give its public key"),
        ("ec", "holds a key of type EC;"),
    ],
)
def test_public_key_files_that_are_wrong_say_why(
    tmp_path: Path, saved: tuple[Path, Path], content: object, message: str
) -> None:
    """A private key where a public one is expected is refused, never used."""
    path = tmp_path / "given.pub"
    if content == "private":
        path.write_bytes(saved[0].read_bytes())
    elif content == "ec":
        path.write_bytes(_pem(ec.generate_private_key(ec.SECP256R1()), public=True))
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(SigningKeyError, match=message):
        PublicKey.load(path)


def test_a_ring_reads_files_and_every_pub_of_a_directory(
    tmp_path: Path, saved: tuple[Path, Path], key: SigningKey
) -> None:
    """Several keys (rotation): a directory's *.pub files and single files."""
    other = SigningKey.generate()
    _, other_pub = other.save(tmp_path / "other")
    ring = KeyRing.load(saved[0].parent, other_pub)
    assert ring.key_ids == tuple(sorted([key.key_id, other.key_id]))
    assert not ring.require_signature


def test_a_ring_needs_keys(tmp_path: Path) -> None:
    """An empty directory or no keys at all is an error, not a ring that trusts none."""
    (tmp_path / "empty").mkdir()
    with pytest.raises(SigningKeyError, match=r"no public keys \(\*\.pub files\)"):
        KeyRing.load(tmp_path / "empty")
    with pytest.raises(SigningKeyError, match="at least one public key"):
        KeyRing([])


def test_an_unreadable_key_file_says_so(
    saved: tuple[Path, Path], tmp_path: Path
) -> None:
    """A key file that cannot be read is a SigningKeyError with the reason."""
    with pytest.raises(SigningKeyError, match=r"cannot read key file .*too long"):
        SigningKey.load(tmp_path / ("k" * 300))
    with pytest.raises(
        SigningKeyError, match=r"cannot read key file .*Not a directory"
    ):
        SigningKey.load(saved[0] / "inside")
    if os.geteuid() != 0:  # root reads a file whatever its mode
        saved[0].chmod(0)
        with pytest.raises(SigningKeyError, match="cannot read key file"):
            SigningKey.load(saved[0])


def test_without_cryptography_keys_say_which_extra_to_install() -> None:
    """No `sign` extra: a precise SigningKeyError, and unsigned stores still work."""
    probe = (
        "import sys; sys.modules['cryptography'] = None\n"
        "from intentusnet import FileExecutionStore, SigningKey, SigningKeyError\n"
        "FileExecutionStore('records')\n"
        "try:\n"
        "    SigningKey.generate()\n"
        "except SigningKeyError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert "pip install 'intentusnet[sign]'" in done.stdout
