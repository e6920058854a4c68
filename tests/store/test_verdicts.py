"""The verdict on many records: chains, signatures judged by a key ring, totals."""

from __future__ import annotations

import pytest
from recordkit import Store

from intentusnet.errors import RecordNotFound
from intentusnet.record.keys import SigningKey
from intentusnet.record.signing import KeyRing
from intentusnet.store.verdicts import Verification


def test_a_sound_store_shows_nothing_and_counts_every_record(
    any_store: Store, signed_records: dict[str, str], key: SigningKey
) -> None:
    """Every chain holds and the ring accepts every record: nothing shown, totals."""
    done: list[int] = []
    run = Verification(
        any_store, ring=KeyRing([key.public_key]), on_progress=done.append
    )
    assert list(run) == []
    assert (run.records, run.invalid, run.recording_failures) == (4, 0, 0)
    assert run.events_verified == run.events_total > 0
    assert run.failures == 0
    assert list(run.signatures.items()) == [
        ("signed-valid", 3),
        ("signed-invalid", 0),
        ("unsigned", 1),
        ("unknown-key", 0),
    ]
    assert done[-1] == 4


def test_a_ring_without_the_key_fails_records_whose_chains_hold(
    any_store: Store, signed_records: dict[str, str]
) -> None:
    """Signed by a key the ring lacks: each record is shown and fails the total."""
    ring = KeyRing([SigningKey.generate().public_key])
    run = Verification(any_store, ring=ring)
    outcomes = list(run)
    assert {o.report.execution_id for o in outcomes} == {
        signed_records["good"],
        signed_records["other"],
        signed_records["third"],
    }
    assert all(o.report.valid and not o.valid for o in outcomes)
    assert {o.signature.status.value for o in outcomes if o.signature} == {
        "unknown-key"
    }
    assert (run.records, run.invalid) == (4, 3)
    assert (run.signatures["unknown-key"], run.signatures["unsigned"]) == (3, 1)


def test_without_a_ring_each_shows_every_record(
    any_store: Store, signed_records: dict[str, str]
) -> None:
    """No signatures judged, nothing to show; with each, every record."""
    run = Verification(any_store)
    assert list(run) == []
    assert (run.records, run.invalid, run.signatures) == (4, 0, {})
    outcomes = list(Verification(any_store, each=True))
    assert {o.report.execution_id for o in outcomes} == set(signed_records.values())
    assert all(o.valid and o.signature is None for o in outcomes)


def test_named_records_are_shown_in_order_and_a_missing_one_raises(
    any_store: Store, signed_records: dict[str, str], key: SigningKey
) -> None:
    """Records named are all yielded, in order; one not there raises when reached."""
    ring = KeyRing([key.public_key], require_signature=True)
    named = [signed_records["live"], signed_records["good"]]
    run = Verification(any_store, named, ring=ring)
    outcomes = list(run)
    assert [o.report.execution_id for o in outcomes] == named
    assert [o.valid for o in outcomes] == [False, True]  # a signature was required
    assert (run.records, run.invalid) == (2, 1)
    any_store.delete(signed_records["other"])
    missing = iter(
        Verification(any_store, [signed_records["good"], signed_records["other"]])
    )
    assert next(missing).report.execution_id == signed_records["good"]
    with pytest.raises(RecordNotFound):
        next(missing)
