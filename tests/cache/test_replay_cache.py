"""The replay cache in front of the router: hits, misses, directives, policy, safety."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import diskcache
import orjson
import pytest

from intentusnet import (
    FileExecutionStore,
    IntentEnvelope,
    IntentRouter,
    MemoryExecutionStore,
    compute_hash,
)
from intentusnet.cache.replay_cache import CacheKey, CachePolicy, ReplayCache
from intentusnet.envelope import AgentResponse, CacheDirective
from intentusnet.errors import CacheError


class Echo:
    """An agent for intent 'echo' that counts its calls."""

    def __init__(self, delay: float = 0.0, fail: bool = False) -> None:
        self.calls = 0
        self.delay = delay
        self.fail = fail
        self._lock = threading.Lock()

    def __call__(self, env: IntentEnvelope, ctx: object) -> dict[str, object]:
        with self._lock:
            self.calls += 1
            n = self.calls
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            raise RuntimeError("model overloaded")
        return {"echo": env.payload, "call": n}


def envelope(text: str = "hi", tenant: str | None = None, cache: str = "default"):
    return {
        "intent": {"name": "echo"},
        "payload": {"text": text},
        "context": {"tenant": tenant},
        "routing": {"cache": cache},
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[FileExecutionStore]:
    """A file store in a temporary directory."""
    s = FileExecutionStore(tmp_path / "records")
    yield s
    s.close()


def routed(store, agent=None, **options) -> tuple[IntentRouter, Echo]:
    """A router with an 'echo' agent and a fresh cache over ``store``."""
    agent = agent or Echo()
    router = IntentRouter(store=store, cache=ReplayCache(**options))
    router.agent("echo", name="echo")(agent)
    return router, agent


def record_files(store: FileExecutionStore) -> int:
    return len(list(store.root.glob("??/*.jsonl")))


def test_hit_returns_recorded_answer_without_running_the_agent(store):
    """A repeat is answered from the record: from_replay, original id, no agent."""
    router, agent = routed(store)
    with router:
        first = router.route_intent(envelope())
        second = router.route_intent(envelope())
    assert agent.calls == 1
    assert first.metadata.from_replay is False
    assert second.metadata.from_replay is True
    assert second.metadata.original_execution_id == first.metadata.execution_id
    assert second.payload == first.payload
    assert second.status == "success"
    assert record_files(store) == 1


def test_volatile_fields_do_not_prevent_a_hit(store):
    """Request id, caller and tags are not hashed: a new request id still hits."""
    router, agent = routed(store)
    with router:
        router.route_intent(envelope())
        other = {**envelope(), "metadata": {"requestId": "req-other"}}
        other["context"] = {"caller": "someone-else", "tags": ["x"]}
        assert router.route_intent(other).metadata.from_replay
    assert agent.calls == 1


def test_miss_routes_and_records(store):
    """A different payload misses: the agent runs and a record is written."""
    router, agent = routed(store)
    with router:
        router.route_intent(envelope("a"))
        response = router.route_intent(envelope("b"))
    assert agent.calls == 2
    assert response.metadata.from_replay is False
    assert record_files(store) == 2


def test_async_route_hits(store):
    """The async route uses the same cache as route_intent."""
    router, agent = routed(store)

    async def main() -> tuple[bool, bool]:
        a = await router.route(envelope())
        b = await router.route(envelope())
        return a.metadata.from_replay, b.metadata.from_replay

    with router:
        assert asyncio.run(main()) == (False, True)
        assert router.route_intent(envelope()).metadata.from_replay
    assert agent.calls == 1


def test_hit_through_middleware(store):
    """Middleware wraps the cache: it sees the answer served from the cache."""
    seen: list[bool] = []

    async def watch(env, call_next):
        response = await call_next(env)
        seen.append(response.metadata.from_replay)
        return response

    router, agent = routed(store)
    router.use(watch)
    with router:
        router.route_intent(envelope())
        router.route_intent(envelope())
    assert seen == [False, True]
    assert agent.calls == 1


def test_bypass_does_not_read_but_refreshes_the_answer(store):
    """bypass runs the agent and its new record becomes the cached answer."""
    router, agent = routed(store)
    with router:
        router.route_intent(envelope())
        fresh = router.route_intent(envelope(cache="bypass"))
        again = router.route_intent(envelope())
    assert agent.calls == 2
    assert fresh.metadata.from_replay is False
    assert again.metadata.original_execution_id == fresh.metadata.execution_id
    assert again.payload == {"echo": {"text": "hi"}, "call": 2}


def test_no_store_reads_but_does_not_become_the_answer(store):
    """no_store is served a cached answer, but its own answer is not cached."""
    router, agent = routed(store)
    with router:
        own = router.route_intent(envelope("x", cache="no_store"))
        assert own.metadata.from_replay is False
        after = router.route_intent(envelope("x"))
        assert after.metadata.from_replay is False  # no_store's answer not kept
        served = router.route_intent(envelope("x", cache="no_store"))
    assert served.metadata.from_replay is True
    assert served.metadata.original_execution_id == after.metadata.execution_id
    assert agent.calls == 2


class Clock:
    """The cache's clock, moved by the test: epoch seconds, starting now."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


