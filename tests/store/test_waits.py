"""The stores' signals, wake-ups and ``waiting`` records (``store.durable.WaitStore``).

Each test runs on the file, memory and PostgreSQL stores (``any_store``).
"""

from __future__ import annotations

import time

from recordkit import Store, finished, start

from intentusnet import ListFilters, RecordStatus, WaitStore
from intentusnet.record.model import EventType


def test_signals_are_kept_in_order_up_to_the_cap(any_store: Store) -> None:
    """A chain's signals come back oldest first; past the cap nothing is written."""
    assert isinstance(any_store, WaitStore)
    origin = finished(any_store, "origin")
    sent = [{"id": f"s{n}", "name": "go", "payload": n} for n in range(3)]
    for signal in sent:
        assert any_store.add_signal(origin, signal, cap=3)
    assert not any_store.add_signal(origin, {"id": "s3", "name": "go"}, cap=3)
    assert any_store.signals(origin) == sent
    assert any_store.signals(finished(any_store, "other")) == []


def test_signals_go_with_their_record(any_store: Store) -> None:
    """Deleting the chain's first record deletes its signals."""
    assert isinstance(any_store, WaitStore)
    origin = finished(any_store, "origin")
    any_store.add_signal(origin, {"id": "s", "name": "go"}, cap=10)
    any_store.delete(origin)  # type: ignore[attr-defined]
    assert any_store.signals(origin) == []


def test_only_due_wakeups_are_read_soonest_first(any_store: Store) -> None:
    """``due_wakeups`` returns those due by the time asked, soonest first, bounded."""
    assert isinstance(any_store, WaitStore)
    now = time.time_ns() // 1000
    ids = [finished(any_store, f"r{n}") for n in range(4)]
    dues = [now - 120_000_000, now - 1_000, now + 5_000_000, now + 3_600_000_000]
    for execution_id, due in zip(ids, dues, strict=True):
        any_store.add_wakeup(execution_id, due)
    any_store.add_wakeup(ids[0], dues[0])  # twice: kept once

    assert any_store.due_wakeups(now, 10) == [(ids[0], dues[0]), (ids[1], dues[1])]
    assert any_store.due_wakeups(now, 1) == [(ids[0], dues[0])]
    assert any_store.due_wakeups(now + 10_000_000, 10)[-1] == (ids[2], dues[2])

    any_store.clear_wakeup(ids[0], dues[0])
    any_store.clear_wakeup(ids[0], dues[0])  # gone: nothing to do
    assert any_store.due_wakeups(now, 10) == [(ids[1], dues[1])]


def test_a_record_closed_after_waiting_reads_and_lists_waiting(
    any_store: Store,
) -> None:
    """EXECUTION_WAITING then close: ``waiting`` in the record and the listing."""
    writer = start(any_store, "sleeper")
    writer.append(EventType.EXECUTION_WAITING, {"waitingFor": "sleep", "dueUtc": "x"})
    writer.close()
    other = start(any_store, "stopped")
    other.close()

    record = any_store.load(writer.execution_id)
    assert record.header.status is RecordStatus.WAITING
    listed = any_store.list(ListFilters(status="waiting"))
    assert [s.execution_id for s in listed] == [writer.execution_id]
    assert any_store.load(other.execution_id).header.status is RecordStatus.INCOMPLETE
    assert any_store.verify(writer.execution_id).valid  # signed like any record
