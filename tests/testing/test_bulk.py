"""select_ids and rerun_all's argument checks (the workers run in tests/cli)."""

from __future__ import annotations

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
    every = select_ids(store)
    assert sorted(every) == sorted(made)
    drawn = select_ids(store, sample=5, seed=3)
    assert drawn == select_ids(store, sample=5, seed=3)
    assert drawn != select_ids(store, sample=5, seed=4)
    assert drawn == [i for i in every if i in drawn]
    assert select_ids(store, ListFilters(limit=3), sample=10) == every[:3]


def test_bad_arguments_are_refused() -> None:
    """A sample below 1 and fewer than one worker are ValueErrors."""
    with pytest.raises(ValueError, match="sample must be >= 1"):
        select_ids(MemoryExecutionStore(), sample=0)
    with pytest.raises(ValueError, match="jobs must be >= 1"):
        list(rerun_all("records", IntentRouter, ["exec-1"], jobs=0))
