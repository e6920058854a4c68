"""The PostgreSQL store beside the file store: medians of issue 13's targets.

Run: python benchmarks/bench_postgres.py [--records 20000] [--dir PATH]
         [--only recording|cache|lookups|sizes ...] [--before CHECKOUT]

Starts a throwaway PostgreSQL server on this machine (tests/pgkit.py: initdb
and pg_ctl on PATH, or the pgserver package) with the server's durable
defaults, and reaches it over its Unix socket. The file store lives in a
temporary directory (--dir to choose where, e.g. /dev/shm). Prints:
  * route_intent + record, durability "flush", one process, against the
    0.75 ms target, and the statements each routed intent sends;
  * executions/s of 4 processes routing into one store, beside the file
    store's;
  * with --before CHECKOUT (a checkout of an earlier commit, e.g.
    ``git worktree add /tmp/before 5cbc09b``), both PostgreSQL rows for that
    checkout's code and for this one, each in fresh processes taking turns
    (the machine's load drifts), and their ratios;
  * find_by_hash (query, load, verify) and the first page of list() at
    --records records (made by another process, imported with import_raw);
  * a cache hit through a router whose ReplayCache has never seen the
    envelope, from a record another process wrote; and a hit with the local
    tier warm;
  * bytes per record, tables and indexes included.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psycopg

# pgkit: the server the tests start, started the same way here
sys.path.insert(0, str(Path(__file__).parent.parent / "tests"))
sys.path.insert(0, str(Path(__file__).parent))
from _timing import median_us, per_call_median, row
from pgkit import postgres_server

from intentusnet import IntentEnvelope, IntentRef, IntentRouter, ListFilters
from intentusnet.cache.replay_cache import ReplayCache
from intentusnet.hashing import compute_hash
from intentusnet.store import (
    FileExecutionStore,
    MemoryExecutionStore,
    PostgresExecutionStore,
)

Store = FileExecutionStore | PostgresExecutionStore
PROCESSES = 4
SECTIONS = ["recording", "cache", "lookups", "sizes"]
#: Turns each of the two checkouts takes with --before.
ROUNDS = 5
TARGET_US = 750


def open_store(where: str) -> Store:
    """A PostgreSQL store for a URL, a file store for a path (flush, both)."""
    if where.startswith("postgresql://"):
        return PostgresExecutionStore(where, durability="flush")
    return FileExecutionStore(where, durability="flush")


def echo(env: IntentEnvelope, ctx: object) -> dict[str, object]:
    """The agent: answers with its payload."""
    return env.payload


def router_over(store: Store, cache: ReplayCache | None = None) -> IntentRouter:
    """A router with the echo agent, recording into ``store``."""
    router = IntentRouter(store=store, cache=cache)
    router.agent("echo", name="echo")(echo)
    return router


def envelope(n: int, tag: str = "") -> IntentEnvelope:
    """An envelope of its own hash for each ``n``."""
    return IntentEnvelope(
        intent=IntentRef(name="echo"), payload={"text": "hello", "n": n, "tag": tag}
    )


def route_many(where: str, count: int, tag: str, ready: object, go: object) -> None:
    """A worker process: build a router, wait for ``go``, route ``count`` intents."""
    store = open_store(where)
    router = router_over(store)
    router.route_intent(envelope(-1, tag))  # connect, create the schema, warm
    ready.put(tag)  # type: ignore[attr-defined]
    go.wait()  # type: ignore[attr-defined]
    for n in range(count):
        router.route_intent(envelope(n, tag))
    router.close()
    store.close()


def executions_per_second(where: str, count: int) -> float:
    """Aggregate executions/s of PROCESSES processes routing into one store."""
    spawn = multiprocessing.get_context("spawn")
    ready, go = spawn.Queue(), spawn.Event()
    workers = [
        spawn.Process(target=route_many, args=(where, count, f"w{i}", ready, go))
        for i in range(PROCESSES)
    ]
    for worker in workers:
        worker.start()
    for _ in workers:
        ready.get(timeout=120)
    start = time.perf_counter()
    go.set()
    for worker in workers:
        worker.join(timeout=600)
        assert worker.exitcode == 0, worker.exitcode
    return PROCESSES * count / (time.perf_counter() - start)


def route_median(where: str, tag: str = "") -> float:
    """Median us of one routed and recorded intent into ``where`` (warmed first)."""
    store = open_store(where)
    router = router_over(store)
    for n in range(200):
        router.route_intent(envelope(n, f"warm{tag}"))
    us = per_call_median(lambda n, r=router: r.route_intent(envelope(n, tag)), 2000)
    router.close()
    store.close()
    return us


def statements_per_route(dsn: str, routes: int = 100) -> float:
    """Statements the store's connections send per routed intent."""
    sent = 0
    execute = psycopg.Connection.execute

    def counted(conn: psycopg.Connection, *args: object, **kw: object) -> object:  # type: ignore[type-arg]
        nonlocal sent
        sent += 1
        return execute(conn, *args, **kw)  # type: ignore[arg-type]

    store = open_store(dsn)
    router = router_over(store)
    router.route_intent(envelope(-1, "count"))  # connect, create the schema
    psycopg.Connection.execute = counted  # type: ignore[assignment,method-assign]
    try:
        for n in range(routes):
            router.route_intent(envelope(n, "count"))
    finally:
        psycopg.Connection.execute = execute  # type: ignore[method-assign]
        router.close()
        store.close()
    return sent / routes


