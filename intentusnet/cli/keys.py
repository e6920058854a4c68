"""``intentusnet keys``, and the options that give commands public keys to check with.

``keys generate`` makes an Ed25519 key pair for signing records. ``verify`` and
``replay`` take :data:`key_options` (``--key``, ``--keys``,
``--require-signature``) and turn them into a ``KeyRing`` with
:func:`key_ring`. A key file that cannot be used is a ``SigningKeyError``:
one line, exit 2.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Final

import click

from .output import emit_json
from .params import options

if TYPE_CHECKING:
    from ..record.signing import KeyRing

#: Where ``keys generate`` writes when not told (beside the default store).
DEFAULT_KEY_DIR: Final = ".intentusnet/keys"


@click.group()
def keys() -> None:
    """Make and manage the Ed25519 keys that sign records."""


@keys.command()
@click.option(
    "--out",
    "directory",
    default=DEFAULT_KEY_DIR,
    show_default=True,
    metavar="DIR",
    help="Directory to write the key pair into (made 0700 if missing).",
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def generate(directory: str, as_json: bool) -> None:
    """Make an Ed25519 key pair; print its key id and where it was written.

    The private key (DIR/ed25519-<id>.key, mode 0600) signs: give it to the
    store (signing_key=, or --signing-key). The public key (.pub) checks:
    give it to verify and replay (--key, or --keys DIR for several).
    """
    from ..record.keys import SigningKey

    key = SigningKey.generate()
    private, public = key.save(directory)
    if as_json:
        emit_json(
            {"keyId": key.key_id, "privateKey": str(private), "publicKey": str(public)}
        )
        return
    click.echo(f"Key id:      {key.key_id}")
    click.echo(f"Private key: {private}  (mode 0600: keep it secret; it signs)")
    click.echo(f"Public key:  {public}  (share it: it checks signatures)")


#: ``--key``, ``--keys`` and ``--require-signature``.
key_options = options(
    click.option(
        "--key",
        "key_files",
        multiple=True,
        metavar="FILE",
        help="Check signatures with this public key (repeatable: old keys too).",
    ),
    click.option(
        "--keys",
        "key_dirs",
        multiple=True,
        metavar="DIR",
        help="Check signatures with every *.pub key in DIR (repeatable).",
    ),
    click.option(
        "--require-signature",
        is_flag=True,
        help="Fail an unsigned record too (needs --key or --keys).",
    ),
)


def key_ring(
    key_files: tuple[str, ...], key_dirs: tuple[str, ...], require_signature: bool
) -> KeyRing | None:
    """The ring the options name, or None when no key was given.

    Raises:
        click.UsageError: ``--require-signature`` without a key.
        SigningKeyError: a key file or directory cannot be used (exit 2).
    """
    if not key_files and not key_dirs:
        if require_signature:
            raise click.UsageError("--require-signature needs --key FILE or --keys DIR")
        return None
    from ..errors import SigningKeyError
    from ..record.signing import KeyRing

    for path in key_files:
        if os.path.isdir(path):
            raise SigningKeyError(
                f"{path} is a directory, not a key file (--keys DIR takes a "
                "directory of public keys)"
            )
    for path in key_dirs:
        if not os.path.isdir(path):
            what = "is not a directory" if os.path.exists(path) else "does not exist"
            raise SigningKeyError(
                f"--keys {path}: {what} (--keys takes a directory of *.pub files, "
                "--key one public key file)"
            )

    return KeyRing.load(*key_files, *key_dirs, require_signature=require_signature)