def test_ttl_expiry(store):
    """An answer older than ttl is not served, not even from the store."""
    clock = Clock()
    router, agent = routed(store, ttl=60, clock=clock)
    with router:
        router.route_intent(envelope())
        clock.now += 59
        assert router.route_intent(envelope()).metadata.from_replay
        clock.now += 2
        assert router.route_intent(envelope()).metadata.from_replay is False
    assert agent.calls == 2


def test_ttl_counts_for_entries_read_from_disk(store, tmp_path):
    """A cold cache over the same directory serves an entry until its ttl, not after."""
    clock = Clock()
    directory = tmp_path / "cache"
    router, agent = routed(store, directory=directory, ttl=60, clock=clock)
    with router:
        router.route_intent(envelope())
    stored_at = clock.now
    for later, served in ((59, True), (61, False)):
        clock.now = stored_at + later
        cold, _ = routed(
            store,
            agent,
            directory=directory,
            ttl=60,
            clock=clock,
            warm_from_store=False,
        )
        with cold:
            assert cold.route_intent(envelope()).metadata.from_replay is served
    assert agent.calls == 2


def test_max_age_applies_to_records_found_in_the_store(store):
    """A record older than max_age is not adopted from the store."""
    first, agent = routed(store)
    with first:
        first.route_intent(envelope())
    clock = Clock()
    clock.now += 120
    router, _ = routed(store, agent, policy=CachePolicy(max_age=60), clock=clock)
    with router:
        assert router.route_intent(envelope()).metadata.from_replay is False
        assert router.route_intent(envelope()).metadata.from_replay is True
    assert agent.calls == 2


def test_eviction_at_size_limit(store, tmp_path):
    """Beyond size_limit the oldest entries are evicted from the disk tier."""
    big = "x" * 40_000  # values this big are kept as files by diskcache
    directory = tmp_path / "cache"
    router, _agent = routed(store, directory=directory, size_limit=300_000)
    with router:
        for n in range(30):
            router.route_intent(envelope(f"{n} {big}"))
        stats = router.cache.stats()
    assert 0 < stats.entries < 30
    assert stats.bytes <= 300_000 + 200_000  # the limit, give or take a cull
    cold = ReplayCache(directory, store=store, warm_from_store=False)
    hashes = [
        compute_hash(IntentEnvelope.model_validate(envelope(f"{n} {big}")))
        for n in (0, 29)
    ]
    assert cold.get(hashes[0]) is None  # oldest: evicted
    assert cold.get(hashes[1]) is not None  # newest: kept


def test_error_responses_are_not_served_by_default(store):
    """An agent failure is recorded but not cached: the next request runs again."""
    agent = Echo(fail=True)
    router, _ = routed(store, agent)
    with router:
        first = router.route_intent(envelope())
        second = router.route_intent(envelope())
    assert first.status == second.status == "error"
    assert second.metadata.from_replay is False
    assert agent.calls == 2


def test_error_responses_served_when_the_policy_says_so(store):
    """CachePolicy(serve_errors=True) replays a recorded failure."""
    agent = Echo(fail=True)
    router, _ = routed(store, agent, policy=CachePolicy(serve_errors=True))
    with router:
        router.route_intent(envelope())
        second = router.route_intent(envelope())
    assert second.status == "error"
    assert second.metadata.from_replay is True
    assert agent.calls == 1


