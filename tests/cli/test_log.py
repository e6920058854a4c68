"""``intentusnet log prove`` and ``log verify-proof``: proofs checked offline."""

from __future__ import annotations

import base64
from pathlib import Path

import orjson
import pytest
from tlogkit import aics_tlog

from intentusnet.record.keys import SigningKey
from intentusnet.store.file.translog import log_folder
from intentusnet.tlog.leaf import LogLeaf
from intentusnet.tlog.log import TileLog

from .support import Invoke

ORIGIN = "example.com/records"


@pytest.fixture
def keys(tmp_path: Path) -> tuple[Path, Path]:
    """The log's key pair: private and public key files."""
    return SigningKey.generate().save(tmp_path / "keys")


@pytest.fixture
def logged(store_root: Path, keys: tuple[Path, Path]) -> list[LogLeaf]:
    """A store whose log/ holds 301 leaves (exec-5 twice: closed, invalidated)."""
    key = SigningKey.load(keys[0])
    leaves = [
        LogLeaf(f"exec-{i}", "sha256:" + f"{i:064x}", key.key_id) for i in range(300)
    ]
    leaves.append(LogLeaf("exec-5", "sha256:" + "f" * 64, key.key_id))
    log = TileLog(log_folder(store_root, key.key_id), origin=ORIGIN, signing_key=key)
    log.append([leaf.to_bytes() for leaf in leaves])
    return leaves


def test_a_proof_is_made_and_checked_offline(
    invoke: Invoke, store_root: Path, keys: tuple[Path, Path], logged, tmp_path: Path
) -> None:
    """prove writes a proof; verify-proof, given only it and the key, accepts it."""
    proof = tmp_path / "exec-42.tlog-proof"
    made = invoke(
        "--store", str(store_root), "log", "prove", "exec-42", "--out", str(proof)
    )
    assert made.exit_code == 0, made.output
    assert made.stdout == ""
    checked = invoke("log", "verify-proof", str(proof), "--key", str(keys[1]))
    assert checked.exit_code == 0, checked.output
    assert checked.stdout == (
        f"exec-42: leaf 42 of {ORIGIN} at size 301 - INCLUDED (chain head "
        f"sha256:{42:064x}, {logged[42].key_id})\n"
    )


def test_the_newest_leaf_of_a_record_is_proved(
    invoke: Invoke, store_root: Path, keys: tuple[Path, Path], logged, tmp_path: Path
) -> None:
    """A record with two leaves (closed, then invalidated) is proved at its newest."""
    made = invoke("--store", str(store_root), "log", "prove", "exec-5")
    assert made.exit_code == 0
    (tmp_path / "p").write_bytes(made.stdout_bytes)
    checked = invoke(
        "log", "verify-proof", str(tmp_path / "p"), "--key", str(keys[1]), "--json"
    )
    assert orjson.loads(checked.stdout) == {
        "executionId": "exec-5",
        "chainHead": "sha256:" + "f" * 64,
        "keyId": logged[0].key_id,
        "index": 300,
        "origin": ORIGIN,
        "size": 301,
        "root": base64.b64encode(
            TileLog(log_folder(store_root, logged[0].key_id or "")).root()
        ).decode(),
    }


def test_the_proof_file_is_c2sp_tlog_proof(
    invoke: Invoke, store_root: Path, keys, logged
) -> None:
    """The file's lines are the spec's; aics-tlog checks its checkpoint and path."""
    oracle = aics_tlog()
    data = invoke("--store", str(store_root), "log", "prove", "exec-7").stdout_bytes
    head, _, note = data.partition(b"\n\n")
    lines = head.decode().split("\n")
    assert lines[0] == "c2sp.org/tlog-proof@v1"
    assert base64.b64decode(lines[1].removeprefix("extra ")) == logged[7].to_bytes()
    assert lines[2] == "index 7"
    path = [base64.b64decode(line) for line in lines[3:]]
    public = SigningKey.load(keys[0]).public_key
    from intentusnet.tlog.note import verifier_key

    vkey = oracle.parse_vkey(verifier_key(ORIGIN, public))
    result = oracle.verify_checkpoint(oracle.parse_note(note), vkey)
    assert result.ok
    leaf = oracle.leaf_hash(logged[7].to_bytes())
    assert oracle.verify_inclusion(leaf, 7, result.size, path, result.root)


