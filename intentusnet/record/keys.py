"""Ed25519 keys: the private key a store signs with, public keys that check.

Key files are PEM: a private key as unencrypted PKCS#8 (mode 0600), a public
key as SubjectPublicKeyInfo, as ``intentusnet keys generate`` writes them and
``openssl`` reads them. A key's id is ``ed25519:`` and 16 hex digits of its
public key's SHA-256. The keys come from ``cryptography`` (the ``sign`` extra),
imported only when a key is made or read: unsigned use never imports it. Every
way a key file can be wrong is a :class:`SigningKeyError` saying which file
and why.
"""

from __future__ import annotations

import os
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING, Final

from ..errors import SigningKeyError

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import (
        Ed25519PrivateKey,
        Ed25519PublicKey,
    )

__all__ = [
    "PublicKey",
    "SigningKey",
    "key_id_for",
    "load_signing_key",
]

#: Key files larger than this are not key files (a PEM Ed25519 key is ~120 bytes).
_MAX_KEY_FILE: Final = 64 * 1024
_INSTALL_HINT: Final = "pip install 'intentusnet[sign]'"


def key_id_for(raw_public_key: bytes) -> str:
    """A key's id: ``ed25519:`` and 16 hex digits of its public key's SHA-256."""
    return "ed25519:" + sha256(raw_public_key).hexdigest()[:16]


class PublicKey:
    """An Ed25519 public key, which checks record signatures. Added in 0.1.0.

    Args:
        raw: the 32-byte public key.

    Raises:
        SigningKeyError: not 32 bytes, or ``cryptography`` is not installed.
    """

    __slots__ = ("_key", "key_id", "raw")

    def __init__(self, raw: bytes) -> None:
        _require_cryptography()
        from cryptography.hazmat.primitives.asymmetric.ed25519 import (
            Ed25519PublicKey,
        )

        if len(raw) != 32:
            raise SigningKeyError(f"an Ed25519 public key is 32 bytes, not {len(raw)}")
        self._key: Ed25519PublicKey = Ed25519PublicKey.from_public_bytes(raw)
        self.raw: Final = bytes(raw)
        #: ``ed25519:`` and 16 hex digits (see :func:`key_id_for`)
        self.key_id: Final = key_id_for(raw)

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> PublicKey:
        """Read a PEM public key file (``.pub``, as ``intentusnet keys generate``).

        Raises:
            SigningKeyError: the file is missing or unreadable, is not a PEM
                public key, holds a private key, or a key of another type.
        """
        data = _read_key_file(path)
        if b"PRIVATE KEY-----" in data:
            raise SigningKeyError(
                f"{os.fspath(path)} holds a private key; give its public key (the "
                ".pub file beside it): checking signatures never needs the "
                "private key"
            )
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives.asymmetric.ed25519 import (
            Ed25519PublicKey,
        )
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            PublicFormat,
            load_pem_public_key,
        )

        try:
            key = load_pem_public_key(data)
        except (ValueError, TypeError, UnsupportedAlgorithm):
            raise SigningKeyError(
                f"{os.fspath(path)} is not a PEM public key file"
            ) from None
        if not isinstance(key, Ed25519PublicKey):
            raise SigningKeyError(
                f"{os.fspath(path)} holds a key of type {_kind(key)}; intentusnet "
                "signs records with Ed25519 keys (intentusnet keys generate)"
            )
        return cls(key.public_bytes(Encoding.Raw, PublicFormat.Raw))

    def verify(self, signature: bytes, message: bytes) -> bool:
        """Whether ``signature`` is this key's signature of ``message``."""
        from cryptography.exceptions import InvalidSignature

        try:
            self._key.verify(signature, message)
        except InvalidSignature:
            return False
        return True

    def pem(self) -> bytes:
        """The key as a PEM file holds it (SubjectPublicKeyInfo)."""
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            PublicFormat,
        )

        return self._key.public_bytes(Encoding.PEM, PublicFormat.SubjectPublicKeyInfo)

    def __repr__(self) -> str:
        return f"PublicKey({self.key_id!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PublicKey):
            return NotImplemented
        return self.raw == other.raw

    def __hash__(self) -> int:
        return hash(self.raw)


