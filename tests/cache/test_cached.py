"""@cached: plain and async functions recorded and answered from records."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from intentusnet import (
    FileExecutionStore,
    MemoryExecutionStore,
    ReplayEngine,
    compute_hash,
)
from intentusnet.cache.cached import cached
from intentusnet.cache.callrouter import CallRouter
from intentusnet.cache.replay_cache import CachePolicy, ReplayCache
from intentusnet.errors import CachedCallError, NotCacheable


@pytest.fixture
def store(tmp_path: Path):
    """A file store in a temporary directory."""
    s = FileExecutionStore(tmp_path / "records")
    yield s
    s.close()


def test_repeat_call_is_served_from_the_record(store):
    """The second call with equal arguments does not run the function."""
    calls = []

    @cached(store=store, intent="llm.complete")
    def complete(prompt: str, temperature: float = 0.0) -> dict[str, object]:
        calls.append(prompt)
        return {"text": prompt.upper(), "n": len(calls)}

    assert complete("hi") == {"text": "HI", "n": 1}
    assert complete("hi") == {"text": "HI", "n": 1}
    assert complete(prompt="hi", temperature=0.0) == {"text": "HI", "n": 1}
    assert complete("hi", 0.5) == {"text": "HI", "n": 2}
    assert calls == ["hi", "hi"]


def test_call_is_recorded_like_an_intent(store):
    """Arguments (defaults applied) form the payload; the result is replayable."""

    @cached(store=store, intent="llm.complete", version="2")
    def complete(prompt: str, temperature: float = 0.0) -> str:
        return prompt[::-1]

    complete("abc")
    (summary,) = store.list()
    assert (summary.intent_name, summary.intent_version) == ("llm.complete", "2")
    record = store.load(summary.execution_id)
    assert record.envelope["payload"] == {"prompt": "abc", "temperature": 0.0}
    assert ReplayEngine(record).replay().payload == {"result": "cba"}


def test_async_function(store):
    """An async function is awaited once; the repeat is served."""
    calls = 0

    @cached(store=store, intent="llm.acomplete")
    async def complete(prompt: str) -> list[str]:
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        return [prompt, prompt]

    async def main():
        return await complete("x"), await complete("x")

    assert asyncio.run(main()) == (["x", "x"], ["x", "x"])
    assert calls == 1


def test_non_json_argument_is_a_clear_error(store):
    """An argument JSON cannot carry fails at call time, naming the argument."""
    called = False

    @cached(store=store, intent="tool")
    def tool(query: str, when: object = None) -> str:
        nonlocal called
        called = True
        return query

    with pytest.raises(NotCacheable, match="argument 'when'") as caught:
        tool("q", when=object())
    assert caught.value.argument == "when"
    assert isinstance(caught.value, TypeError)
    with pytest.raises(NotCacheable, match="argument 'query'"):
        tool({"bad": float("nan")})  # type: ignore[arg-type]
    assert not called


def test_non_json_result_is_a_clear_error(store):
    """A result JSON cannot carry raises NotCacheable naming the return value."""

    @cached(store=store, intent="tool")
    def tool() -> object:
        return {1, 2}

    with pytest.raises(NotCacheable, match="return value"):
        tool()


def test_exceptions_reach_the_caller_and_are_not_cached(store):
    """The function's own exception is raised; the next call runs again."""
    calls = 0

    @cached(store=store, intent="flaky")
    def flaky(x: int) -> int:
        nonlocal calls
        calls += 1
        raise TimeoutError(f"slow {x}")

    for _ in range(2):
        with pytest.raises(TimeoutError, match="slow 1"):
            flaky(1)
    assert calls == 2
    assert [s.status.value for s in store.list()] == ["failed", "failed"]


def test_served_failure_raises_cached_call_error(store):
    """With serve_errors, a recorded failure from another process is raised."""

    def make():
        @cached(store=store, intent="flaky", policy=CachePolicy(serve_errors=True))
        def flaky(x: int) -> int:
            raise ValueError("no")

        return flaky

    with pytest.raises(ValueError, match="no"):
        make()(1)
    with pytest.raises(CachedCallError, match="ValueError") as caught:
        make()(1)  # a fresh decorator: the exception object is not at hand
    assert caught.value.error["code"] == "AGENT_ERROR"