def test_invalidated_source_is_not_served(store):
    """Invalidating the source record (from any store object) stops its hits."""
    router, agent = routed(store)
    with router:
        first = router.route_intent(envelope())
        assert router.route_intent(envelope()).metadata.from_replay
        other = FileExecutionStore(store.root)  # as the CLI would
        other.invalidate(first.metadata.execution_id, "wrong answer")
        other.close()
        after = router.route_intent(envelope())
    assert after.metadata.from_replay is False
    assert agent.calls == 2


def test_invalidated_source_is_not_served_by_a_cold_cache(store):
    """A disk entry whose record was invalidated is dropped, not served."""
    router, agent = routed(store)
    with router:
        first = router.route_intent(envelope())
    store.invalidate(first.metadata.execution_id, "stale")
    again, _ = routed(store, agent)
    with again:
        assert again.route_intent(envelope()).metadata.from_replay is False
    assert agent.calls == 2


def test_deleted_source_is_not_served(store):
    """A deleted or pruned source record is never served."""
    router, agent = routed(store)
    with router:
        first = router.route_intent(envelope())
        store.delete(first.metadata.execution_id)
        assert router.route_intent(envelope()).metadata.from_replay is False
    assert agent.calls == 2


def test_tampered_source_is_not_served(store):
    """A record edited after it was cached fails verification and is not served."""
    router, agent = routed(store)
    with router:
        first = router.route_intent(envelope())
        (path,) = store.root.glob(f"*/{first.metadata.execution_id}.jsonl")
        data = bytearray(path.read_bytes())
        data[data.index(b'"echo"') + 1] ^= 0x01
        path.write_bytes(bytes(data))
        after = router.route_intent(envelope())
    assert after.metadata.from_replay is False
    assert agent.calls == 2


def test_incomplete_record_is_not_adopted(store):
    """A record without a final response is never served from the store."""
    env = IntentEnvelope.model_validate(envelope())
    writer = store.open(env.to_wire(), envelope_hash=compute_hash(env))
    writer.close()
    router, agent = routed(store)
    with router:
        assert router.route_intent(envelope()).metadata.from_replay is False
    assert agent.calls == 1


def test_tenants_never_see_each_others_answers(store):
    """The tenant is hashed: the same payload for two tenants runs twice."""
    router, agent = routed(store)
    with router:
        a = router.route_intent(envelope(tenant="acme"))
        b = router.route_intent(envelope(tenant="globex"))
        a2 = router.route_intent(envelope(tenant="acme"))
        b2 = router.route_intent(envelope(tenant="globex"))
        none = router.route_intent(envelope())
    assert agent.calls == 3
    assert not b.metadata.from_replay
    assert not none.metadata.from_replay
    assert a2.metadata.original_execution_id == a.metadata.execution_id
    assert b2.metadata.original_execution_id == b.metadata.execution_id
    assert a.payload["call"] != b.payload["call"]


def test_single_flight_threads(store):
    """20 identical concurrent route_intent calls run the agent once."""
    agent = Echo(delay=0.3)
    router, _ = routed(store, agent)
    start = threading.Barrier(20)

    def call(_n: int):
        start.wait()
        return router.route_intent(envelope())

    with router, ThreadPoolExecutor(20) as pool:
        answers = list(pool.map(call, range(20)))
    assert agent.calls == 1
    assert sum(not a.metadata.from_replay for a in answers) == 1
    assert {a.payload["call"] for a in answers} == {1}
    assert record_files(store) == 1


def test_single_flight_async(store):
    """20 identical concurrent route() calls run an async agent once."""
    calls = 0

    async def slow(env, ctx):
        nonlocal calls
        calls += 1
        await asyncio.sleep(0.2)
        return {"ok": True}

    router = IntentRouter(store=store, cache=ReplayCache())
    router.agent("echo", name="slow")(slow)

    async def main():
        return await asyncio.gather(*(router.route(envelope()) for _ in range(20)))

    with router:
        answers = asyncio.run(main())
    assert calls == 1
    assert all(a.payload == {"ok": True} for a in answers)
    assert sum(a.metadata.from_replay for a in answers) == 19


def test_single_flight_leader_failure_lets_waiters_run(store):
    """A leader that raises (a middleware bug) does not leave waiters hanging."""
    boom = threading.Event()

    async def flaky(env, call_next):
        if not boom.is_set():
            boom.set()
            await asyncio.sleep(0.2)
            raise RuntimeError("middleware bug")
        return await call_next(env)

    router, agent = routed(store)
    router.use(flaky)
    with router, ThreadPoolExecutor(2) as pool:
        first = pool.submit(router.route_intent, envelope())
        time.sleep(0.05)
        second = pool.submit(router.route_intent, envelope())
        with pytest.raises(RuntimeError):
            first.result()
        assert second.result().status == "success"
    assert agent.calls == 1


