"""Verifying many records' chains: one at a time, and every store's ``verify_all``."""

from __future__ import annotations

from datetime import timedelta

from recordkit import Store

from intentusnet.store.verification import verify_each


def test_every_store_verifies_all_its_records_with_totals(
    any_store: Store, signed_records: dict[str, str]
) -> None:
    """Every report with each, none of a sound store without; totals over all."""
    done: list[int] = []
    run = any_store.verify_all(each=True, on_progress=done.append)
    assert {r.execution_id for r in run} == set(signed_records.values())
    assert (run.records, run.invalid, run.recording_failures) == (4, 0, 0)
    assert run.events_verified == run.events_total > 0
    assert done[-1] == 4
    assert list(any_store.verify_all()) == []


def test_a_record_deleted_after_it_was_listed_is_passed_over(
    any_store: Store, signed_records: dict[str, str]
) -> None:
    """Over the whole store a record gone meanwhile is no failure, just not counted."""
    any_store.delete(signed_records["other"])
    tallies = list(
        verify_each(
            any_store.verify,
            [signed_records["good"], signed_records["other"]],
            each=True,
        )
    )
    assert [shown[0].execution_id for *_, shown in tallies] == [signed_records["good"]]


def test_prune_and_reindex_report_progress_on_every_store(
    any_store: Store, signed_records: dict[str, str]
) -> None:
    """Every store takes the same progress callbacks; the last call has the count."""
    indexed: list[int] = []
    assert any_store.reindex(processes=2, on_progress=indexed.append) == 4
    assert indexed[-1] == 4
    deleted: list[tuple[int, int]] = []
    gone = any_store.prune(
        timedelta(0), on_progress=lambda done, total: deleted.append((done, total))
    )
    assert sorted(gone) == sorted(
        [signed_records["good"], signed_records["other"], signed_records["third"]]
    )
    assert deleted[-1] == (3, 3)  # the record being written is kept
