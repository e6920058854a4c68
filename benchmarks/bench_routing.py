"""Routing (with and without recording) and hashing, beside their floors.

Run: python benchmarks/bench_routing.py [--dir PATH]

The recording rows put the store in a temporary directory under --dir (default:
the system's), so `--dir /dev/shm` separates the code's cost from the disk's.
The transparency log rows route into two signed stores, one keeping the log
and one not (``log_cadence=None``), in turns, so that a busy machine slows both
alike: the range of the batches is printed beside each median.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
import tempfile
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _timing import median_us, payload_1kb, row, turns

from intentusnet import (
    AgentDefinition,
    FileExecutionStore,
    IntentEnvelope,
    IntentRef,
    IntentRouter,
    LogCadence,
    SigningKey,
    compute_hash,
)


def log_on_and_off(base: str | None, echo: object, small: IntentEnvelope) -> None:
    """Route into two signed stores, log on and off, in turns; medians and ranges."""
    print("routing with recording, signed: the transparency log on and off, in turns")
    key = SigningKey.generate()
    with tempfile.TemporaryDirectory(prefix="bench-routing-log-", dir=base) as tmp:
        routers: dict[str, IntentRouter] = {}
        stores = []
        for label, cadence in (("log on", LogCadence()), ("log off", None)):
            store = FileExecutionStore(
                f"{tmp}/{label}", signing_key=key, log_cadence=cadence
            )
            stores.append(store)
            routers[label] = IntentRouter(store=store)
            routers[label].register(
                AgentDefinition(name="echo", intents=["echo"]), echo
            )
        samples = turns(
            {
                label: lambda r=r: r.route_intent(small)  # type: ignore[misc]
                for label, r in routers.items()
            },
            number=300,
            repeat=15,
        )
        for label, times in samples.items():
            row(
                f"route_intent + signed record, {label}",
                statistics.median(times),
                note=f"batches {min(times):.1f}-{max(times):.1f} us",
            )
        ratio = statistics.median(
            on / off
            for on, off in zip(samples["log on"], samples["log off"], strict=True)
        )
        row(
            "log on / log off (median of the turns' ratios)",
            ratio,
            "x ",
            "target <= 1.05x",
        )
        for r in routers.values():
            r.close()
        for store in stores:
            store.close()


def main() -> None:
    """Print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where recording stores go")
    parser.add_argument(
        "--log-only",
        action="store_true",
        help="only the transparency log rows (log on and off, in turns)",
    )
    args = parser.parse_args()
    base = args.dir
    router = IntentRouter()

    @router.agent("echo", name="echo")
    def echo(env: IntentEnvelope, ctx: object) -> dict[str, object]:
        return env.payload

    small = IntentEnvelope(intent=IntentRef(name="echo"), payload={"text": "hi"})
    big = IntentEnvelope(intent=IntentRef(name="echo"), payload=payload_1kb())
    raw = big.payload
    size = len(orjson.dumps(raw))

    if args.log_only:
        log_on_and_off(base, echo, small)
        router.close()
        return
    print("routing (no store, DIRECT, echo agent)")
    direct = median_us(lambda: echo(small, None), number=20000)
    sync = median_us(lambda: router.route_intent(small), number=20000)
    row("floor: direct call of the agent function", direct)
    row("route_intent", sync)
    row("route_intent overhead (minus floor)", sync - direct, note="target <= 10 us")
    wire = {"intent": {"name": "echo"}, "payload": {"text": "hi"}}
    row(
        "IntentEnvelope.model_validate(wire dict)",
        median_us(lambda: IntentEnvelope.model_validate(wire), number=5000),
    )
    row(
        "route_intent(wire dict): the envelope built per call",
        median_us(lambda: router.route_intent(wire), number=5000),
    )

    loop = asyncio.new_event_loop()
    try:

        async def many(n: int) -> None:
            for _ in range(n):
                await router.route(small)

        n = 2000
        asyncio_us = median_us(lambda: loop.run_until_complete(many(n)), number=1)
        row("route (async; sync agent runs on a worker thread)", asyncio_us / n)
    finally:
        loop.close()

    print("routing with recording (DIRECT, echo agent, FileExecutionStore)")
    for durability in ("flush", "fsync"):
        with tempfile.TemporaryDirectory(prefix="bench-routing-", dir=base) as tmp:
            store = FileExecutionStore(tmp, durability=durability)  # type: ignore[arg-type]
            recorded = IntentRouter(store=store)
            recorded.register(AgentDefinition(name="echo", intents=["echo"]), echo)
            us = median_us(
                lambda router=recorded: router.route_intent(small),  # type: ignore[misc]
                number=300,
                repeat=9,
            )
            note = "target <= 120 us in total" if durability == "flush" else ""
            row(f"route_intent + record, durability {durability}", us, note=note)
            recorded.close()
            store.close()

    log_on_and_off(base, echo, small)

    print(f"hashing (payload {size} bytes)")
    floor = median_us(
        lambda: hashlib.sha256(orjson.dumps(raw, option=orjson.OPT_SORT_KEYS)).digest(),
        number=20000,
    )
    hashed = median_us(lambda: compute_hash(big), number=20000)
    row("floor: orjson sorted dump + sha256 of the payload", floor)
    row("compute_hash(envelope)", hashed, note="target <= 4 us")
    row("compute_hash / floor", hashed / floor, unit="x ", note="target <= 2x")
    ref = IntentRef(name="echo")
    built = median_us(lambda: IntentEnvelope(intent=ref, payload=raw), number=5000)
    first = median_us(
        lambda: compute_hash(IntentEnvelope(intent=ref, payload=raw)), number=5000
    )
    row("IntentEnvelope(...) + first compute_hash", first)
    row("  its first hash (minus construction) / floor", (first - built) / floor, "x ")
    # ``weight`` is an integral float: hashing takes the slower reference path.
    line = {"weight": 1.0, "text": "lorem ipsum " * 80}
    ten_mb = {"rows": [{**line, "id": i} for i in range(10_000)]}
    huge = IntentEnvelope(intent=IntentRef(name="echo"), payload=ten_mb)
    seconds = median_us(lambda: compute_hash(huge), number=1, repeat=5) / 1e6
    row("compute_hash(10 MB envelope)", seconds, unit="s ", note="target <= 5 s")
    router.close()


if __name__ == "__main__":
    main()