def test_cold_cache_warms_from_the_store(store):
    """Records made without a cache are served by a new cache, which keeps them."""
    plain = IntentRouter(store=store)
    agent = Echo()
    plain.agent("echo", name="echo")(agent)
    with plain:
        made = plain.route_intent(envelope())
    router, _ = routed(store, agent)
    with router:
        hit = router.route_intent(envelope())
        assert router.cache.stats().entries == 1
    assert hit.metadata.original_execution_id == made.metadata.execution_id
    assert agent.calls == 1


def test_rebuild_from_the_store(store):
    """rebuild() writes one entry per hash, the newest servable record."""
    plain = IntentRouter(store=store)
    agent = Echo()
    plain.agent("echo", name="echo")(agent)
    with plain:
        plain.route_intent(envelope("a"))
        newest = plain.route_intent(envelope("a"))
        plain.route_intent(envelope("b"))
    cache = ReplayCache(store=store, warm_from_store=False)
    assert cache.rebuild() == 2
    served = cache.get(IntentEnvelope.model_validate(envelope("a")))
    assert served is not None
    assert served.metadata.original_execution_id == newest.metadata.execution_id


def test_corrupted_cache_database_is_rebuilt_on_open(store, tmp_path, caplog):
    """A cache.db that is not a database is moved aside and rebuilt from the store."""
    directory = tmp_path / "cache"
    router, agent = routed(store, directory=directory)
    with router:
        router.route_intent(envelope())
    router.cache.close()
    (directory / "cache.db").write_bytes(b"this is not a database" * 100)
    with caplog.at_level(logging.WARNING, logger="intentusnet.cache"):
        again, _ = routed(store, agent, directory=directory, warm_from_store=False)
    with again:
        assert again.route_intent(envelope()).metadata.from_replay
    assert agent.calls == 1
    assert "corrupt" in caplog.text
    assert list(tmp_path.glob("cache.corrupt-*"))


def test_corrupted_cache_database_while_running(store, tmp_path, caplog):
    """Corruption found on reconnecting never fails routing; it is rebuilt."""
    directory = tmp_path / "cache"
    router, agent = routed(store, directory=directory, warm_from_store=False)
    with router:
        router.route_intent(envelope("a"))
        router.cache.close()  # connections reopen on the next use
        with open(directory / "cache.db", "r+b") as db:
            db.write(b"\x00garbage" * 512)
        with caplog.at_level(logging.WARNING, logger="intentusnet.cache"):
            answer = router.route_intent(envelope("b"))
        assert answer.status == "success"
        assert router.route_intent(envelope("b")).metadata.from_replay
        # "a" was rebuilt from the store along with the rest
        router.cache._memory.clear()
        assert router.route_intent(envelope("a")).metadata.from_replay
    assert agent.calls == 2
    assert "corrupt" in caplog.text