def test_single_flight(store):
    """20 threads calling with equal arguments at once run the function once."""
    calls = 0
    lock = threading.Lock()

    @cached(store=store, intent="slow")
    def slow(x: int) -> int:
        nonlocal calls
        with lock:
            calls += 1
        time.sleep(0.3)
        return x * 2

    start = threading.Barrier(20)

    def call(_n: int) -> int:
        start.wait()
        return slow(21)

    with ThreadPoolExecutor(20) as pool:
        assert set(pool.map(call, range(20))) == {42}
    assert calls == 1


def test_tenant_is_hashed(store):
    """Two tenants with equal arguments each run the function."""
    calls = []

    def make(tenant: str):
        @cached(store=store, intent="t", tenant=tenant)
        def f(x: int) -> str:
            calls.append(tenant)
            return tenant

        return f

    a, b = make("acme"), make("globex")
    assert (a(1), b(1), a(1), b(1)) == ("acme", "globex", "acme", "globex")
    assert calls == ["acme", "globex"]


def test_hits_are_traced_and_counted(store):
    """Hits appear in the store's hit journal and in the cache's stats."""

    @cached(store=store, intent="counted")
    def f(x: int) -> int:
        return x

    f(1)
    f(1)
    f(1)
    (record,) = store.list()
    hits = store.cache_hits()
    assert len(hits) == 2
    assert {h.source_execution_id for h in hits} == {record.execution_id}
    stats = f.replay_cache.stats()  # type: ignore[attr-defined]
    assert (stats.hits, stats.misses) == (2, 1)


def test_uncached_intent_still_records(store):
    """An intent the policy does not cache runs every time, and is recorded."""
    calls = 0

    @cached(store=store, intent="live", policy=CachePolicy(intents=["other"]))
    def f() -> int:
        nonlocal calls
        calls += 1
        return calls

    assert (f(), f()) == (1, 2)
    assert len(store.list()) == 2


def test_shared_cache_and_option_conflicts(store):
    """A given cache is used as is; combining it with cache options is refused."""
    cache = ReplayCache(store=store, namespace="shared")

    @cached(intent="a", cache=cache)
    def f() -> int:
        return 1

    assert f() == 1
    assert f.replay_cache is cache  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        cached(intent="a", cache=cache, namespace="other")


def test_decorating_touches_no_disk(tmp_path, monkeypatch):
    """The default store and cache are created on the first call, not at import."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("INTENTUSNET_STORE", raising=False)

    @cached(intent="lazy")
    def f() -> int:
        return 7

    assert list(tmp_path.iterdir()) == []
    assert f() == 7
    assert (tmp_path / ".intentusnet" / "records" / "replay-cache").is_dir()


def test_served_failure_raises_cached_call_error_where_it_first_failed(store):
    """In the process that saw the failure, a served failure is CachedCallError too."""
    calls = 0

    @cached(store=store, intent="flaky", policy=CachePolicy(serve_errors=True))
    def flaky(x: int) -> int:
        nonlocal calls
        calls += 1
        raise ValueError("no")

    @cached(store=store, intent="aflaky", policy=CachePolicy(serve_errors=True))
    async def aflaky(x: int) -> int:
        nonlocal calls
        calls += 1
        raise ValueError("no")

    with pytest.raises(ValueError, match="no") as first:
        flaky(1)
    assert not isinstance(first.value, CachedCallError)
    for _ in range(2):
        with pytest.raises(CachedCallError, match="ValueError") as served:
            flaky(1)
        assert served.value.error["code"] == "AGENT_ERROR"
    with pytest.raises(ValueError, match="no"):
        asyncio.run(aflaky(1))
    with pytest.raises(CachedCallError, match="ValueError"):
        asyncio.run(aflaky(1))
    assert calls == 2


@pytest.mark.parametrize("tenant", [None, "acme"])
def test_call_key_is_the_hash_of_the_envelope_recorded(tenant):
    """A call's cache key is the hash of the envelope it is recorded with."""
    calls = CallRouter(
        MemoryExecutionStore(),
        intent="llm.complete",
        version="2",
        agent="complete",
        is_async=False,
    )
    payload = {"prompt": "hi", "temperature": 1.0, "tags": ["a"]}
    key = calls.key(payload, tenant=tenant)
    envelope = calls.envelope(payload, "req-1", tenant=tenant)
    assert envelope.context.tenant == tenant
    assert key.envelope_hash == compute_hash(envelope)
