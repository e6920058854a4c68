"""Verifying many records: the records named, or every record, judged and totalled."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from recordkit import Store, finished, start

from intentusnet.errors import RecordNotFound
from intentusnet.record.keys import SigningKey
from intentusnet.record.signing import KeyRing
from intentusnet.store import MemoryExecutionStore
from intentusnet.store.verification import Verification, verify_each


@pytest.fixture
def key() -> SigningKey:
    """The key the store signs with."""
    return SigningKey.generate()


@pytest.fixture(params=["file", "memory", "postgres"])
def any_store(
    request: pytest.FixtureRequest, tmp_path: Path, key: SigningKey
) -> Iterator[Store]:
    """Each store implementation in turn, signing with ``key``."""
    from intentusnet.store import FileExecutionStore, PostgresExecutionStore

    if request.param == "file":
        with FileExecutionStore(tmp_path / "records", signing_key=key) as opened:
            yield opened
    elif request.param == "memory":
        yield MemoryExecutionStore(signing_key=key)
    else:
        dsn = request.getfixturevalue("pg_dsn")
        with PostgresExecutionStore(dsn, signing_key=key) as opened:
            yield opened


@pytest.fixture
def ids(any_store: Store) -> Iterator[dict[str, str]]:
    """Three signed records, and one still being written (so not signed yet)."""
    live = start(any_store, "live")
    yield {
        "good": finished(any_store, "good"),
        "other": finished(any_store, "other"),
        "third": finished(any_store, "third"),
        "live": live.execution_id,
    }
    live.close()


def test_a_sound_store_shows_nothing_and_counts_every_record(
    any_store: Store, ids: dict[str, str], key: SigningKey
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
    any_store: Store, ids: dict[str, str]
) -> None:
    """Signed by a key the ring lacks: each record is shown and fails the total."""
    ring = KeyRing([SigningKey.generate().public_key])
    run = Verification(any_store, ring=ring)
    outcomes = list(run)
    assert {o.report.execution_id for o in outcomes} == {
        ids["good"],
        ids["other"],
        ids["third"],
    }
    assert all(o.report.valid and not o.valid for o in outcomes)
    assert {o.signature.status.value for o in outcomes if o.signature} == {
        "unknown-key"
    }
    assert (run.records, run.invalid) == (4, 3)
    assert (run.signatures["unknown-key"], run.signatures["unsigned"]) == (3, 1)


def test_without_a_ring_each_shows_every_record(
    any_store: Store, ids: dict[str, str]
) -> None:
    """No signatures judged, nothing to show; with each, every record."""
    run = Verification(any_store)
    assert list(run) == []
    assert (run.records, run.invalid, run.signatures) == (4, 0, {})
    outcomes = list(Verification(any_store, each=True))
    assert {o.report.execution_id for o in outcomes} == set(ids.values())
    assert all(o.valid and o.signature is None for o in outcomes)


def test_named_records_are_shown_in_order_and_a_missing_one_raises(
    any_store: Store, ids: dict[str, str], key: SigningKey
) -> None:
    """Records named are all yielded, in order; one not there raises when reached."""
    ring = KeyRing([key.public_key], require_signature=True)
    named = [ids["live"], ids["good"]]
    run = Verification(any_store, named, ring=ring)
    outcomes = list(run)
    assert [o.report.execution_id for o in outcomes] == named
    assert [o.valid for o in outcomes] == [False, True]  # a signature was required
    assert (run.records, run.invalid) == (2, 1)
    any_store.delete(ids["other"])
    missing = iter(Verification(any_store, [ids["good"], ids["other"]]))
    assert next(missing).report.execution_id == ids["good"]
    with pytest.raises(RecordNotFound):
        next(missing)


def test_a_record_deleted_after_it_was_listed_is_passed_over(
    any_store: Store, ids: dict[str, str]
) -> None:
    """Over the whole store a record gone meanwhile is no failure, just not counted."""
    any_store.delete(ids["other"])
    tallies = list(verify_each(any_store, [ids["good"], ids["other"]], each=True))
    assert [shown[0].execution_id for *_, shown in tallies] == [ids["good"]]


def test_prune_and_reindex_report_progress_on_every_store(
    any_store: Store, ids: dict[str, str]
) -> None:
    """Every store takes the same progress callbacks; the last call has the count."""
    indexed: list[int] = []
    assert any_store.reindex(processes=2, on_progress=indexed.append) == 4
    assert indexed[-1] == 4
    deleted: list[tuple[int, int]] = []
    gone = any_store.prune(
        timedelta(0), on_progress=lambda done, total: deleted.append((done, total))
    )
    assert sorted(gone) == sorted([ids["good"], ids["other"], ids["third"]])
    assert deleted[-1] == (3, 3)  # the record being written is kept