def test_unusable_directory_is_a_cache_error(store, tmp_path):
    """A cache directory that cannot be created raises CacheError at bind time."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(CacheError):
        ReplayCache(blocker / "cache", store=store)


def test_hits_leave_a_trace_without_new_files(store):
    """Each hit adds a CACHE_HIT journal line pointing at the source, no record."""
    router, _ = routed(store)
    with router:
        first = router.route_intent(envelope())
        files = record_files(store)
        for _ in range(5):
            router.route_intent(envelope())
    assert record_files(store) == files
    hits = store.cache_hits()
    assert len(hits) == 5
    assert {h.source_execution_id for h in hits} == {first.metadata.execution_id}
    assert hits[0].envelope_hash == first.metadata.envelope_hash
    assert store.cache_hit_count() == 5


def test_record_hits_false_leaves_no_trace(store):
    """With record_hits=False a hit writes nothing at all."""
    router, _ = routed(store, record_hits=False)
    with router:
        router.route_intent(envelope())
        router.route_intent(envelope())
    assert store.cache_hits() == []
    assert not (store.root / "cache-hits").exists()


def test_policy_intents_list_and_predicate(store):
    """Only the intents the policy names are cached; others always run."""
    for intents in (["other"], lambda name: name != "echo"):
        router, agent = routed(store, policy=CachePolicy(intents=intents))
        with router:
            router.route_intent(envelope())
            assert router.route_intent(envelope()).metadata.from_replay is False
        assert agent.calls == 2


def test_stats_count_hits_misses_and_bytes(store):
    """stats() gives hits, misses, entries and bytes, persisted on close."""
    router, _ = routed(store, namespace="counted")
    with router:
        router.route_intent(envelope("a"))
        router.route_intent(envelope("a"))
        router.route_intent(envelope("b"))
        stats = router.cache.stats()
    assert (stats.hits, stats.misses, stats.entries) == (1, 2, 2)
    assert stats.bytes > 0
    router.cache.close()
    fresh = ReplayCache(store=store, namespace="counted").stats()
    assert (fresh.hits, fresh.misses) == (1, 2)


def test_namespaces_keep_entries_apart(store):
    """clear() of one namespace leaves another's entries alone."""
    a = ReplayCache(store=store, namespace="a", warm_from_store=False)
    b = ReplayCache(store=store, namespace="b", warm_from_store=False)
    agent = Echo()
    for cache in (a, b):
        with IntentRouter(store=store, cache=cache) as router:
            router.agent("echo", name="echo")(agent)
            router.route_intent(envelope())
    a.clear()
    assert a.stats().entries == 0
    assert b.stats().entries == 1


def test_memory_store_works_too():
    """The in-memory store backs a cache (its directory is temporary)."""
    store = MemoryExecutionStore()
    router, agent = routed(store)
    with router:
        router.route_intent(envelope())
        assert router.route_intent(envelope()).metadata.from_replay
        assert store.cache_hit_count() == 1
    assert agent.calls == 1


def test_cache_needs_a_store():
    """A cache without a store is refused; one cache serves one store."""
    with pytest.raises(ValueError, match="store"):
        IntentRouter(cache=ReplayCache())
    cache = ReplayCache(store=MemoryExecutionStore())
    with pytest.raises(ValueError, match="give each store its own cache"):
        IntentRouter(store=MemoryExecutionStore(), cache=cache)


@pytest.mark.parametrize(
    "options",
    [
        {"namespace": "a|b"},
        {"namespace": ""},
        {"ttl": 0},
        {"size_limit": 0},
        {"memory_items": 0},
    ],
)
def test_bad_options(options):
    """Bad namespaces, durations and sizes are refused with ValueError."""
    with pytest.raises(ValueError, match="must"):
        ReplayCache(**options)


def test_no_cache_router_is_unchanged(store):
    """Without a cache every request runs: the router never reads answers."""
    router = IntentRouter(store=store)
    agent = Echo()
    router.agent("echo", name="echo")(agent)
    with router:
        router.route_intent(envelope())
        assert router.route_intent(envelope()).metadata.from_replay is False
    assert agent.calls == 2


def test_child_intents_are_not_served_from_the_cache(store):
    """ctx.route runs its child under the id the parent recorded: no cache."""
    child = Echo()
    router = IntentRouter(store=store, cache=ReplayCache())
    router.agent("echo", name="echo")(child)

    @router.agent("parent", name="parent")
    def parent(env, ctx):
        answer = ctx.route({"intent": {"name": "echo"}, "payload": {"text": "hi"}})
        return {"child": answer.metadata.execution_id, "n": env.payload["n"]}

    with router:
        first = router.route_intent({"intent": {"name": "parent"}, "payload": {"n": 1}})
        second = router.route_intent(
            {"intent": {"name": "parent"}, "payload": {"n": 2}}
        )
    assert child.calls == 2
    for answer in (first, second):
        assert answer.payload is not None
        assert store.exists(answer.payload["child"])


def test_a_record_whose_signature_fails_is_never_served(tmp_path, caplog):
    """With keys, a forged (re-hashed) record is a logged miss; the agent runs."""
    from recordkit import reseal

    from intentusnet import KeyRing, SigningKey

    key = SigningKey.generate()
    store = FileExecutionStore(tmp_path / "records", signing_key=key)
    router, agent = routed(store, keys=KeyRing([key.public_key]))
    with router:
        first = router.route_intent(envelope())
        assert router.route_intent(envelope()).metadata.from_replay
        (path,) = store.root.glob(f"*/{first.metadata.execution_id}.jsonl")

        def forge(number, fields):
            if fields.get("type") == "FINAL_RESPONSE":
                fields["data"]["response"]["payload"] = {"echo": "forged"}

        path.write_bytes(reseal(path.read_bytes(), forge))
        with caplog.at_level(logging.WARNING, logger="intentusnet.cache"):
            third = router.route_intent(envelope())
    assert not third.metadata.from_replay
    assert third.payload["call"] == 2
    assert agent.calls == 2
    assert "not served: signed-invalid" in caplog.text
    store.close()


