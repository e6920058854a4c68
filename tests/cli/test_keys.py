"""Signed records from the command line: keys, recording, verify, replay, reindex."""

from __future__ import annotations

import stat
import sys
from pathlib import Path

import orjson
import pytest
from recordkit import change_answer, reseal

from .support import Invoke, envelope, record_file, write_json


def _generate(invoke: Invoke, directory: Path) -> dict[str, str]:
    """Run ``keys generate --out DIR --json``; its answer."""
    result = invoke("keys", "generate", "--out", str(directory), "--json")
    assert result.exit_code == 0, result.output
    return orjson.loads(result.stdout)


def _record(invoke: Invoke, app_dir: Path, root: Path, key: str, text: str) -> str:
    """Route one envelope with ``run``, the app's store signing with ``key``."""
    file = write_json(app_dir / f"{text}.json", envelope(text=text))
    result = invoke(
        "run",
        "--app",
        "demo_app:router",
        str(file),
        DEMO_STORE=str(root),
        DEMO_SIGNING_KEY=key,
    )
    assert result.exit_code == 0, result.output
    # As the process of `run` does when it exits: write the queued catalog rows.
    sys.modules["demo_app"].store.close()
    sys.modules.pop("demo_app")  # `run` closed the router: a fresh one next time
    return str(orjson.loads(result.stdout)["metadata"]["executionId"])


@pytest.fixture
def key(invoke: Invoke, tmp_path: Path) -> dict[str, str]:
    """A key pair made by ``keys generate`` (keyId, privateKey, publicKey)."""
    return _generate(invoke, tmp_path / "keys")


def test_generate_writes_a_key_pair_and_prints_its_id(
    invoke: Invoke, tmp_path: Path
) -> None:
    """The private key is 0600 in a 0700 directory; the id names both files."""
    result = invoke("keys", "generate", "--out", str(tmp_path / "k"))
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    key_id = lines[0].removeprefix("Key id:").strip()
    assert key_id.startswith("ed25519:")
    stem = key_id.replace(":", "-")
    private, public = tmp_path / "k" / f"{stem}.key", tmp_path / "k" / f"{stem}.pub"
    assert str(private) in lines[1]
    assert str(public) in lines[2]
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "k").stat().st_mode) == 0o700
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----")


def test_signing_end_to_end_catches_a_forger_who_rehashes_and_reindexes(
    invoke: Invoke, app_dir: Path, store_root: Path, key: dict[str, str]
) -> None:
    """generate, record, verify, tamper, re-hash, reindex: the signature still fails."""
    store, public = ["--store", str(store_root)], key["publicKey"]
    good = _record(invoke, app_dir, store_root, key["privateKey"], "good")
    forged = _record(invoke, app_dir, store_root, key["privateKey"], "forged")
    checked = invoke(*store, "verify", good, forged, "--key", public)
    assert checked.exit_code == 0, checked.output
    assert checked.stdout.count(f"VALID - signed-valid ({key['keyId']})") == 2

    path = record_file(store_root, forged)
    path.write_bytes(reseal(path.read_bytes(), change_answer("forged")))
    reindexed = invoke(*store, "reindex")
    assert reindexed.exit_code == 6  # the catalog remembered the old chain head
    assert f"{forged}: changed since the catalog saw it" in reindexed.stdout
    for catalog in store_root.glob("catalog.sqlite3*"):
        catalog.unlink()  # the forger removes what remembered
    assert invoke(*store, "reindex").exit_code == 0
    chain_only = invoke(*store, "verify", forged)
    assert chain_only.exit_code == 0  # the chain alone proves nothing
    replayed = invoke(*store, "replay", forged)
    assert orjson.loads(replayed.stdout)["payload"] == {"echo": "forged"}

    caught = invoke(*store, "verify", forged, "--key", public)
    assert caught.exit_code == 6
    assert "INVALID - signed-invalid: the signature at line 7" in caught.stdout
    everything = invoke(*store, "verify", "--all", "--keys", str(Path(public).parent))
    assert everything.exit_code == 6
    assert everything.stdout.splitlines()[-1] == (
        "Signatures: 1 signed-valid, 1 signed-invalid, 0 unsigned, 0 unknown-key"
    )
    for extra in ([], ["--force"], ["--step"]):
        refused = invoke(*store, "replay", forged, "--key", public, *extra, input="")
        assert refused.exit_code == 6
        assert "signature check failed (signed-invalid)" in refused.stderr
        assert "Traceback" not in refused.output
    assert invoke(*store, "replay", good, "--key", public).exit_code == 0
    walked = invoke(*store, "replay", good, "--step", "--key", public, input="\n" * 9)
    assert walked.exit_code == 0, walked.output
    assert "SIGNATURE" in walked.stdout
    assert "End of record: 0 failures - VALID" in walked.stdout


