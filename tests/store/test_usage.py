"""The LLM usage of records, as the file store's catalog keeps it."""

from __future__ import annotations

from pathlib import Path

from intentusnet import FileExecutionStore, IntentRouter, ReplayCache
from intentusnet.cache.seams import UsageIndex
from intentusnet.store.usage import (
    RecordedUsage,
    UsageTotal,
    recorded_usage,
    usage_from_text,
)

USAGE = {"provider": "openai", "model": "m1", "inputTokens": 9, "outputTokens": 4}


def _fill(store: FileExecutionStore) -> None:
    """Three LLM answers (one an answer model only), one plain, one failed."""
    with IntentRouter(store=store, cache=ReplayCache()) as router:
        router.agent("llm", name="llm")(lambda env, ctx: {"usage": env.payload["u"]})
        router.agent("plain", name="plain")(lambda env, ctx: {"n": 1})

        @router.agent("boom", name="boom")
        def boom(env: object, ctx: object) -> dict[str, object]:
            raise RuntimeError("no answer, no usage")

        for u in (
            USAGE,
            {**USAGE, "inputTokens": 1},
            {"provider": "anthropic", "responseModel": "c", "outputTokens": 2},
        ):
            router.route_intent({"intent": {"name": "llm"}, "payload": {"u": u}})
        router.route_intent({"intent": {"name": "plain"}})
        router.route_intent({"intent": {"name": "boom"}})


def _loaded(store: FileExecutionStore) -> dict[str, RecordedUsage]:
    """The usage read from every record file, the slow way."""
    found = {}
    for summary in store.list():
        usage = recorded_usage(store.load(summary.execution_id).final_response)
        if usage is not None:
            found[summary.execution_id] = usage
    return found


TOTALS = [UsageTotal("anthropic", "c", 1, 0, 2), UsageTotal("openai", "m1", 2, 10, 8)]


def _everything(store: FileExecutionStore) -> dict[str, RecordedUsage]:
    """usage_of() every record the store lists."""
    return store.usage_of(s.execution_id for s in store.list())


def test_catalog_keeps_usage_of_completed_records(tmp_path: Path) -> None:
    """usage_of() and usage_totals() answer from the catalog what the records hold."""
    store = FileExecutionStore(tmp_path / "records")
    _fill(store)
    assert isinstance(store, UsageIndex)
    found = _everything(store)
    assert found == _loaded(store)
    assert sorted(found.values()) == [
        RecordedUsage("anthropic", "c", 0, 2),
        RecordedUsage("openai", "m1", 1, 4),
        RecordedUsage("openai", "m1", 9, 4),
    ]
    assert store.usage_totals() == TOTALS
    assert store.usage_of(["no-such-record"]) == {}
    store.close()


def test_totals_follow_deleted_records(tmp_path: Path) -> None:
    """A deleted record leaves the running totals; a null model is a row too."""
    store = FileExecutionStore(tmp_path / "records")
    _fill(store)
    with IntentRouter(store=store) as router:
        router.agent("llm", name="llm")(lambda env, ctx: {"usage": env.payload["u"]})
        unnamed = {"provider": "openai", "inputTokens": 5, "outputTokens": 6}
        router.route_intent({"intent": {"name": "llm"}, "payload": {"u": unnamed}})
    assert UsageTotal("openai", None, 1, 5, 6) in store.usage_totals()
    ninth = next(i for i, u in _everything(store).items() if u.input_tokens == 9)
    store.delete(ninth)
    assert store.usage_totals() == [
        UsageTotal("anthropic", "c", 1, 0, 2),
        UsageTotal("openai", None, 1, 5, 6),
        UsageTotal("openai", "m1", 1, 1, 4),
    ]
    store.close()


def test_usage_survives_a_rebuilt_catalog(tmp_path: Path) -> None:
    """reindex() and a lost catalog rebuild the usage column from the files."""
    root = tmp_path / "records"
    store = FileExecutionStore(root)
    _fill(store)
    before = _everything(store)
    assert store.usage_totals() == TOTALS
    assert store.reindex() == 5
    assert _everything(store) == before
    assert store.usage_totals() == TOTALS
    store.close()
    for name in ("catalog.sqlite3", "catalog.sqlite3-wal", "catalog.sqlite3-shm"):
        (root / name).unlink(missing_ok=True)
    again = FileExecutionStore(root)
    assert _everything(again) == before
    assert again.usage_totals() == TOTALS
    again.close()


def test_an_empty_store_has_no_usage(tmp_path: Path) -> None:
    """A store directory that does not exist has no usage (and is not made)."""
    store = FileExecutionStore(tmp_path / "none")
    assert store.usage_totals() == []
    assert store.usage_of(["x"]) == {}
    assert not (tmp_path / "none").exists()


def test_usage_text_round_trips() -> None:
    """The catalog's text is read back as the same usage; None stays None."""
    assert usage_from_text(None) is None
    assert usage_from_text('["openai","m",3,4]') == RecordedUsage("openai", "m", 3, 4)


def test_damaged_totals_are_rebuilt_not_answered(tmp_path: Path) -> None:
    """A total changed behind the store's back fails its checksum: rebuilt."""
    import sqlite3

    root = tmp_path / "records"
    store = FileExecutionStore(root)
    _fill(store)
    store.close()
    with sqlite3.connect(root / "catalog.sqlite3") as db:
        db.execute("UPDATE usage_totals SET input_tokens = 999 WHERE model = 'm1'")
    again = FileExecutionStore(root)
    assert again.usage_totals() == TOTALS
    again.close()