def test_source_edited_in_place_with_its_mtime_put_back_is_not_served(store):
    """An edit of the same size whose mtime is restored is still noticed (ctime)."""
    router, agent = routed(store)
    with router:
        first = router.route_intent(envelope())
        assert router.route_intent(envelope()).metadata.from_replay is True
        (path,) = store.root.glob(f"*/{first.metadata.execution_id}.jsonl")
        before = path.stat()
        with path.open("r+b") as file:  # as an editor saving in place would
            data = file.read()
            offset = data.rindex(b'"hi"') + 1
            file.seek(offset)
            file.write(b"H")
        os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
        after = path.stat()
        assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
            before.st_size,
            before.st_mtime_ns,
            before.st_ino,
        )
        again = router.route_intent(envelope())
    assert again.metadata.from_replay is False
    assert again.payload == {"echo": {"text": "hi"}, "call": 2}
    assert agent.calls == 2


class CountingStore(FileExecutionStore):
    """A file store that counts the records it loads."""

    loads = 0

    def load(self, execution_id):
        self.loads += 1
        return super().load(execution_id)


def test_a_cold_cache_serves_an_unchanged_record_from_its_entry(tmp_path):
    """A disk entry whose record has not changed is served without loading it."""
    store = CountingStore(tmp_path / "records")
    router, agent = routed(store)
    with router:
        first = router.route_intent(envelope())
    store.loads = 0
    again, _ = routed(store, agent)  # a new process's cache: only the disk tier
    with again:
        hit = again.route_intent(envelope())
        assert again.route_intent(envelope()).metadata.from_replay
    assert store.loads == 0
    assert agent.calls == 1
    assert hit.metadata.from_replay
    assert hit.metadata.original_execution_id == first.metadata.execution_id
    assert hit.payload == first.payload
    store.close()


def test_a_cold_cache_verifies_a_record_changed_since_its_entry(tmp_path):
    """A record edited after its entry was written (mtime put back) is not served."""
    store = CountingStore(tmp_path / "records")
    router, agent = routed(store)
    with router:
        first = router.route_intent(envelope())
    (path,) = store.root.glob(f"*/{first.metadata.execution_id}.jsonl")
    before = path.stat()
    with path.open("r+b") as file:
        data = file.read()
        file.seek(data.rindex(b'"hi"') + 1)
        file.write(b"H")
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    store.loads = 0
    again, _ = routed(store, agent)
    with again:
        after = again.route_intent(envelope())
    assert store.loads >= 1  # the entry did not vouch for it: loaded, and refused
    assert after.metadata.from_replay is False
    assert agent.calls == 2
    store.close()


def test_a_cold_cache_loads_the_record_for_keys_or_another_max_age(tmp_path):
    """Signatures to check, or another max_age, make a disk entry's record load."""
    from intentusnet import KeyRing, SigningKey

    key = SigningKey.generate()
    store = CountingStore(tmp_path / "records", signing_key=key)
    router, agent = routed(store)
    with router:
        router.route_intent(envelope())
    for options in (
        {"keys": KeyRing([key.public_key])},
        {"policy": CachePolicy(max_age=3600)},
    ):
        store.loads = 0
        again, _ = routed(store, agent, **options)
        with again:
            assert again.route_intent(envelope()).metadata.from_replay
        assert store.loads == 1, options
    assert agent.calls == 1
    store.close()


def test_an_entry_written_without_its_record_version_is_verified(tmp_path):
    """An entry written without recordVersion (as before) is verified, then served."""
    store = CountingStore(tmp_path / "records")
    router, agent = routed(store)
    with router:
        first = router.route_intent(envelope())
    name = "default|" + first.metadata.envelope_hash
    with diskcache.Cache(str(store.root / "replay-cache")) as disk:
        value = orjson.loads(disk.get(name))
        assert value["recordVersion"]
        del value["recordVersion"], value["maxAge"]
        disk.set(name, orjson.dumps(value))
    store.loads = 0
    again, _ = routed(store, agent)
    with again:
        assert again.route_intent(envelope()).metadata.from_replay
    assert store.loads == 1
    assert agent.calls == 1
    store.close()