def test_verify_json_reports_each_signature(
    invoke: Invoke, app_dir: Path, store_root: Path, key: dict[str, str]
) -> None:
    """--json gives each record's signature check and counts per status."""
    execution_id = _record(invoke, app_dir, store_root, key["privateKey"], "hi")
    result = invoke(
        "--store",
        str(store_root),
        "verify",
        execution_id,
        "--key",
        key["publicKey"],
        "--json",
    )
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    (report,) = doc["records"]
    assert report["keyId"] == key["keyId"]
    assert report["signature"]["status"] == "signed-valid"
    assert report["signature"]["keyIds"] == [key["keyId"]]
    assert report["signature"]["accepted"] is True
    assert doc["total"]["signatures"] == {
        "signed-valid": 1,
        "signed-invalid": 0,
        "unsigned": 0,
        "unknown-key": 0,
    }


def test_a_stripped_signature_fails_without_any_key(
    invoke: Invoke, app_dir: Path, store_root: Path, key: dict[str, str]
) -> None:
    """Cutting the signature line off a completed record keeps the chain, but fails."""
    execution_id = _record(invoke, app_dir, store_root, key["privateKey"], "x")
    path = record_file(store_root, execution_id)
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    result = invoke("--store", str(store_root), "verify", execution_id)
    assert result.exit_code == 6
    assert "closed without a signature over its last line" in result.stdout
    keyed = invoke(
        "--store", str(store_root), "verify", execution_id, "--key", key["publicKey"]
    )
    assert "signed-invalid" in keyed.stdout


def test_unknown_key_and_rotation(
    invoke: Invoke,
    app_dir: Path,
    store_root: Path,
    key: dict[str, str],
    tmp_path: Path,
) -> None:
    """Records of an old and a new key verify with both; the new alone is unknown."""
    newer = _generate(invoke, Path(key["privateKey"]).parent)  # same directory
    old = _record(invoke, app_dir, store_root, key["privateKey"], "old")
    new = _record(invoke, app_dir, store_root, newer["privateKey"], "new")
    store = ["--store", str(store_root)]
    both = invoke(
        *store, "verify", old, new, "--keys", str(Path(newer["publicKey"]).parent)
    )
    assert both.exit_code == 0, both.output
    assert both.stdout.count("VALID - signed-valid") == 2
    only_new = invoke(*store, "verify", old, "--key", newer["publicKey"])
    assert only_new.exit_code == 6
    assert f"unknown-key: signed with {key['keyId']}" in only_new.stdout
    two_files = invoke(
        *store,
        "verify",
        old,
        new,
        "--key",
        key["publicKey"],
        "--key",
        newer["publicKey"],
    )
    assert two_files.exit_code == 0


def test_unsigned_records_pass_unless_a_signature_is_required(
    invoke: Invoke, store_root: Path, ids: dict[str, str], key: dict[str, str]
) -> None:
    """An unsigned record reads `unsigned`; --require-signature fails it."""
    store = ["--store", str(store_root)]
    lenient = invoke(*store, "verify", ids["completed"], "--key", key["publicKey"])
    assert lenient.exit_code == 0, lenient.output
    assert "VALID - unsigned: line 1 names no signing key" in lenient.stdout
    strict = invoke(
        *store,
        "verify",
        ids["completed"],
        "--key",
        key["publicKey"],
        "--require-signature",
    )
    assert strict.exit_code == 6
    assert "a signature is required" in strict.stdout
    replay = invoke(
        *store,
        "replay",
        ids["completed"],
        "--key",
        key["publicKey"],
        "--require-signature",
    )
    assert replay.exit_code == 6
    assert "signature check failed (unsigned)" in replay.stderr


