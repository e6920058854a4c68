"""Signed records: what a signature proves that the hash chain cannot."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from recordkit import (
    Store,
    attempt_end,
    change_answer,
    disk_fills_mid_write,
    finished,
    record_file,
    reseal,
    response,
    start,
)

from intentusnet._util.jsonvalue import JSONObject
from intentusnet.errors import RecordIntegrityError, SigningKeyError, StoreError
from intentusnet.record.format import seal
from intentusnet.record.keys import SigningKey
from intentusnet.record.model import EventType, RecordStatus
from intentusnet.record.reader import parse_record
from intentusnet.record.signing import KeyRing, SignatureStatus
from intentusnet.record.verify import verify_bytes
from intentusnet.store import FileExecutionStore, MemoryExecutionStore

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def key() -> SigningKey:
    """The signing key of these tests' stores."""
    return SigningKey.generate()


@pytest.fixture
def ring(key: SigningKey) -> KeyRing:
    """A ring holding the stores' public key."""
    return KeyRing([key.public_key])


@pytest.fixture
def store(tmp_path: Path, key: SigningKey) -> FileExecutionStore:
    """A file store that signs every record it closes."""
    return FileExecutionStore(tmp_path / "records", signing_key=key)


def _lines(store: FileExecutionStore, execution_id: str) -> list[JSONObject]:
    path = record_file(store, execution_id)
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def _load(data: bytes, execution_id: str) -> object:
    return parse_record(data, execution_id, lambda _owner: False)


def test_a_completed_record_names_its_key_and_ends_signed(
    store: FileExecutionStore, key: SigningKey, ring: KeyRing
) -> None:
    """Line 1 names the key id; the last line signs the FINAL_RESPONSE line."""
    execution_id = finished(store)
    lines = _lines(store, execution_id)
    assert lines[0]["keyId"] == key.key_id
    assert list(lines[0])[-3:] == ["envelope", "prevHash", "hash"]
    assert [line.get("type") for line in lines[-2:]] == [
        "FINAL_RESPONSE",
        "SIGNATURE",
    ]
    data = lines[-1]["data"]
    assert data["keyId"] == key.key_id
    assert (data["seq"], data["chainHead"]) == (lines[-2]["seq"], lines[-2]["hash"])
    record = store.load(execution_id)
    assert record.header.key_id == key.key_id
    assert record.header.status is RecordStatus.COMPLETED
    assert record.header.replayable
    check = ring.check(record)
    assert (check.status, check.key_ids, check.accepted) == (
        SignatureStatus.SIGNED_VALID,
        (key.key_id,),
        True,
    )
    report = store.verify(execution_id)
    assert report.valid
    assert ring.check_report(report).status is SignatureStatus.SIGNED_VALID


def test_a_record_closed_unfinished_is_signed_too(
    store: FileExecutionStore, ring: KeyRing
) -> None:
    """close() without complete() signs the record as it stands: incomplete."""
    writer = start(store)
    writer.close()
    record = store.load(writer.execution_id)
    assert record.header.status is RecordStatus.INCOMPLETE
    assert record.events[-1].type is EventType.SIGNATURE
    assert ring.check(record).status is SignatureStatus.SIGNED_VALID


def test_a_record_never_closed_is_unsigned(
    store: FileExecutionStore, key: SigningKey
) -> None:
    """A record still being written (or whose writer was killed) has no signature."""
    writer = start(store)
    record = store.load(writer.execution_id)
    lenient = KeyRing([key.public_key]).check(record)
    assert (lenient.status, lenient.accepted) == (SignatureStatus.UNSIGNED, True)
    assert "never closed" in lenient.detail
    strict = KeyRing([key.public_key], require_signature=True).check(record)
    assert (strict.status, strict.accepted) == (SignatureStatus.UNSIGNED, False)
    writer.close()