class SigningKey:
    """An Ed25519 private key, which a store signs the records it closes with.

    Make one with :meth:`generate` (and :meth:`save` it) or :meth:`load` a PEM
    private key file; give it to a store as ``signing_key=``. Its ``repr``
    shows only the key id. Added in 0.1.0.
    """

    __slots__ = ("_key", "public_key")

    def __init__(self, key: Ed25519PrivateKey) -> None:
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            PublicFormat,
        )

        self._key = key
        #: the public half, for checking what this key signed
        self.public_key: Final = PublicKey(
            key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        )

    @property
    def key_id(self) -> str:
        """The key's id, named in line 1 of every record it signs."""
        return self.public_key.key_id

    @classmethod
    def generate(cls) -> SigningKey:
        """A new random key (from the operating system's random source).

        Raises:
            SigningKeyError: ``cryptography`` is not installed.
        """
        _require_cryptography()
        from cryptography.hazmat.primitives.asymmetric.ed25519 import (
            Ed25519PrivateKey,
        )

        return cls(Ed25519PrivateKey.generate())

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> SigningKey:
        """Read an unencrypted PEM private key file (``.key``).

        Raises:
            SigningKeyError: the file is missing or unreadable, is not a PEM
                private key, holds a public key, is encrypted, or holds a key
                of another type.
        """
        data = _read_key_file(path)
        where = os.fspath(path)
        if b"PUBLIC KEY-----" in data and b"PRIVATE KEY-----" not in data:
            raise SigningKeyError(
                f"{where} holds a public key; signing needs the private key (the "
                ".key file intentusnet keys generate wrote)"
            )
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives.asymmetric.ed25519 import (
            Ed25519PrivateKey,
        )
        from cryptography.hazmat.primitives.serialization import load_pem_private_key

        try:
            key = load_pem_private_key(data, password=None)
        except TypeError:
            raise SigningKeyError(
                f"{where} is encrypted; intentusnet reads unencrypted PEM private "
                "keys (protect the file with mode 0600 instead)"
            ) from None
        except (ValueError, UnsupportedAlgorithm):
            raise SigningKeyError(f"{where} is not a PEM private key file") from None
        if not isinstance(key, Ed25519PrivateKey):
            raise SigningKeyError(
                f"{where} holds a key of type {_kind(key)}; intentusnet signs "
                "records with Ed25519 keys (intentusnet keys generate)"
            )
        return cls(key)

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return self._key.sign(message)

    def save(self, directory: str | os.PathLike[str]) -> tuple[Path, Path]:
        """Write the key into ``directory`` (made 0700 if missing).

        Returns:
            The private key file (PEM PKCS#8, mode 0600) and the public key
            file (PEM, 0644): ``ed25519-<16 hex>.key`` and ``.pub``.

        Raises:
            SigningKeyError: a file of that name exists, or the directory or
                files cannot be written.
        """
        from cryptography.hazmat.primitives.serialization import (
            Encoding,
            NoEncryption,
            PrivateFormat,
        )

        folder = Path(directory)
        stem = self.key_id.replace(":", "-")
        private, public = folder / f"{stem}.key", folder / f"{stem}.pub"
        secret = self._key.private_bytes(
            Encoding.PEM, PrivateFormat.PKCS8, NoEncryption()
        )
        try:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            _write_new(private, secret, 0o600)
            _write_new(public, self.public_key.pem(), 0o644)
        except FileExistsError as exc:
            raise SigningKeyError(f"{exc.filename} exists already") from None
        except OSError as exc:
            raise SigningKeyError(
                f"cannot write the key into {folder}: {exc.strerror or exc}"
            ) from None
        return private, public

    def __repr__(self) -> str:
        return f"SigningKey({self.key_id!r})"

    def __reduce__(self) -> tuple[object, ...]:
        # A private key never travels by pickle (into a log, a cache, a worker).
        raise TypeError("a SigningKey cannot be pickled")


def load_signing_key(
    value: SigningKey | str | os.PathLike[str] | None,
) -> SigningKey | None:
    """A store's ``signing_key=``: a key, a private key file to load, or None.

    Raises:
        SigningKeyError: as for :meth:`SigningKey.load`.
    """
    if value is None or isinstance(value, SigningKey):
        return value
    return SigningKey.load(value)


def _require_cryptography() -> None:
    try:
        import cryptography  # noqa: F401
    except ImportError:
        raise SigningKeyError(
            f"signing and checking signatures need the cryptography package: "
            f"{_INSTALL_HINT}"
        ) from None


def _read_key_file(path: str | os.PathLike[str]) -> bytes:
    _require_cryptography()
    where = os.fspath(path)
    try:
        with open(path, "rb") as file:
            data = file.read(_MAX_KEY_FILE + 1)
    except FileNotFoundError:
        raise SigningKeyError(f"key file {where} does not exist") from None
    except IsADirectoryError:
        raise SigningKeyError(
            f"{where} is a directory, not a key file (a directory of public keys "
            "is given with --keys)"
        ) from None
    except OSError as exc:
        raise SigningKeyError(
            f"cannot read key file {where}: {exc.strerror or exc}"
        ) from None
    if len(data) > _MAX_KEY_FILE:
        raise SigningKeyError(f"{where} is not a key file (too large)")
    return data


def _write_new(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, mode)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def _kind(key: object) -> str:
    """``RSA``, ``EC``, ``Ed448``, ... for a key of another type than Ed25519."""
    name = type(key).__name__.lstrip("_")
    return name.removesuffix("PublicKey").removesuffix("PrivateKey") or name