def test_require_signature_without_a_key_is_a_usage_error(
    invoke: Invoke, store_root: Path, ids: dict[str, str]
) -> None:
    """--require-signature alone cannot check anything: exit 2."""
    result = invoke(
        "--store", str(store_root), "verify", ids["completed"], "--require-signature"
    )
    assert result.exit_code == 2
    assert "--require-signature needs --key FILE or --keys DIR" in result.stderr


@pytest.mark.parametrize(
    ("option", "given", "message"),
    [
        ("--key", "missing.pub", "does not exist"),
        ("--key", "PRIVATE", "holds a private key; give its public key"),
        ("--key", "DIR", "is a directory, not a key file"),
        ("--key", "NOT_A_KEY", "is not a PEM public key file"),
        ("--keys", "PUBLIC", "is not a directory"),
        ("--keys", "EMPTY", "no public keys (*.pub files)"),
    ],
)
def test_key_files_that_cannot_be_used_exit_2_without_a_traceback(
    invoke: Invoke,
    store_root: Path,
    ids: dict[str, str],
    key: dict[str, str],
    tmp_path: Path,
    option: str,
    given: str,
    message: str,
) -> None:
    """Each wrong key file is one precise line on stderr and exit 2."""
    (tmp_path / "empty").mkdir()
    (tmp_path / "junk.pub").write_text("not a key\n")
    path = {
        "PRIVATE": key["privateKey"],
        "PUBLIC": key["publicKey"],
        "DIR": str(Path(key["publicKey"]).parent),
        "EMPTY": str(tmp_path / "empty"),
        "NOT_A_KEY": str(tmp_path / "junk.pub"),
    }.get(given, str(tmp_path / given))
    for command in ("verify", "replay"):
        result = invoke(
            "--store", str(store_root), command, ids["completed"], option, path
        )
        assert result.exit_code == 2, result.output
        assert message in result.stderr
        assert result.stderr.startswith("Error: ")
        assert "Traceback" not in result.output


def test_invalidate_signs_with_the_signing_key(
    invoke: Invoke, app_dir: Path, store_root: Path, key: dict[str, str]
) -> None:
    """A signed record is invalidated only with --signing-key; it still verifies."""
    execution_id = _record(invoke, app_dir, store_root, key["privateKey"], "x")
    store = ["--store", str(store_root)]
    refused = invoke(*store, "invalidate", execution_id, "--reason", "stale")
    assert refused.exit_code == 2
    assert "the INVALIDATED line must be signed too" in refused.stderr
    wrong = invoke(
        *store,
        "--signing-key",
        key["publicKey"],
        "invalidate",
        execution_id,
        "--reason",
        "stale",
    )
    assert wrong.exit_code == 2
    assert "holds a public key; signing needs the private key" in wrong.stderr
    done = invoke(
        *store,
        "invalidate",
        execution_id,
        "--reason",
        "stale",
        INTENTUSNET_SIGNING_KEY=key["privateKey"],
    )
    assert done.exit_code == 0, done.output
    checked = invoke(*store, "verify", execution_id, "--key", key["publicKey"])
    assert checked.exit_code == 0, checked.output
    assert "signed-valid" in checked.stdout
    assert (
        invoke(*store, "replay", execution_id, "--key", key["publicKey"]).exit_code == 4
    )


def test_inspect_shows_the_signing_key_and_signature_lines(
    invoke: Invoke, app_dir: Path, store_root: Path, key: dict[str, str]
) -> None:
    """inspect names the key line 1 announces and what each signature covers."""
    execution_id = _record(invoke, app_dir, store_root, key["privateKey"], "x")
    result = invoke("--store", str(store_root), "inspect", execution_id)
    assert result.exit_code == 0, result.output
    assert f"signed by:   {key['keyId']}" in result.stdout
    assert "SIGNATURE" in result.stdout
    assert f"{key['keyId']} signs lines 1-" in result.stdout
