"""select_ids and rerun_all's argument checks (the workers run in tests/cli)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from recordkit import finished

from intentusnet import (
    IntentRouter,
    ListFilters,
    MemoryExecutionStore,
    rerun_all,
    select_ids,
)


def test_a_seeded_sample_is_repeatable_and_in_list_order() -> None:
    """Equal seeds draw equal records, kept newest first; a large sample takes all."""
    store = MemoryExecutionStore()
    made = [finished(store, f"t{n}") for n in range(20)]
    every = list(select_ids(store))
    assert sorted(every) == sorted(made)
    drawn = list(select_ids(store, sample=5, seed=3))
    assert len(drawn) == 5
    assert drawn == list(select_ids(store, sample=5, seed=3))
    assert drawn != list(select_ids(store, sample=5, seed=4))
    assert drawn == [i for i in every if i in drawn]
    assert list(select_ids(store, ListFilters(limit=3), sample=10)) == every[:3]


def test_bad_arguments_are_refused() -> None:
    """A sample below 1 and fewer than one worker are ValueErrors."""
    with pytest.raises(ValueError, match="sample must be >= 1"):
        list(select_ids(MemoryExecutionStore(), sample=0))
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        list(rerun_all("records", IntentRouter, ["exec-1"], jobs=0))


class _Row:
    def __init__(self, execution_id: str, created_utc: str) -> None:
        self.execution_id = execution_id
        self.created_utc = created_utc


class _Store:
    """A store's ``list``: newest first, ``until`` exclusive, ``limit``."""

    def __init__(self, rows: list[_Row]) -> None:
        self.rows = rows
        self.asked = 0

    def list(self, filters: ListFilters) -> list[_Row]:
        self.asked += 1
        until = filters.until.isoformat() if filters.until else "9"
        found = [r for r in self.rows if r.created_utc.replace("Z", "+00:00") < until]
        return found[: filters.limit]


def test_pages_with_records_made_at_the_same_moment_lose_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asked two at a time, records sharing a timestamp across pages come once each."""
    monkeypatch.setattr("intentusnet.testing.bulk._PAGE", 2)
    times = ["05", "04", "04", "04", "04", "03", "02", "02", "01"]
    rows = [
        _Row(f"exec-{n}", f"2026-11-28T00:00:00.0000{t}+00:00")
        for n, t in enumerate(times)
    ]
    store = _Store(rows)
    until = ListFilters(until=datetime(2026, 11, 29, tzinfo=UTC))
    assert list(select_ids(store, until)) == [r.execution_id for r in rows]  # type: ignore[arg-type]
    assert store.asked >= 5
    limited = ListFilters(until=until.until, limit=4)
    assert (
        list(select_ids(_Store(rows), limited))
        == [  # type: ignore[arg-type]
            r.execution_id for r in rows[:4]
        ]
    )
