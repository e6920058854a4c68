"""The sample records in records/ load as they always have (golden files)."""

import json
import shutil
from pathlib import Path

import pytest

from intentusnet import (
    FileExecutionStore,
    RecordIntegrityError,
    ReplayEngine,
    ReplayNotAllowed,
    compute_hash,
)

SAMPLES = Path(__file__).resolve().parents[2] / "records"


def _into_store(tmp_path: Path, state: str) -> tuple[FileExecutionStore, str]:
    """Copy one sample into a fresh store; return the store and the record's id."""
    source = SAMPLES / f"{state}.jsonl"
    execution_id = json.loads(source.read_bytes().split(b"\n", 1)[0])["executionId"]
    store = FileExecutionStore(tmp_path / "store")
    target = store.root / _shard(execution_id) / f"{execution_id}.jsonl"
    target.parent.mkdir(parents=True)
    shutil.copyfile(source, target)
    return store, execution_id


def _shard(execution_id: str) -> str:
    import hashlib

    return hashlib.sha256(execution_id.encode()).hexdigest()[:2]


def _envelope(state: str) -> dict:
    return json.loads((SAMPLES / f"{state}.envelope.json").read_text())


@pytest.mark.parametrize(
    ("state", "status", "replayable", "reason"),
    [
        ("completed", "completed", True, None),
        ("failed", "failed", True, None),
        ("incomplete", "incomplete", False, "execution_incomplete"),
        ("invalidated", "completed", False, "manually_invalidated"),
    ],
)
def test_sample_loads_with_its_state(tmp_path, state, status, replayable, reason):
    """Each sample record loads with the status and replayability it was made with."""
    store, execution_id = _into_store(tmp_path, state)
    header = store.load(execution_id).header
    assert header.status == status
    assert header.replayable is replayable
    assert header.replayable_reason == reason
    assert header.envelope_hash == compute_hash(_envelope(state))
    store.close()


def test_completed_sample_replays_its_answer(tmp_path):
    """The completed sample replays the recorded answer against its envelope."""
    store, execution_id = _into_store(tmp_path, "completed")
    result = ReplayEngine.from_store(store, execution_id).replay(
        env=_envelope("completed")
    )
    assert result.status == "success"
    assert result.payload == {"summary": "Records remember everything."}
    assert result.metadata["agent"] == "short"
    store.close()


def test_failed_sample_replays_its_error(tmp_path):
    """The failed sample replays its error response."""
    store, execution_id = _into_store(tmp_path, "failed")
    result = ReplayEngine.from_store(store, execution_id).replay()
    assert result.status == "error"
    assert result.error["code"] == "AGENT_ERROR"
    store.close()


def test_incomplete_sample_forces_a_partial_result(tmp_path):
    """The killed execution refuses replay and forces the last finished output."""
    store, execution_id = _into_store(tmp_path, "incomplete")
    engine = ReplayEngine.from_store(store, execution_id)
    with pytest.raises(ReplayNotAllowed):
        engine.replay()
    forced = engine.replay(force=True)
    assert forced.partial is True
    assert forced.forced is True
    store.close()


def test_tampered_sample_fails_integrity(tmp_path):
    """The sample edited after the fact fails its hash chain, naming the line."""
    store, execution_id = _into_store(tmp_path, "tampered")
    with pytest.raises(RecordIntegrityError) as info:
        store.load(execution_id)
    assert info.value.line is not None
    assert store.verify(execution_id).valid is False
    store.close()


def test_signed_sample_verifies_with_both_rotated_keys(tmp_path):
    """The signed sample: signed by one key, invalidated and signed by the next."""
    from intentusnet import KeyRing, SignatureStatus

    store, execution_id = _into_store(tmp_path, "signed")
    record = store.load(execution_id)
    assert record.header.replayable_reason == "manually_invalidated"
    assert record.header.envelope_hash == compute_hash(_envelope("signed"))
    both = KeyRing.load(SAMPLES / "signed-a.pub", SAMPLES / "signed-b.pub")
    check = both.check(record)
    assert check.status is SignatureStatus.SIGNED_VALID
    assert check.key_ids == (record.header.key_id, check.key_ids[1])
    assert both.check_report(store.verify(execution_id)).accepted
    older = KeyRing.load(SAMPLES / "signed-a.pub").check(record)
    assert older.status is SignatureStatus.UNKNOWN_KEY
    store.close()
