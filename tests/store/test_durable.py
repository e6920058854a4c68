"""Idempotency keys, record holds and resume links in the file and memory stores."""

from __future__ import annotations

from pathlib import Path

import pytest

from intentusnet import (
    FileExecutionStore,
    InvalidIdempotencyKey,
    MemoryExecutionStore,
    RecordNotFound,
)
from intentusnet.store.durable import DurableStore, check_idempotency_key


@pytest.fixture(params=["file", "memory"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> DurableStore:
    """Each store that keeps keys."""
    if request.param == "file":
        return FileExecutionStore(tmp_path / "store")
    return MemoryExecutionStore()


@pytest.mark.parametrize(
    ("key", "problem"),
    [
        ("", "may not be empty"),
        ("x" * 256, "at most 255"),
        ("caf\u00e9", "character 3"),
        ("a\nb", "character 1"),
        ("tab\there", "character 3"),
        (7, "a string"),
    ],
)
def test_malformed_keys_are_refused(key: object, problem: str) -> None:
    """Empty, oversized, non-ASCII or control-character keys are refused by name."""
    with pytest.raises(InvalidIdempotencyKey, match=problem):
        check_idempotency_key(key)


def test_a_key_of_255_printable_characters_is_accepted() -> None:
    """Printable ASCII up to 255 characters, spaces included, is a key."""
    key = (" ~azAZ09-" * 30)[:255]
    assert check_idempotency_key(key) == key


def test_first_claim_is_made_and_held(store: DurableStore) -> None:
    """The first caller creates and holds the claim; a second gets it, not held."""
    first = store.claim_key("k", "sha256:a", "exec-1")
    second = store.claim_key("k", "sha256:b", "exec-2")
    assert (first.created, first.held, first.execution_id) == (True, True, "exec-1")
    assert (second.created, second.held) == (False, False)
    assert (second.execution_id, second.envelope_hash) == ("exec-1", "sha256:a")
    first.release()
    third = store.claim_key("k", "sha256:a", "exec-3")
    assert (third.held, third.execution_id) == (True, "exec-1")
    third.release()


def test_hold_of_a_record_being_written_is_refused(store: DurableStore) -> None:
    """A record whose writer is open cannot be held; once closed, one holder only."""
    writer = store.open({"intent": {"name": "x"}}, envelope_hash="sha256:" + "0" * 64)
    execution_id = writer.execution_id
    assert store.hold_record(execution_id) is None
    writer.close()
    hold = store.hold_record(execution_id)
    assert hold is not None
    assert store.hold_record(execution_id) is None
    hold.link("exec-next")
    hold.release()
    assert store.resumed_by(execution_id) == "exec-next"
    assert store.resumed_by("exec-other") is None


def test_hold_of_a_missing_record_is_not_found(store: DurableStore) -> None:
    """Holding a record that does not exist raises RecordNotFound."""
    with pytest.raises(RecordNotFound):
        store.hold_record("exec-missing")