def test_answer_after_a_missed_hit(store):
    """missed=True skips the lookup hit() made, yet serves what was stored since."""
    cache = ReplayCache()
    router = IntentRouter(store=store, cache=cache)
    agent = Echo()
    router.agent("echo", name="echo")(agent)
    env = IntentEnvelope.model_validate(envelope())
    key = CacheKey(compute_hash(env), "echo", "1.0", CacheDirective.DEFAULT)
    assert cache.hit(key) is None
    with router:
        first = router.route_intent(env)  # answered meanwhile, in this process
        ran: list[str] = []

        def run() -> AgentResponse:
            ran.append("ran")
            return router.route_intent(envelope(cache="bypass"))

        served = cache.answer(key, run, missed=True)
        assert ran == []
        assert served.metadata.original_execution_id == first.metadata.execution_id
        bypass = CacheKey(key.envelope_hash, "echo", "1.0", CacheDirective.BYPASS)
        fresh = cache.answer(bypass, run, missed=True)
    assert ran == ["ran"]  # a bypass runs, whatever the caller looked up
    assert fresh.metadata.from_replay is False
    assert agent.calls == 2


# -- answer and aanswer: one flow, driven by a sync and an async loop -----------------

COLOURS = ["sync", "async"]


def answered(cache: ReplayCache, key: CacheKey, execute, colour: str) -> AgentResponse:
    """``cache.answer`` of ``key`` (``colour`` "sync"), or ``aanswer`` in a loop."""
    if colour == "sync":
        return cache.answer(key, execute)

    async def aexecute() -> AgentResponse:
        return execute()

    return asyncio.run(cache.aanswer(key, aexecute))


def in_thread(call, *args) -> Future:
    """Run ``call(*args)`` on a daemon thread (one left hanging ends with the run)."""
    future: Future = Future()

    def run() -> None:
        try:
            future.set_result(call(*args))
        except BaseException as exc:
            future.set_exception(exc)

    threading.Thread(target=run, daemon=True).start()
    return future


def echo_router(store) -> tuple[IntentRouter, Echo]:
    """A router without a cache that records 'echo' executions in ``store``."""
    agent = Echo()
    router = IntentRouter(store=store)
    router.agent("echo", name="echo")(agent)
    return router, agent


def key_of(env: IntentEnvelope, directive: CacheDirective) -> CacheKey:
    return CacheKey(compute_hash(env), "echo", "1.0", directive)


@pytest.mark.parametrize("colour", COLOURS)
def test_bypass_and_no_store_through_either_answer(store, colour):
    """bypass runs and its answer is kept; no_store is served it, or runs unkept."""
    cache = ReplayCache(store=store)
    plain, agent = echo_router(store)
    kept_env = IntentEnvelope.model_validate(envelope("kept"))
    other_env = IntentEnvelope.model_validate(envelope("other", cache="no_store"))

    def never() -> AgentResponse:
        raise AssertionError("served from the cache: nothing runs")

    with plain:
        fresh = answered(
            cache,
            key_of(kept_env, CacheDirective.BYPASS),
            lambda: plain.route_intent(kept_env),
            colour,
        )
        served = answered(
            cache, key_of(kept_env, CacheDirective.NO_STORE), never, colour
        )
        unkept = answered(
            cache,
            key_of(other_env, CacheDirective.NO_STORE),
            lambda: plain.route_intent(other_env),
            colour,
        )
    assert fresh.metadata.from_replay is False
    assert served.metadata.original_execution_id == fresh.metadata.execution_id
    assert unkept.metadata.from_replay is False
    assert cache.get(kept_env) is not None
    assert cache.get(other_env) is None  # recorded, but not kept: no_store
    assert agent.calls == 2