def test_an_edit_with_every_hash_recomputed_fails_the_signature(
    store: FileExecutionStore, ring: KeyRing
) -> None:
    """The forger's record passes the chain; only the signature catches it."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    path.write_bytes(reseal(path.read_bytes(), change_answer("forged")))
    record = store.load(execution_id)  # the chain holds
    assert record.final_response["payload"] == {"echo": "forged"}
    check = ring.check(record)
    assert (check.status, check.accepted) == (SignatureStatus.SIGNED_INVALID, False)
    assert "line 7" in check.detail
    assert "changed after it was signed" in check.detail
    report = verify_bytes(path.read_bytes(), execution_id)
    assert report.valid  # the chain alone cannot tell
    assert ring.check_report(report).status is SignatureStatus.SIGNED_INVALID


def test_a_signature_that_names_another_line_is_refused(
    store: FileExecutionStore,
) -> None:
    """A forger who re-hashes but keeps the old signature data is caught on load."""
    execution_id = finished(store)
    data = record_file(store, execution_id).read_bytes()
    stale = orjson.loads(data.splitlines()[-1])["data"]["chainHead"]
    lines = reseal(data, change_answer("forged")).splitlines(keepends=True)
    last = orjson.loads(lines[-1])
    del last["hash"]  # prevHash is the last field again, as seal() wants
    last["data"]["chainHead"] = stale
    sealed, _ = seal(last)
    with pytest.raises(RecordIntegrityError, match="does not sign the line just"):
        _load(b"".join(lines[:-1]) + sealed, execution_id)


def test_removing_the_signature_line_of_a_closed_record_is_caught(
    store: FileExecutionStore, ring: KeyRing
) -> None:
    """Cutting the last line keeps the chain whole; a signed record must end signed."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    path.write_bytes(b"".join(path.read_bytes().splitlines(keepends=True)[:-1]))
    with pytest.raises(RecordIntegrityError, match="closed without a signature"):
        store.load(execution_id)
    report = store.verify(execution_id)
    assert not report.valid
    assert any(
        f.startswith("line 6: the header names signing key") for f in report.failures
    )
    check = ring.check_report(report)
    assert (check.status, check.accepted) == (SignatureStatus.SIGNED_INVALID, False)


def test_removing_the_key_id_too_reads_unsigned(
    store: FileExecutionStore, key: SigningKey
) -> None:
    """Stripped of key id and signature and re-hashed: only require_signature tells."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    kept = b"".join(path.read_bytes().splitlines(keepends=True)[:-1])

    def unsign(number: int, fields: JSONObject) -> None:
        if number == 1:
            del fields["keyId"]

    path.write_bytes(reseal(kept, unsign))
    record = store.load(execution_id)
    assert record.header.key_id is None
    lenient = KeyRing([key.public_key]).check(record)
    assert (lenient.status, lenient.accepted) == (SignatureStatus.UNSIGNED, True)
    strict = KeyRing([key.public_key], require_signature=True).check(record)
    assert (strict.status, strict.accepted) == (SignatureStatus.UNSIGNED, False)


@pytest.mark.parametrize(
    ("kind", "data", "refusal"),
    [
        ("AGENT_ATTEMPT_END", attempt_end({"echo": "late"}), "after the record was"),
        (
            "FINAL_RESPONSE",
            {"response": response("x")},
            "after the record was signed and closed",
        ),
        ("INVALIDATED", {"reason": "unsigned"}, "closed without a signature"),
    ],
)
def test_lines_appended_after_the_signature_are_caught(
    store: FileExecutionStore, kind: str, data: JSONObject, refusal: str
) -> None:
    """Chained lines added after a record was signed never pass as part of it."""
    writer = start(store)
    writer.close()  # signed, unfinished
    path = record_file(store, writer.execution_id)
    record = store.load(writer.execution_id)
    line, _ = seal(
        {
            "seq": len(record.events) + 1,
            "type": kind,
            "atMs": 99.0,
            "data": data,
            "prevHash": record.header.chain_head,
        }
    )
    path.write_bytes(path.read_bytes() + line)
    with pytest.raises(RecordIntegrityError, match=refusal):
        store.load(writer.execution_id)
    assert not store.verify(writer.execution_id).valid


def test_bytes_after_a_signed_record_fail(store: FileExecutionStore) -> None:
    """A signed record's writer is done: a partial line after it is an edit."""
    writer = start(store)
    writer.close()
    path = record_file(store, writer.execution_id)
    path.write_bytes(path.read_bytes() + b'{"seq":6,"type":"FINAL')
    with pytest.raises(RecordIntegrityError, match="after the last line of a signed"):
        store.load(writer.execution_id)
    assert not store.verify(writer.execution_id).valid


def test_a_signature_in_an_unsigned_record_is_refused(tmp_path: Path) -> None:
    """A SIGNATURE line stands only in a record whose line 1 names a key."""
    signed = FileExecutionStore(tmp_path / "a", signing_key=SigningKey.generate())
    execution_id = finished(signed)
    path = record_file(signed, execution_id)

    def unsign_header(number: int, fields: JSONObject) -> None:
        if number == 1:
            del fields["keyId"]

    with pytest.raises(RecordIntegrityError, match="header names no signing key"):
        _load(reseal(path.read_bytes(), unsign_header), execution_id)


def test_a_key_the_ring_does_not_hold_is_unknown(store: FileExecutionStore) -> None:
    """Signed by someone else's key: nothing can be said, and it is not accepted."""
    record = store.load(finished(store))
    other = KeyRing([SigningKey.generate().public_key])
    check = other.check(record)
    assert (check.status, check.accepted) == (SignatureStatus.UNKNOWN_KEY, False)
    assert record.header.key_id in check.detail


