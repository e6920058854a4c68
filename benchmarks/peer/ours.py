"""This project's side of bench_peer.py: one row per run, its result as JSON.

Run by bench_peer.py with this checkout first on PYTHONPATH; drives only the
public API (``from intentusnet import ...``), as README.md and docs/ show.

Run: python benchmarks/peer/ours.py ROW [--dir DIR] [--quick]
"""

from __future__ import annotations

import argparse
import hashlib

import orjson
from _drive import batch_us, each_us, main, payload_1kb, payload_small

from intentusnet import (
    FileExecutionStore,
    IntentEnvelope,
    IntentRef,
    IntentRouter,
    ReplayEngine,
    compute_hash,
)


def echo_router(store: FileExecutionStore | None = None) -> IntentRouter:
    """A router with one agent, ``echo``, answering the payload it is given."""
    router = IntentRouter(store=store)

    @router.agent("echo", name="echo")
    def echo(env: IntentEnvelope, ctx: object) -> object:
        return env.payload

    return router


def route(payload: dict[str, object], quick: bool) -> dict[str, float]:
    """``route_intent`` of one prebuilt envelope, no store."""
    router = echo_router()
    env = IntentEnvelope(intent=IntentRef(name="echo"), payload=payload)
    number, repeat = (200, 3) if quick else (5000, 9)
    us = batch_us({"us": lambda: router.route_intent(env)}, number, repeat)
    router.close()
    return us


def route_small(args: argparse.Namespace) -> dict[str, float]:
    """Row 1, 2-byte payload."""
    return route(payload_small(), args.quick)


def route_1kb(args: argparse.Namespace) -> dict[str, float]:
    """Row 1, 1 KB payload."""
    return route(payload_1kb(), args.quick)


def record(args: argparse.Namespace) -> dict[str, float]:
    """Row 2: ``route_intent`` recording each execution, durability ``flush``."""
    store = FileExecutionStore(args.dir, durability="flush")
    router = echo_router(store)
    env = IntentEnvelope(intent=IntentRef(name="echo"), payload=payload_small())
    number, repeat = (20, 3) if args.quick else (100, 9)
    us = batch_us({"us": lambda: router.route_intent(env)}, number, repeat)
    router.close()
    store.close()
    return us


def hash_1kb(args: argparse.Namespace) -> dict[str, float]:
    """Row 3: envelope construction, + first ``compute_hash``, and the floor.

    The floor is orjson's sorted dump and SHA-256 of the wire dict the
    envelope is built from: what hashing that data costs at the least.
    """
    raw = payload_1kb()
    wire = {"intent": {"name": "echo"}, "payload": raw}
    ref = IntentRef(name="echo")
    number, repeat = (200, 3) if args.quick else (5000, 9)
    us = batch_us(
        {
            "construct": lambda: IntentEnvelope(intent=ref, payload=raw),
            "us": lambda: compute_hash(IntentEnvelope(intent=ref, payload=raw)),
            "floor": lambda: hashlib.sha256(
                orjson.dumps(wire, option=orjson.OPT_SORT_KEYS)
            ).digest(),
        },
        number,
        repeat,
    )
    return us


def load(args: argparse.Namespace) -> dict[str, float]:
    """Row 4: load + verify + replay of records not loaded before, then of one again."""
    store = FileExecutionStore(args.dir)
    router = echo_router(store)
    env = IntentEnvelope(intent=IntentRef(name="echo"), payload=payload_small())
    calls = 50 if args.quick else 2000
    ids = []
    for _ in range(calls + 1):
        execution_id = router.route_intent(env).metadata.execution_id
        assert execution_id is not None
        ids.append(execution_id)
    router.close()

    def replay(i: int) -> object:
        return ReplayEngine.from_store(store, ids[i]).replay()

    first = each_us(replay, calls)
    each_us(lambda _i: replay(calls), 100)  # the record below is now loaded before
    again = each_us(lambda _i: replay(calls), calls)
    store.close()
    return {"first": first, "repeat": again}


def replay_setup(args: argparse.Namespace) -> dict[str, str]:
    """Row 5's record for ``intentusnet replay ID``: route one, return its id."""
    store = FileExecutionStore(args.dir)
    with echo_router(store) as router:
        env = IntentEnvelope(intent=IntentRef(name="echo"), payload=payload_small())
        execution_id = router.route_intent(env).metadata.execution_id
    store.close()
    assert execution_id is not None
    return {"id": execution_id}


if __name__ == "__main__":
    main(
        {
            "route_small": route_small,
            "route_1kb": route_1kb,
            "record": record,
            "hash_1kb": hash_1kb,
            "load": load,
            "replay_setup": replay_setup,
        }
    )