@pytest.mark.parametrize("waiter", COLOURS)
@pytest.mark.parametrize("leader", COLOURS)
def test_a_leader_that_raises_lets_its_waiter_run_its_own(store, leader, waiter):
    """A leader's failure reaches it alone; the caller waiting on its flight runs."""
    cache = ReplayCache(store=store)
    plain, agent = echo_router(store)
    env = IntentEnvelope.model_validate(envelope())
    key = key_of(env, CacheDirective.DEFAULT)
    leading, release = threading.Event(), threading.Event()
    events: list[str] = []

    def failing() -> AgentResponse:
        leading.set()
        assert release.wait(10)
        events.append("leader raised")
        raise RuntimeError("leader failed")

    def running() -> AgentResponse:
        events.append("waiter ran")
        return plain.route_intent(env)

    with plain:
        first = in_thread(answered, cache, key, failing, leader)
        assert leading.wait(10)  # the leader runs: the waiter joins its flight
        second = in_thread(answered, cache, key, running, waiter)
        time.sleep(0.2)  # the waiter is waiting on the flight
        release.set()
        with pytest.raises(RuntimeError, match="leader failed"):
            first.result(timeout=10)
        answer = second.result(timeout=10)
    assert events == ["leader raised", "waiter ran"]
    assert answer.status == "success"
    assert answer.metadata.from_replay is False
    assert agent.calls == 1


class SharedFlightsStore(MemoryExecutionStore):
    """An in-memory store sharing flights with another process, played by the test.

    While ``held``, the other process holds every flight; ``asked`` is set once
    a flight was asked for; the flights given up are noted in ``ended``.
    """

    def __init__(self, *, held: bool) -> None:
        super().__init__()
        self.held = held
        self.asked = threading.Event()
        self.ended: list[str] = []

    def try_flight(self, envelope_hash: str) -> bool:
        self.asked.set()
        return not self.held

    def end_flight(self, envelope_hash: str) -> None:
        self.ended.append(envelope_hash)


@pytest.mark.parametrize("colour", COLOURS)
def test_a_flight_another_process_holds_is_waited_for_and_served(colour):
    """While another process runs the envelope, the leader waits for its record."""
    store = SharedFlightsStore(held=True)
    cache = ReplayCache(store=store)
    other, agent = echo_router(store)  # the process holding the flight
    env = IntentEnvelope.model_validate(envelope())

    def never() -> AgentResponse:
        raise AssertionError("the other process's record answers: nothing runs")

    def other_process_runs() -> AgentResponse:
        assert store.asked.wait(10)  # the leader has found the flight held
        return other.route_intent(env)

    with other:
        ran = in_thread(other_process_runs)
        answer = answered(cache, key_of(env, CacheDirective.DEFAULT), never, colour)
        recorded = ran.result(timeout=10)
    assert answer.metadata.from_replay is True
    assert answer.metadata.original_execution_id == recorded.metadata.execution_id
    assert store.ended == []  # it claimed nothing: it gives nothing up
    assert agent.calls == 1


def test_a_leader_cancelled_while_another_process_runs_frees_its_flight():
    """Cancelled while it waits for another process, a leader never strands callers."""
    store = SharedFlightsStore(held=True)
    cache = ReplayCache(store=store)
    plain, agent = echo_router(store)
    env = IntentEnvelope.model_validate(envelope())
    key = key_of(env, CacheDirective.DEFAULT)

    def never() -> AgentResponse:
        raise AssertionError("the cancelled leader runs nothing")

    async def cancelled_leader() -> None:
        task = asyncio.ensure_future(cache.aanswer(key, never))
        assert await asyncio.to_thread(store.asked.wait, 10)  # it waits now
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(cancelled_leader())
    store.held = False  # the other process gave the envelope up
    with plain:
        answer = in_thread(
            answered, cache, key, lambda: plain.route_intent(env), "sync"
        ).result(timeout=10)  # before the fix: waited forever on the flight
    assert answer.status == "success"
    assert agent.calls == 1


@pytest.mark.parametrize("fails", [False, True])
@pytest.mark.parametrize("colour", COLOURS)
def test_a_claimed_flight_is_given_up_once_run(colour, fails):
    """The leader that claimed a flight across processes gives it up after running."""
    store = SharedFlightsStore(held=False)
    cache = ReplayCache(store=store)
    plain, _ = echo_router(store)
    env = IntentEnvelope.model_validate(envelope())
    key = key_of(env, CacheDirective.DEFAULT)

    def execute() -> AgentResponse:
        if fails:
            raise RuntimeError("the call failed")
        return plain.route_intent(env)

    with plain:
        if fails:
            with pytest.raises(RuntimeError, match="the call failed"):
                answered(cache, key, execute, colour)
        else:
            assert answered(cache, key, execute, colour).status == "success"
    assert store.ended == [key.envelope_hash]
    assert (cache.get(env) is None) is fails