def test_an_id_without_a_leaf_exits_3(invoke: Invoke, store_root: Path, logged) -> None:
    """Proving a record the log does not hold says so, exit 3."""
    result = invoke("--store", str(store_root), "log", "prove", "exec-999")
    assert result.exit_code == 3
    assert "record exec-999 has no leaf in the logs of" in result.stderr


def _proof(invoke: Invoke, store_root: Path, tmp_path: Path) -> bytes:
    return invoke("--store", str(store_root), "log", "prove", "exec-42").stdout_bytes


def _swap_leaf(data: bytes) -> bytes:
    other = LogLeaf("exec-43", "sha256:" + f"{42:064x}", None).to_bytes()
    lines = data.split(b"\n")
    lines[1] = b"extra " + base64.b64encode(other)
    return b"\n".join(lines)


def _flip_hash(data: bytes) -> bytes:
    lines = data.split(b"\n")
    digest = bytearray(base64.b64decode(lines[3]))
    digest[0] ^= 1
    lines[3] = base64.b64encode(bytes(digest))
    return b"\n".join(lines)


FAILS = "the inclusion proof does not hold"
V1, V2 = b"c2sp.org/tlog-proof@v1", b"c2sp.org/tlog-proof@v2"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (_swap_leaf, FAILS),
        (_flip_hash, FAILS),
        (lambda d: d.replace(b"index 42", b"index 41"), FAILS),
        (lambda d: d.replace(b"\n301\n", b"\n302\n"), "does not match the note"),
        (lambda d: d.replace(V1, V2), "not a proof file"),
        (lambda d: d.split(b"\n\n")[0], "empty line before its checkpoint"),
    ],
    ids=["other leaf", "hash flipped", "other index", "other size", "other version",
         "no checkpoint"],
)  # fmt: skip
def test_a_changed_proof_fails_with_exit_6(
    invoke: Invoke, store_root: Path, keys, logged, tmp_path: Path, change, message: str
) -> None:
    """Each change to a proof file is refused, one line, exit 6."""
    (tmp_path / "p").write_bytes(change(_proof(invoke, store_root, tmp_path)))
    result = invoke("log", "verify-proof", str(tmp_path / "p"), "--key", str(keys[1]))
    assert result.exit_code == 6
    assert message in result.stderr
    assert result.stderr.count("\n") == 1


def test_another_key_or_origin_fails(
    invoke: Invoke, store_root: Path, keys, logged, tmp_path: Path
) -> None:
    """A proof is refused under a key that did not sign it, or another origin."""
    (tmp_path / "p").write_bytes(_proof(invoke, store_root, tmp_path))
    _, other = SigningKey.generate().save(tmp_path / "other")
    result = invoke("log", "verify-proof", str(tmp_path / "p"), "--key", str(other))
    assert result.exit_code == 6
    assert "not signed by" in result.stderr
    result = invoke(
        "log", "verify-proof", str(tmp_path / "p"), "--key", str(keys[1]),
        "--origin", "example.com/else",
    )  # fmt: skip
    assert result.exit_code == 6


def test_unusable_files_exit_2(
    invoke: Invoke, store_root: Path, keys, logged, tmp_path: Path
) -> None:
    """A missing proof file, or a private key as --key, is a usage error (exit 2)."""
    result = invoke(
        "log", "verify-proof", str(tmp_path / "missing"), "--key", str(keys[1])
    )
    assert result.exit_code == 2
    assert "cannot read proof file" in result.stderr
    (tmp_path / "p").write_bytes(_proof(invoke, store_root, tmp_path))
    result = invoke("log", "verify-proof", str(tmp_path / "p"), "--key", str(keys[0]))
    assert result.exit_code == 2
    assert "holds a private key" in result.stderr