def in_child(checkout: str | None, kind: str, dsn: str, tag: str) -> float:
    """A row measured in a fresh process importing ``checkout``'s package.

    ``kind`` "route" is ``route_median``, "rate" ``executions_per_second``.
    """
    env = dict(os.environ)
    if checkout is not None:
        env["PYTHONPATH"] = checkout
    done = subprocess.run(
        [sys.executable, __file__, "--child", kind, dsn, tag],
        env=env,
        cwd=Path(__file__).parent,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return float(done.stdout.strip())


def turns(before: str, dsn: str) -> None:
    """This checkout against ``before``: fresh processes taking turns."""
    print(f"PostgreSQL, this checkout against {before} (fresh processes, in turns)")
    for kind, label, unit, rounds in (
        ("route", "one process, us a routed intent", "us", ROUNDS),
        ("rate", f"{PROCESSES} processes, executions/s", "/s", 3),
    ):
        now: list[float] = []
        then: list[float] = []
        for turn in range(rounds):
            then.append(in_child(before, kind, dsn, f"before{turn}"))
            now.append(in_child(None, kind, dsn, f"now{turn}"))
        row(f"  {label}, before", statistics.median(then), unit=unit)
        row(f"  {label}, now", statistics.median(now), unit=unit)
        row("  ratio now / before", statistics.median(now) / statistics.median(then),
            unit="x ", note=f"{rounds} turns each")  # fmt: skip


def bench_recording(dsn: str, files: str, before: str | None) -> None:
    print("route_intent + record, durability flush, one process (no cache)")
    pg, file = route_median(dsn), route_median(files)
    row("  PostgreSQL", pg, note=f"target <= {TARGET_US} us: "
        + ("met" if pg <= TARGET_US else "missed"))  # fmt: skip
    row("  file store", file)
    row("  PostgreSQL / file store", pg / file, unit="x ")
    row("  statements per routed intent (PostgreSQL)", statements_per_route(dsn),
        unit="  ")  # fmt: skip
    print(f"executions/s, {PROCESSES} processes into one store")
    pg_rate = executions_per_second(dsn, 500)
    file_rate = executions_per_second(files, 500)
    row("  PostgreSQL", pg_rate, unit="/s")
    row("  file store", file_rate, unit="/s")
    row("  PostgreSQL / file store", pg_rate / file_rate, unit="x ")
    if before is not None:
        turns(before, dsn)


def fill(dsn: str, records: int) -> list[str]:
    """Import ``records`` records into the database; their envelope hashes."""
    memory = MemoryExecutionStore()
    router = router_over(memory)  # type: ignore[arg-type]
    hashes = []
    with PostgresExecutionStore(dsn) as store:
        for n in range(records):
            answer = router.route_intent(envelope(n, "fill"))
            execution_id = answer.metadata.execution_id
            assert execution_id is not None
            store.import_raw(execution_id, memory.raw(execution_id))
            memory.delete(execution_id)
            hashes.append(compute_hash(envelope(n, "fill")))
    router.close()
    return hashes


def bench_lookups(dsn: str, records: int) -> None:
    started = time.perf_counter()
    hashes = fill(dsn, records)
    print(f"at {records:,} records (imported in {time.perf_counter() - started:.0f} s)")
    with PostgresExecutionStore(dsn) as store:
        picks = random.Random(7).choices(hashes, k=2000)

        def find(i: int) -> object:
            assert store.find_by_hash(picks[i]) is not None
            return None

        find(0)
        row("  find_by_hash (query, load, verify)", per_call_median(find, 2000),
            note="target <= 1000 us at 100k and 1M")  # fmt: skip
        first_page = ListFilters(limit=20)
        row("  list(limit=20), first page", median_us(lambda: store.list(first_page),
            number=50, repeat=9) / 1000, unit="ms",
            note="target <= 50 ms at 1M")  # fmt: skip
        stats = store.stats()
        row("  bytes per record in the database", stats.bytes_on_disk / stats.records,
            unit="B ")  # fmt: skip


def bench_cache(dsn: str, files: str) -> None:
    print("cache hits through the router (ReplayCache over the store)")
    count = 500
    for label, where in (("PostgreSQL", dsn), ("file store", files)):
        # Another process writes the records; this one's cache never saw them.
        writer = multiprocessing.get_context("spawn")
        ready, go = writer.Queue(), writer.Event()
        go.set()
        child = writer.Process(
            target=route_many, args=(where, count, f"hit-{label}", ready, go)
        )
        child.start()
        child.join(timeout=600)
        assert child.exitcode == 0
        store = open_store(where)
        directory = tempfile.mkdtemp(prefix="bench-pg-cache-")
        router = router_over(
            store, ReplayCache(directory, store=store, record_hits=False)
        )

        def first_hit(n: int, r: IntentRouter = router, tag: str = label) -> None:
            assert r.route_intent(envelope(n, f"hit-{tag}")).metadata.from_replay

        row(f"  {label}: from another process's record",
            per_call_median(first_hit, count),
            note="target <= 1000 us" * (label == "PostgreSQL"))  # fmt: skip
        warm = envelope(0, f"hit-{label}")
        row(f"  {label}: local tier warm", median_us(lambda r=router, e=warm:
            r.route_intent(e), number=1000, repeat=9),
            note="target within 1.5x of the file store's")  # fmt: skip
        router.close()
        store.close()


def file_bytes_per_record(files: str, records: int = 2000) -> None:
    root = Path(files) / "size"
    with FileExecutionStore(root) as store:
        router = router_over(store)
        for n in range(records):
            router.route_intent(envelope(n, "fill"))
        router.close()
        row("  bytes per record, file store (files + catalog)",
            store.stats().bytes_on_disk / records, unit="B ")  # fmt: skip


def main() -> None:
    """Start the server, print the medians, stop it."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=20_000)
    parser.add_argument("--dir", default=None, help="where the file store goes")
    parser.add_argument(
        "--only",
        nargs="+",
        choices=SECTIONS,
        default=SECTIONS,
        help="run these sections only (default: all)",
    )
    parser.add_argument(
        "--before", default=None, help="a checkout to compare the one-process row with"
    )
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:  # a process of --before's turns
        kind, dsn, tag = args.child
        print(
            route_median(dsn, tag)
            if kind == "route"
            else executions_per_second(dsn, 500)
        )
        return
    print(f"load average {' '.join(f'{n:.2f}' for n in os.getloadavg())}")
    base = Path(tempfile.mkdtemp(prefix="bench-pg-", dir=args.dir))
    with postgres_server(durable=True) as server:
        with psycopg.connect(server.socket_dsn(), autocommit=True) as conn:
            for name in ("routing", "lookups", "hits"):
                conn.execute(f"CREATE DATABASE {name}")
            (version,) = conn.execute("SHOW server_version").fetchone() or ("?",)
        print(f"PostgreSQL {version} over its Unix socket; file store in {base}")
        if "recording" in args.only:
            bench_recording(
                server.socket_dsn("routing"), str(base / "routing"), args.before
            )
        if "cache" in args.only:
            bench_cache(server.socket_dsn("hits"), str(base / "hits"))
        if "lookups" in args.only:
            bench_lookups(server.socket_dsn("lookups"), args.records)
        if "sizes" in args.only:
            file_bytes_per_record(str(base))


if __name__ == "__main__":
    main()
