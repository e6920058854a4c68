"""Replay cache hits, beside the floor they are compared with.

The floor, measured in the same run: the canonical hash of the same 1 KB
envelope plus one diskcache ``get`` of the same cached value, the least a
disk-backed exact-match cache can do per lookup.

Run: python benchmarks/bench_cache.py [--dir PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import diskcache
import httpx
import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _timing import median_us, row
from bench_routing import payload_1kb

from intentusnet import FileExecutionStore, IntentEnvelope, IntentRef, IntentRouter
from intentusnet import compute_hash as compute_hash
from intentusnet.cache.cached import cached
from intentusnet.cache.replay_cache import ReplayCache
from intentusnet.integrations.httpx import RecordingTransport


def main() -> None:
    """Print the medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", help="where to put the store (default: a temp dir)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-cache-", dir=args.dir))
    store = FileExecutionStore(root / "records")
    payload = payload_1kb()
    env = IntentEnvelope(intent=IntentRef(name="echo"), payload=payload)
    size = len(orjson.dumps(payload))

    print(f"replay cache hits (payload {size} bytes, store in {root})")
    floor_cache = diskcache.Cache(str(root / "floor"))
    key = compute_hash(env)
    floor_cache.set(key, orjson.dumps({"executionId": "exec-x", "response": payload}))

    def floor_call() -> object:
        return floor_cache.get(compute_hash(env))

    floor = median_us(floor_call, number=5000)
    row("floor: compute_hash + one diskcache get", floor)

    def echo(e: IntentEnvelope, ctx: object) -> dict[str, object]:
        return e.payload

    plain = IntentRouter(store=None)
    plain.agent("echo", name="echo")(echo)
    row(
        "for scale: route_intent, no store, no cache (runs the agent)",
        median_us(lambda: plain.route_intent(env), number=5000),
    )

    results: dict[str, float] = {}
    for label, record_hits, target in (
        ("router hit, record_hits=False", False, 15.0),
        ("router hit, hit recorded (journal line)", True, 40.0),
    ):
        cache = ReplayCache(
            record_hits=record_hits, namespace=f"hits-{record_hits}".lower()
        )
        router = IntentRouter(store=store, cache=cache)
        router.agent("echo", name="echo")(echo)
        router.route_intent(env)
        assert router.route_intent(env).metadata.from_replay
        results[label] = us = median_us(lambda r=router: r.route_intent(env))
        row(label, us, note=f"target <= {target:g} us")
        row(
            "  / floor",
            us / floor,
            unit="x ",
            note="target <= 2.5x" * (not record_hits),
        )
        router.close()

    # Two envelopes taking turns in a memory tier of one answer: every hit comes
    # from diskcache, and its record is loaded and verified (the first hit of an
    # answer in a process).
    cold = IntentRouter(
        store=store,
        cache=ReplayCache(record_hits=False, namespace="cold", memory_items=1),
    )
    cold.agent("echo", name="echo")(echo)
    other = IntentEnvelope(intent=IntentRef(name="echo"), payload={**payload, "n": 2})
    for each in (env, other):
        cold.route_intent(each)
    turns = [env, other]

    def disk_hit() -> object:
        turns.reverse()
        return cold.route_intent(turns[0])

    assert disk_hit().metadata.from_replay  # type: ignore[attr-defined]
    us = median_us(disk_hit, number=500)
    row("router hit from disk (diskcache get, record load + verify)", us)
    row("  / floor", us / floor, unit="x ")
    cold.close()

    @cached(store=store, intent="llm.complete", record_hits=False)
    def complete(model: str, messages: list[object], tags: list[str]) -> object:
        return {"model": model, "n": len(messages)}

    arguments = (payload["model"], payload["messages"], payload["tags"])
    complete(*arguments)
    us = median_us(lambda: complete(*arguments))
    row("@cached hit (1 KB of arguments), record_hits=False", us)
    row("  / floor", us / floor, unit="x ")

    served = 0

    def upstream(request: httpx.Request) -> httpx.Response:
        nonlocal served
        served += 1
        return httpx.Response(200, json={"choices": [{"text": "x" * 400}]})

    transport = RecordingTransport(
        store,
        mode="cache",
        wrapped=httpx.MockTransport(upstream),
        cache=ReplayCache(store=store, namespace="http", record_hits=False),
    )
    body = orjson.dumps(payload)
    request = httpx.Request(
        "POST",
        "https://api.example.com/v1/chat/completions",
        content=body,
        headers={"content-type": "application/json", "authorization": "Bearer k"},
    )
    transport.handle_request(request)
    us = median_us(lambda: transport.handle_request(request))
    assert served == 1
    row("transport hit (1 KB JSON body), record_hits=False", us, note="target <= 60 us")
    row("  / floor", us / floor, unit="x ")
    store.close()


if __name__ == "__main__":
    main()
