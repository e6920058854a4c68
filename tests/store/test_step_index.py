"""The step index: ended steps by (envelope hash, name, args hash), in every store."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from intentusnet import FileExecutionStore, IntentRouter, MemoryExecutionStore
from intentusnet.store.step_index import StepIndex, StepRef, ended_steps


def _route(store: Any, payloads: list[int], intent: str = "mcp.session") -> list[str]:
    """One execution per payload; each makes the steps ``look`` and ``other``."""
    router = IntentRouter(store=store)

    @router.agent(intent)
    def agent(envelope: Any, ctx: Any) -> dict[str, int]:
        n = envelope.payload["n"]
        ctx.step("look", {"q": n}, lambda q: q * 10)
        ctx.step("look", {"q": 0}, lambda q: q)
        ctx.step("other", {"q": n}, lambda q: q)
        return {"n": n}

    ids = []
    for n in payloads:
        envelope = {"intent": {"name": intent}, "payload": {"n": n}}
        answer = router.route_intent(envelope)
        ids.append(answer.metadata.execution_id)
    router.close()
    return ids


def _answers(store: Any, ids: list[str]) -> list[list[StepRef]]:
    """What the index says for the calls the records of ``ids`` made."""
    first = store.load(ids[0])
    envelope_hash = first.header.envelope_hash
    look = {name: hashed for name, hashed, _n in ended_steps(first)}
    return [
        store.find_steps(envelope_hash, "look", look["look"]),
        store.find_steps(envelope_hash, "look"),
        store.find_steps(envelope_hash, "look", limit=1),
        store.find_steps(envelope_hash, "missing"),
        store.find_steps("sha256:" + "0" * 64, "look"),
    ]


def _expected(ids: list[str]) -> list[list[StepRef]]:
    """Two executions of n=1 (newest first), then n=2: each has steps 1 to 3."""
    one_old, one_new = ids[0], ids[2]
    return [
        [StepRef(one_new, 2), StepRef(one_old, 2)],  # {"q": 0}: the second call
        [
            StepRef(one_new, 1),
            StepRef(one_new, 2),
            StepRef(one_old, 1),
            StepRef(one_old, 2),
        ],
        [StepRef(one_new, 1)],
        [],
        [],
    ]


def test_a_record_file_store_answers_newest_first(tmp_path: Path) -> None:
    """Ended steps are found by hash, name and arguments, newest record first."""
    store = FileExecutionStore(tmp_path)
    assert isinstance(store, StepIndex)
    ids = _route(store, [1, 2, 1])
    assert _answers(store, ids) == _expected(ids)
    store.close()


def test_every_store_answers_the_same(tmp_path: Path, pg_store: Any) -> None:
    """The file store, the memory store and PostgreSQL hold the same index."""
    found = []
    for store in (FileExecutionStore(tmp_path), MemoryExecutionStore(), pg_store):
        assert isinstance(store, StepIndex)
        ids = _route(store, [1, 2, 1])
        found.append(_answers(store, ids) == _expected(ids))
    assert found == [True, True, True]


def test_only_the_indexed_intents_are_indexed(tmp_path: Path, pg_store: Any) -> None:
    """Steps of other intents cost no index rows (in any store)."""
    for store in (FileExecutionStore(tmp_path), MemoryExecutionStore(), pg_store):
        ids = _route(store, [1, 2, 1], intent="lookup")
        envelope_hash = store.load(ids[0]).header.envelope_hash
        assert store.find_steps(envelope_hash, "look") == []
        if isinstance(store, FileExecutionStore):
            store.close()
            with sqlite3.connect(tmp_path / "catalog.sqlite3") as db:
                assert db.execute("SELECT count(*) FROM steps").fetchone() == (0,)


def test_reindex_rebuilds_the_index(tmp_path: Path) -> None:
    """A deleted catalog is rebuilt from the files, step index included."""
    store = FileExecutionStore(tmp_path)
    ids = _route(store, [1, 2, 1])
    before = _answers(store, ids)
    store.close()
    (tmp_path / "catalog.sqlite3").unlink()
    store = FileExecutionStore(tmp_path)
    assert store.reindex() == 3
    assert _answers(store, ids) == before == _expected(ids)
    store.close()


def test_postgres_reindex_rebuilds_the_index(pg_store: Any) -> None:
    """PostgreSQL's step index is derived from the lines again by reindex."""
    ids = _route(pg_store, [1, 2, 1])
    pg_store._db.run("DELETE FROM intentusnet_steps")
    assert _answers(pg_store, ids)[0] == []
    assert pg_store.reindex() == 3
    assert _answers(pg_store, ids) == _expected(ids)


def test_a_deleted_record_leaves_the_index(tmp_path: Path, pg_store: Any) -> None:
    """Deleting a record drops its steps from the index (file store, PostgreSQL)."""
    for store in (FileExecutionStore(tmp_path), pg_store):
        ids = _route(store, [1, 2, 1])
        store.delete(ids[2])
        refs = _answers(store, ids)[0]
        assert refs == [StepRef(ids[0], 2)]


def test_an_unfinished_step_is_not_indexed() -> None:
    """Only steps whose STEP_END is written are in the index."""
    store = MemoryExecutionStore()
    writer = store.open(
        {"intent": {"name": "mcp.session"}}, envelope_hash="sha256:" + "1" * 64
    )
    start = {"step": 1, "name": "look", "argsHash": "sha256:" + "2" * 64}
    writer.append("STEP_START", start)
    assert store.find_steps("sha256:" + "1" * 64, "look") == []
    writer.append("STEP_END", {**start, "outcome": "success"})
    assert store.find_steps("sha256:" + "1" * 64, "look") == [
        StepRef(writer.execution_id, 1)
    ]
    writer.close()


def test_a_damaged_step_row_is_never_answered_from(tmp_path: Path) -> None:
    """A step row that fails its checksum: the catalog is rebuilt, then asked."""
    store = FileExecutionStore(tmp_path)
    ids = _route(store, [1, 2, 1])
    store.close()
    with sqlite3.connect(tmp_path / "catalog.sqlite3") as db:
        db.execute("UPDATE steps SET step = step + 10 WHERE name = 'look'")
    store = FileExecutionStore(tmp_path)
    assert _answers(store, ids) == _expected(ids)
    assert list(tmp_path.glob("catalog.sqlite3.corrupt-*"))  # moved aside
    store.close()