def test_rotation_keeps_old_records_verifiable(tmp_path: Path) -> None:
    """Records signed before and after a rotation verify with both public keys."""
    old, new = SigningKey.generate(), SigningKey.generate()
    before = finished(FileExecutionStore(tmp_path / "r", signing_key=old), "old")
    rotated = FileExecutionStore(tmp_path / "r", signing_key=new)
    after = finished(rotated, "new")
    rotated.invalidate(before, "withdrawn after the rotation")  # signed by the new key
    both = KeyRing([old.public_key, new.public_key])
    for execution_id, signers in (
        (before, (old.key_id, new.key_id)),
        (after, (new.key_id,)),
    ):
        check = both.check(rotated.load(execution_id))
        assert (check.status, check.key_ids) == (SignatureStatus.SIGNED_VALID, signers)
    only_old = KeyRing([old.public_key]).check(rotated.load(before))
    assert only_old.status is SignatureStatus.UNKNOWN_KEY


def test_invalidating_a_signed_record_needs_a_signing_key(
    store: FileExecutionStore, tmp_path: Path
) -> None:
    """Without a key the store refuses, leaving the record as it was."""
    execution_id = finished(store)
    path = record_file(store, execution_id)
    before = path.read_bytes()
    with pytest.raises(SigningKeyError, match="INVALIDATED line must be signed"):
        FileExecutionStore(store.root).invalidate(execution_id, "no key")
    assert path.read_bytes() == before


def test_an_unsigned_record_stays_unsigned_when_a_signing_store_invalidates_it(
    tmp_path: Path, key: SigningKey
) -> None:
    """Invalidation appends no signature to a record that was never signed."""
    execution_id = finished(FileExecutionStore(tmp_path / "r"))
    signing = FileExecutionStore(tmp_path / "r", signing_key=key)
    signing.invalidate(execution_id, "stale")
    record = signing.load(execution_id)
    assert record.events[-1].type is EventType.INVALIDATED
    assert KeyRing([key.public_key]).check(record).status is SignatureStatus.UNSIGNED


@pytest.mark.parametrize("kind", ["file", "memory"])
def test_invalidation_of_a_signed_record_is_signed(
    tmp_path: Path, key: SigningKey, ring: KeyRing, kind: str
) -> None:
    """INVALIDATED and its signature are appended together; the record verifies."""
    store: Store = (
        FileExecutionStore(tmp_path / "r", signing_key=key)
        if kind == "file"
        else MemoryExecutionStore(signing_key=key)
    )
    execution_id = finished(store)
    store.invalidate(execution_id, "withdrawn")
    record = store.load(execution_id)
    assert [e.type for e in record.events[-4:]] == [
        EventType.FINAL_RESPONSE,
        EventType.SIGNATURE,
        EventType.INVALIDATED,
        EventType.SIGNATURE,
    ]
    assert ring.check(record).status is SignatureStatus.SIGNED_VALID
    assert store.verify(execution_id).valid


def test_a_failed_completion_writes_nothing_and_can_be_retried(
    store: FileExecutionStore, ring: KeyRing, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The final line and its signature reach the file together or not at all."""
    writer = start(store)
    path = record_file(store, writer.execution_id)
    before = path.read_bytes()
    disk_fills_mid_write(monkeypatch)
    with pytest.raises(StoreError, match="No space left"):
        writer.complete(response(writer.execution_id))
    monkeypatch.undo()
    assert path.read_bytes() == before
    writer.complete(response(writer.execution_id))
    record = store.load(writer.execution_id)
    assert record.header.status is RecordStatus.COMPLETED
    assert ring.check(record).status is SignatureStatus.SIGNED_VALID


def test_signature_lines_cannot_be_appended_by_hand(store: FileExecutionStore) -> None:
    """Only closing the record writes a SIGNATURE."""
    writer = start(store)
    with pytest.raises(ValueError, match="written when the record is closed"):
        writer.append(EventType.SIGNATURE, {})
    writer.close()


def test_unsigned_use_and_reading_signed_records_never_import_cryptography(
    store: FileExecutionStore,
) -> None:
    """cryptography loads only when a key is made or read."""
    execution_id = finished(store)
    probe = (
        "import sys\n"
        "from intentusnet import FileExecutionStore, ReplayEngine, IntentRouter\n"
        f"store = FileExecutionStore({str(store.root)!r})\n"
        f"record = store.load({execution_id!r})\n"
        "assert record.header.key_id\n"
        "ReplayEngine(record).replay()\n"
        "store.verify(record.execution_id)\n"
        "with IntentRouter(store=store) as router:\n"
        "    router.agent('ping', name='pong')(lambda env, ctx: {'pong': True})\n"
        "    router.route_intent({'intent': {'name': 'ping'}})\n"
        "assert 'cryptography' not in sys.modules, 'imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(ROOT)},
        cwd=store.root.parent,
    )
    assert done.returncode == 0, done.stderr
