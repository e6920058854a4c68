"""The file store's usage index asked for a window: ``recorded_usage(since=...)``."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from intentusnet import FileExecutionStore, IntentRouter

USAGE = {"provider": "openai", "model": "m1", "inputTokens": 9, "outputTokens": 4}


def test_usage_since_keeps_the_records_created_then_or_later(tmp_path: Path) -> None:
    """Records before ``since`` are left out; ``since=None`` keeps them all."""
    store = FileExecutionStore(tmp_path / "r")
    with IntentRouter(store=store) as router:
        router.agent("llm", name="llm")(
            lambda env, ctx: {"usage": USAGE, "n": env.payload}
        )
        old = router.route_intent({"intent": {"name": "llm"}, "payload": {"n": 1}})
        middle = datetime.now(UTC)
        new = router.route_intent({"intent": {"name": "llm"}, "payload": {"n": 2}})
    first, second = old.metadata.execution_id, new.metadata.execution_id
    assert set(store.recorded_usage()) == {first, second}
    assert set(store.recorded_usage(since=middle)) == {second}
    later = datetime.now(UTC) + timedelta(minutes=1)
    assert store.recorded_usage(since=later) == {}
    naive = middle.replace(tzinfo=None)  # read as UTC, as list() reads it
    assert set(store.recorded_usage(since=naive)) == {second}
    store.close()
