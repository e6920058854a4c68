"""The replay cache: an earlier answer to an equal envelope, without running agents.

``IntentRouter(store=store, cache=ReplayCache())`` looks every envelope's hash up
before a record is opened or an agent runs (DESIGN §1, step 2). A hit returns
the recorded answer marked ``from_replay``; a miss routes as usual and its
record becomes the cached answer.

Two tiers answer a lookup. The memory tier (a bounded dict per cache object)
holds answers already served by this process; each hit there costs one
``stat()`` of the source record, so an invalidated, deleted or edited record is
noticed at once, whichever process changed it. The disk tier (diskcache,
bounded by ``size_limit``) maps hashes to execution ids and answers across
processes and restarts. An entry moving from disk to memory is served as it is
when its record's change probe still says what the entry noted (the memory
tier's check); otherwise, and always when signatures are to be checked, its
record is loaded and verified first. A cold cache falls back to the store's
catalog (``find_by_hash``) and warms itself; ``rebuild()`` refills it from the
store.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures as cf
import logging
import math
import shutil
import tempfile
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Generator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Final, Protocol, TypeAlias, cast

from .._util.jsonvalue import JSONObject
from ..envelope import AgentResponse, CacheDirective, IntentEnvelope
from ..errors import IntentusNetError
from ..hashing import compute_hash
from ..store.hits import Hit
from ..store.protocol import ExecutionStore
from . import flight as _flight
from .disk import CACHE_DIR as CACHE_DIR
from .disk import CacheStats as CacheStats
from .disk import DiskTier, counter_key
from .disk import read_stats as read_stats
from .entry import Entry, decode, encode, unchanged, verify
from .policy import CacheKey as CacheKey
from .policy import CachePolicy as CachePolicy
from .policy import seconds
from .seams import CacheHitJournal, SharedFlights

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord
    from ..record.signing import KeyRing

__all__ = ["CacheKey", "CachePolicy", "CacheStats", "ReplayCache", "read_stats"]

_log = logging.getLogger("intentusnet.cache")


class _Store(ExecutionStore, CacheHitJournal, Protocol):
    """What the cache serves from: a store of records that keeps a hit journal."""


DEFAULT_SIZE_LIMIT: Final = 1 << 30
DEFAULT_MEMORY_ITEMS: Final = 4096
#: Persisted hit and miss counts are brought up to date at most this often.
_FLUSH_EVERY_S: Final = 1.0
#: How long a process waiting for another's flight first sleeps, and at most.
_POLL_FIRST_S: Final = 0.002
_POLL_MAX_S: Final = 0.05
# What one try at a flight across processes found (see ReplayCache._claim).
_SERVED, _CLAIMED, _RUN, _WAIT = "served", "claimed", "run", "wait"

#: What the answering flow yields for the caller's ``execute`` to run (its
#: other requests are a flight to wait on, a pause in seconds).
_EXECUTE: Final = None
#: The answering flow: what it asks for, what it is sent, what it returns.
_Answering: TypeAlias = Generator[
    "cf.Future[AgentResponse] | float | None", "AgentResponse | None", AgentResponse
]
_DEFAULT: Final = CacheDirective.DEFAULT
_BYPASS: Final = CacheDirective.BYPASS
_CACHES: weakref.WeakSet[ReplayCache] = weakref.WeakSet()


class ReplayCache:
    """Answers equal envelopes from earlier records instead of running agents.

    Args:
        directory: the diskcache directory; ``<store root>/replay-cache`` by
            default (a temporary directory for a store without a root).
        store: the store whose records are served; the router binds its own
            store when none is given here.
        namespace: separates entries, counts and ``clear()`` of caches sharing a
            directory (not ``|``). Records are shared: a cold namespace still
            warms itself from the store unless ``warm_from_store=False``.
        size_limit: bytes the disk tier may take; the oldest stored entries are
            evicted beyond it.
        ttl: entries expire this long after they were stored (a ``timedelta``
            or seconds); never by default.
        policy: which answers are cached (see :class:`CachePolicy`).
        record_hits: leave a ``CACHE_HIT`` line in the store's hit journal for
            every hit (one ``write()``, no new file).
        memory_items: answers kept in this process's memory tier.
        warm_from_store: on a miss in both tiers, look the hash up in the store.
        keys: check the signatures of every record before serving its answer
            (added in 0.1.0): a record the ring does not accept is never
            served (a miss, logged); see ``KeyRing``.
        clock: the current time in epoch seconds, which ``ttl`` and
            ``max_age`` deadlines are compared with (added in 0.1.0); tests
            pass a fake one to move time without waiting.

    Raises:
        ValueError: a bad namespace, size or duration.
        CacheError: the directory cannot be used.

    Added in 0.1.0.
    """

    def __init__(
        self,
        directory: str | Path | None = None,
        *,
        store: ExecutionStore | None = None,
        namespace: str = "default",
        size_limit: int = DEFAULT_SIZE_LIMIT,
        ttl: timedelta | float | None = None,
        policy: CachePolicy | None = None,
        record_hits: bool = True,
        memory_items: int = DEFAULT_MEMORY_ITEMS,
        warm_from_store: bool = True,
        keys: KeyRing | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not namespace or "|" in namespace:
            raise ValueError(
                f"namespace must be non-empty and hold no '|': {namespace!r}"
            )
        if size_limit <= 0:
            raise ValueError(f"size_limit must be > 0 bytes, not {size_limit}")
        if memory_items < 1:
            raise ValueError(f"memory_items must be >= 1, not {memory_items}")
        self.namespace = namespace
        self.policy = policy if policy is not None else CachePolicy()
        self.ttl = seconds(ttl, "ttl")
        self.record_hits = record_hits
        self.size_limit = size_limit
        self._directory = None if directory is None else Path(directory)
        self._memory_items = memory_items
        self._warm = warm_from_store
        self._keys = keys
        self._clock = clock
        self._prefix = namespace + "|"
        self._store: _Store | None = None
        self._shared: SharedFlights | None = None
        self._disk: DiskTier | None = None
        self._memory: dict[str, Entry] = {}
        self._lock = threading.Lock()
        self._flights: _flight.Flights[AgentResponse] = _flight.Flights()
        self._hits = self._misses = 0
        self._flushed = (0, 0)
        self._flushed_at = time.monotonic()
        self._trace_failed = False
        if store is not None:
            self.bind(store)
        _CACHES.add(self)

    def __repr__(self) -> str:
        where = None if self._disk is None else str(self._disk.directory)
        return f"ReplayCache({where!r}, namespace={self.namespace!r})"

    @property
    def directory(self) -> Path | None:
        """The disk tier's directory, once bound to a store."""
        return None if self._disk is None else self._disk.directory

    @property
    def store(self) -> ExecutionStore | None:
        """The store whose records this cache serves."""
        return self._store

    def bind(self, store: ExecutionStore) -> None:
        """Serve the records of ``store`` (the router calls this).

        Raises:
            ValueError: the cache already serves another store.
            TypeError: ``store`` lacks what a cache needs (``change_probe``,
                ``record_cache_hit``).
            CacheError: the directory cannot be used.
        """
        if self._store is store:
            return
        if self._store is not None:
            raise ValueError(
                f"this ReplayCache serves store {self._store.root}; give each "
                "store its own cache"
            )
        missing = [
            name
            for name in ("change_probe", "record_cache_hit", "find_by_hash", "load")
            if not callable(getattr(store, name, None))
        ]
        if missing or not isinstance(store, CacheHitJournal):
            raise TypeError(
                f"{type(store).__name__} cannot back a ReplayCache: it has no "
                + ", ".join(missing or ["cache-hit journal"])
            )
        directory = self._directory
        if directory is None:
            if store.directory is None:
                # A store that keeps nothing on disk: neither does its cache,
                # beyond this object's life.
                temporary = tempfile.mkdtemp(prefix="intentusnet-cache-")
                weakref.finalize(self, shutil.rmtree, temporary, ignore_errors=True)
                directory = Path(temporary)
            else:
                directory = store.directory / CACHE_DIR
        self._store = store
        # Across processes, waiters take the leader's answer from the store.
        self._shared = (
            store if self._warm and isinstance(store, SharedFlights) else None
        )
        self._disk = DiskTier(directory, self.size_limit, on_reset=self._after_reset)
        if self._disk.was_reset:
            self._after_reset()

    # -- serving ----------------------------------------------------------------

    def serve(
        self,
        env: IntentEnvelope,
        execute: Callable[[IntentEnvelope], AgentResponse],
    ) -> AgentResponse:
        """Answer ``env`` from the cache, or by ``execute(env)`` (the router's seam)."""
        key = self._key(env)
        if key is None:
            return execute(env)
        return self.answer(key, lambda: execute(env))

    async def aserve(
        self,
        env: IntentEnvelope,
        execute: Callable[[IntentEnvelope], Awaitable[AgentResponse]],
    ) -> AgentResponse:
        """The async ``serve``."""
        key = self._key(env)
        if key is None:
            return await execute(env)
        return await self.aanswer(key, lambda: execute(env))

    def _key(self, env: IntentEnvelope) -> CacheKey | None:
        """The key ``env`` is served under; None if the policy caches none."""
        intent = env.intent
        if not self.policy.allows(intent.name):
            return None
        return CacheKey(
            compute_hash(env),
            intent.name,
            intent.version,
            env.routing.cache,
            env.metadata.request_id,
        )

    def answer(
        self,
        key: CacheKey,
        execute: Callable[[], AgentResponse],
        *,
        missed: bool = False,
    ) -> AgentResponse:
        """Serve ``key`` from the cache, or run ``execute`` once for all askers.

        ``bypass`` never reads and always runs; ``no_store`` reads, and runs
        without making its answer the cached one. ``missed``: the caller has
        just found no answer with :meth:`hit`, so the tiers are not read again
        before the flight is joined (an answer stored meanwhile is still
        found: the flight's leader looks once more). Added in 0.1.0.
        """
        served = None if missed else self._at_once(key)
        if served is not None:
            return served
        flow = self._answering(key)
        got: AgentResponse | None = None
        try:
            while True:
                try:
                    ask = flow.send(got)
                except StopIteration as done:
                    answer: AgentResponse = done.value
                    return answer
                if ask is _EXECUTE:
                    got = execute()
                elif isinstance(ask, float):
                    time.sleep(ask)
                    got = None
                else:
                    got = _flight.wait(ask)
        finally:
            flow.close()  # after a failure: the flow's own clean-up runs

    async def aanswer(
        self,
        key: CacheKey,
        execute: Callable[[], Awaitable[AgentResponse]],
        *,
        missed: bool = False,
    ) -> AgentResponse:
        """The async ``answer``: flights are shared with sync callers too."""
        served = None if missed else self._at_once(key)
        if served is not None:
            return served
        flow = self._answering(key)
        got: AgentResponse | None = None
        try:
            while True:
                try:
                    ask = flow.send(got)
                except StopIteration as done:
                    answer: AgentResponse = done.value
                    return answer
                if ask is _EXECUTE:
                    got = await execute()
                elif isinstance(ask, float):
                    await asyncio.sleep(ask)
                    got = None
                else:
                    got = await _flight.await_(ask)
        finally:
            flow.close()

    def _at_once(self, key: CacheKey) -> AgentResponse | None:
        """A hit, served before any flow starts (a bypass has none)."""
        return None if key.directive is _BYPASS else self.hit(key)

    def _answering(self, key: CacheKey) -> _Answering:
        """The flow of ``answer`` and ``aanswer`` after a miss; they drive it.

        It yields what it waits for: ``_EXECUTE``, to be sent what the caller's
        ``execute`` returned; a flight, to be sent its answer (None: its leader
        gave up); a pause in seconds, to be sent None. A driver that fails
        doing what was asked closes the flow: its clean-up runs, and what the
        driver raised goes on.
        """
        if key.directive is _BYPASS:
            self._count_miss()
            return self._keep(key, cast(AgentResponse, (yield _EXECUTE)))
        while True:
            flight, leader = self._flights.join(
                key.envelope_hash, lead=key.directive is _DEFAULT
            )
            if flight is None:  # no_store, and nothing in flight
                self._count_miss()
                return cast(AgentResponse, (yield _EXECUTE))
            if leader:  # the leader looks once more, in its own flow
                return (yield from self._leading(key, flight))
            shared = yield flight
            if shared is not None:
                return self._share(shared, key)
            served = self.hit(key)  # the leader gave up: look, then try again
            if served is not None:
                return served

    def _leading(self, key: CacheKey, flight: cf.Future[AgentResponse]) -> _Answering:
        """The flow of a flight's leader: it runs ``execute`` unless answered."""
        envelope_hash = key.envelope_hash
        claimed = False
        # Whatever stops the leader (its run failing, a cancellation while it
        # waits for another process, a failed serve) aborts its flight: the
        # callers waiting on it run their own instead of waiting forever.
        try:
            entry = self._find_in_memory(envelope_hash)
            if entry is None:  # not answered between our lookup and our flight
                delay = _POLL_FIRST_S
                while (state := self._claim(envelope_hash))[0] == _WAIT:
                    yield delay  # another process runs it: wait for its record
                    delay = min(2 * delay, _POLL_MAX_S)
                claimed, entry = state[0] == _CLAIMED, state[1]
            if entry is not None:
                response = self._serve(entry, key)
            else:
                self._count_miss()
                response = self._keep(key, cast(AgentResponse, (yield _EXECUTE)))
        except BaseException:
            self._flights.abort(envelope_hash, flight)
            raise
        finally:
            if claimed:
                self._unclaim(envelope_hash)
        self._flights.land(envelope_hash, flight, response)
        return response

    def _claim(self, envelope_hash: str) -> tuple[str, Entry | None]:
        """One try at running ``envelope_hash`` alone among the store's processes.

        Returns ``(_SERVED, entry)``: answered meanwhile, by any process;
        ``(_CLAIMED, None)``: ours to run, release with :meth:`_unclaim`;
        ``(_RUN, None)``: ours to run, with nothing to release (the store
        shares no flights, or could not be asked); ``(_WAIT, None)``: another
        process is running it.
        """
        shared = self._shared
        if shared is None:
            return _RUN, None
        try:
            claimed = shared.try_flight(envelope_hash)
        except (IntentusNetError, OSError) as exc:
            _log.warning("cache: could not claim a flight (%s); running it", exc)
            return _RUN, None
        entry = self._find_slow(envelope_hash)
        if entry is not None:
            if claimed:
                self._unclaim(envelope_hash)
            return _SERVED, entry
        return (_CLAIMED if claimed else _WAIT), None

    def _unclaim(self, envelope_hash: str) -> None:
        if self._shared is not None:
            self._shared.end_flight(envelope_hash)

    def get(self, env: IntentEnvelope | str) -> AgentResponse | None:
        """The answer the cache would serve for an envelope (or hash), or None.

        A look only: no hit is counted or recorded.
        """
        envelope_hash = env if isinstance(env, str) else compute_hash(env)
        entry = self._find(envelope_hash)
        return None if entry is None else entry.response

    def hit(self, key: CacheKey) -> AgentResponse | None:
        """Serve ``key`` if the cache holds an answer, else None, running nothing.

        A hit is counted and recorded as with ``answer``; a miss is not
        counted: the caller goes on to ``answer``, which counts it. Added in
        0.1.0.
        """
        entry = self._find(key.envelope_hash)
        return None if entry is None else self._serve(entry, key)

    def find(self, key: CacheKey, *, serve_errors: bool) -> AgentResponse | None:
        """Serve ``key`` if any record answers it, without running anything.

        With ``serve_errors`` a recorded error is served even when the policy
        does not cache errors (replay-only mode replays what happened).
        A hit is counted and recorded; a miss is counted.
        """
        entry = self._find(key.envelope_hash)
        if entry is not None:
            return self._serve(entry, key)
        if serve_errors and self._store is not None:
            record = self._lookup_store(key.envelope_hash)
            if record is not None:
                found = self._verify(
                    record.execution_id, key.envelope_hash, adopted=True
                )
                if found is not None:
                    return self._serve(found[0], key)
        self._count_miss()
        return None

    # -- looking up ---------------------------------------------------------------

    def _find(self, envelope_hash: str) -> Entry | None:
        entry = self._find_in_memory(envelope_hash)
        if entry is not None:
            return entry
        if envelope_hash in self._memory:
            # The record changed (invalidated, deleted, edited) or the entry is
            # too old: check it again from the start.
            self._memory.pop(envelope_hash, None)
        return self._find_slow(envelope_hash)

    def _find_in_memory(self, envelope_hash: str) -> Entry | None:
        entry = self._memory.get(envelope_hash)
        if entry is None or entry.probe() != entry.version:
            return None
        return entry if self._clock() < entry.deadline else None

    def _find_slow(self, envelope_hash: str) -> Entry | None:
        disk = self._disk
        if disk is None:
            return None
        raw = disk.get(self._prefix + envelope_hash)
        if raw is not None:
            entry = self._from_disk(raw, envelope_hash)
            if entry is not None:
                return self._remember(envelope_hash, entry)
            disk.delete(self._prefix + envelope_hash)
        if not self._warm:
            return None
        record = self._lookup_store(envelope_hash)
        if record is None:
            return None
        found = self._verify(record.execution_id, envelope_hash, adopted=True)
        if found is None or not self._servable(found[0]):
            return None
        entry, wire = found
        self._write(envelope_hash, entry, wire)
        return self._remember(envelope_hash, entry)

    def _lookup_store(self, envelope_hash: str) -> ExecutionRecord | None:
        store = self._store
        if store is None:
            return None
        try:
            return store.find_by_hash(envelope_hash)
        except (IntentusNetError, OSError) as exc:
            _log.warning("cache: store lookup failed (%s); a miss", exc)
            return None

    def _from_disk(self, raw: bytes, envelope_hash: str) -> Entry | None:
        stored = decode(raw)
        if stored is None:
            return None
        store = self._store
        if self._keys is None and store is not None:
            # Its record as it was when the entry was written: served as the
            # memory tier serves, without loading it (signatures need it loaded).
            entry = unchanged(
                store, stored, max_age=self.policy.max_age, now=self._clock()
            )
            if entry is not None:
                return entry if self._servable(entry) else None
        found = self._verify(stored.execution_id, envelope_hash, expires=stored.expires)
        if found is None or not self._servable(found[0]):
            return None
        return found[0]

    def _verify(
        self,
        execution_id: str,
        envelope_hash: str,
        *,
        expires: float | None = None,
        adopted: bool = False,
    ) -> tuple[Entry, JSONObject] | None:
        """Verify an answer's record (``adopted``: found in the store, not here)."""
        store = self._store
        if store is None:
            return None
        return verify(
            store,
            execution_id,
            envelope_hash,
            expires=expires,
            max_age=self.policy.max_age,
            adopted=adopted,
            ttl=self.ttl,
            now=self._clock(),
            keys=self._keys,
        )

    def _servable(self, entry: Entry) -> bool:
        return not entry.is_error or self.policy.serve_errors

    def _remember(self, envelope_hash: str, entry: Entry) -> Entry:
        memory = self._memory
        with self._lock:
            while len(memory) >= self._memory_items:
                memory.pop(next(iter(memory)), None)  # oldest first
            memory[envelope_hash] = entry
        return entry

    # -- answering ------------------------------------------------------------------

    def _serve(self, entry: Entry, key: CacheKey) -> AgentResponse:
        with self._lock:
            self._hits += 1
        if self.record_hits:
            self._trace(entry.execution_id, key)
        return entry.response

    def _share(self, response: AgentResponse, key: CacheKey) -> AgentResponse:
        """A leader's answer for a request that waited on its flight."""
        metadata = response.metadata
        execution_id = metadata.execution_id
        if execution_id is None:
            return response  # nothing recorded: nothing to point at
        with self._lock:
            self._hits += 1
        if self.record_hits and metadata.recording_error is None:
            self._trace(execution_id, key)
        if metadata.from_replay or metadata.recording_error is not None:
            # Served from the cache itself, or not replayable: shared as it is.
            return response
        shared = metadata.model_copy(
            update={"from_replay": True, "original_execution_id": execution_id}
        )
        return response.model_copy(update={"metadata": shared})

    def _keep(self, key: CacheKey, response: AgentResponse) -> AgentResponse:
        """Make a fresh answer the cached one, unless it must not be."""
        metadata = response.metadata
        execution_id = metadata.execution_id
        store = self._store
        if (
            key.directive is CacheDirective.NO_STORE
            or store is None
            or execution_id is None
            or metadata.from_replay
            or metadata.recording_error is not None
            or (response.status == "error" and not self.policy.serve_errors)
        ):
            return response
        probe = store.change_probe(execution_id)
        version = probe()
        if version is None:
            return response
        deadline = math.inf if self.ttl is None else self._clock() + self.ttl
        if self.policy.max_age is not None:
            deadline = min(deadline, self._clock() + self.policy.max_age)
        entry = Entry(execution_id, response, probe, version, deadline)
        self._write(key.envelope_hash, entry, response.to_wire())
        self._remember(key.envelope_hash, entry)
        return response

    def _write(self, envelope_hash: str, entry: Entry, wire: JSONObject) -> None:
        disk = self._disk
        if disk is not None:
            value, expire = encode(
                entry.execution_id,
                wire,
                entry.deadline,
                entry.version,
                self.policy.max_age,
                now=self._clock(),
            )
            disk.set(self._prefix + envelope_hash, value, expire)

    def _trace(self, execution_id: str, key: CacheKey) -> None:
        store = self._store
        if store is None:
            return
        try:
            store.record_cache_hit(
                Hit(
                    execution_id,
                    key.envelope_hash,
                    key.intent,
                    key.intent_version,
                    key.request_id,
                    self.namespace,
                )
            )
        except (IntentusNetError, OSError) as exc:
            if not self._trace_failed:  # once: a full disk would flood the log
                self._trace_failed = True
                _log.warning("cache hits are not being recorded: %s", exc)

    def _count_miss(self) -> None:
        with self._lock:
            self._misses += 1
        if time.monotonic() - self._flushed_at > _FLUSH_EVERY_S:
            self.flush_stats()

    # -- upkeep -----------------------------------------------------------------------

    def rebuild(self) -> int:
        """Refill this namespace from the store; return the entries written.

        Every hash gets the newest record the policy allows serving; each record
        is loaded and verified.
        """
        store, disk = self._store, self._disk
        if store is None or disk is None:
            return 0
        self.clear()
        written: set[str] = set()
        try:
            summaries = store.list()
        except (IntentusNetError, OSError) as exc:
            _log.warning("cache rebuild: cannot list the store (%s)", exc)
            return 0
        for summary in summaries:
            envelope_hash = summary.envelope_hash
            if (
                envelope_hash in written
                or not summary.replayable
                or not self.policy.allows(summary.intent_name)
            ):
                continue
            found = self._verify(summary.execution_id, envelope_hash, adopted=True)
            if found is None or not self._servable(found[0]):
                continue
            self._write(envelope_hash, *found)
            written.add(envelope_hash)
        return len(written)

    def clear(self) -> None:
        """Forget every answer of this namespace (the records stay)."""
        with self._lock:
            self._memory.clear()
        disk = self._disk
        if disk is not None:
            for name in disk.keys(self._prefix):
                disk.delete(name)

    def _after_reset(self) -> None:
        with self._lock:
            self._memory.clear()
        count = self.rebuild()
        _log.warning(
            "cache %s rebuilt from the store: %d entries", self.directory, count
        )

    def stats(self) -> CacheStats:
        """Hits, misses, entries and bytes of this namespace (see CacheStats)."""
        disk = self._disk
        with self._lock:
            hits, misses = self._hits, self._misses
            done_hits, done_misses = self._flushed
        if disk is None:
            return CacheStats(self.namespace, hits, misses, 0, 0, "")
        return CacheStats(
            namespace=self.namespace,
            hits=disk.counter(counter_key(self.namespace, "hits")) + hits - done_hits,
            misses=disk.counter(counter_key(self.namespace, "misses"))
            + misses
            - done_misses,
            entries=len(disk.keys(self._prefix)),
            bytes=disk.volume(),
            directory=str(disk.directory),
        )

    def flush_stats(self) -> None:
        """Add this process's new hits and misses to the persisted counts."""
        disk = self._disk
        with self._lock:
            hits, misses = self._hits, self._misses
            done_hits, done_misses = self._flushed
            self._flushed = (hits, misses)
            self._flushed_at = time.monotonic()
        if disk is not None:
            disk.add_to(counter_key(self.namespace, "hits"), hits - done_hits)
            disk.add_to(counter_key(self.namespace, "misses"), misses - done_misses)

    def close(self) -> None:
        """Write the counts and close the database (it reopens on use)."""
        self.flush_stats()
        if self._disk is not None:
            self._disk.close()

    def __enter__(self) -> ReplayCache:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


@atexit.register
def _flush_all() -> None:
    for cache in list(_CACHES):
        cache.flush_stats()
