"""Replay cache hits, beside the floor they are compared with.

The floor, measured in the same run: the canonical hash of the same 1 KB
envelope plus one diskcache ``get`` of the same cached value, the least a
disk-backed exact-match cache can do per lookup.

The transport rows time ``RecordingTransport.handle_request`` of a 1 KB JSON
request already answered (httpx, and httpx2 when installed), then a hit the
memory tier does not hold (two requests take turns in a memory tier of one
answer). "First call of a fresh process": a child process imports everything,
opens the store and builds the transport and the request, untimed, and times
its one ``handle_request``, answered from the disk tier (another process wrote
it); the floor's row is the same for ``compute_hash`` + diskcache ``get`` in a
child of its own. Medians over ``PROCESSES`` children of each kind. When vcrpy
is importable, the same answer is replayed from a vcrpy cassette through an
``httpx.Client``, beside the transport's hit through the same client.

Run: python benchmarks/bench_cache.py [--dir PATH]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import diskcache
import httpx
import orjson

sys.path.insert(0, str(Path(__file__).parent))
from _timing import median_us, row, side_by_side
from bench_routing import payload_1kb

from intentusnet import FileExecutionStore, IntentEnvelope, IntentRef, IntentRouter
from intentusnet import compute_hash as compute_hash
from intentusnet.cache.cached import cached
from intentusnet.cache.replay_cache import ReplayCache
from intentusnet.integrations.httpx import RecordingTransport

#: Fresh processes started for each of the first-call rows.
PROCESSES = 11
#: Batches, and posts per batch, of the clients compared with vcrpy.
REPEAT = 7
NUMBER = 200


def main() -> None:
    """Print the medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", help="where to put the store (default: a temp dir)")
    parser.add_argument("--child", choices=["hit", "floor"], help=argparse.SUPPRESS)
    parser.add_argument("--root", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.root)
        return
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

    transport_rows(store, root, payload, floor_call)
    store.close()


URL = "https://api.example.com/v1/chat/completions"
HEADERS = {"content-type": "application/json", "authorization": "Bearer k"}


def upstream(request: httpx.Request) -> httpx.Response:
    """The API behind the transports: an answer of about 400 bytes."""
    return httpx.Response(200, json={"choices": [{"text": "x" * 400}]})


def transport_rows(
    store: FileExecutionStore,
    root: Path,
    payload: dict[str, object],
    floor_call: Callable[[], object],
) -> None:
    """Transport hits, beside the floor, vcrpy and a fresh process."""
    body = orjson.dumps(payload)
    calls = 0

    def counted(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return upstream(request)

    transport = RecordingTransport(
        store,
        wrapped=httpx.MockTransport(counted),
        cache=ReplayCache(store=store, namespace="http", record_hits=False),
    )
    request = httpx.Request("POST", URL, content=body, headers=HEADERS)
    transport.handle_request(request)
    hits: dict[str, Callable[[], object]] = {
        "floor": floor_call,
        "httpx": lambda: transport.handle_request(request),
    }
    second = httpx2_hit(store, body)
    if second is not None:
        hits["httpx2"] = second
    # Taking turns with the floor: on a busy machine the ratios hold.
    us = side_by_side(hits)
    assert calls == 1, "every timed call must be a hit"
    floor, hit = us["floor"], us["httpx"]
    print(f"\ntransport hits ({len(body)} bytes of JSON body), record_hits=False")
    row("floor, timed taking turns with the hits below", floor)
    for name in ("httpx", "httpx2"):
        if name in us:
            row(f"{name} transport hit", us[name], note="target <= 1.5x floor")
            row("  / floor", us[name] / floor, unit="x ")
    if second is None:
        print("  httpx2 not installed: pip install intentusnet[httpx2] to compare")

    # Every hit from the disk tier: two requests take turns in a memory tier
    # of one answer, in this (warm) process.
    turns = RecordingTransport(
        store,
        wrapped=httpx.MockTransport(counted),
        cache=ReplayCache(
            store=store, namespace="http", record_hits=False, memory_items=1
        ),
    )
    other = httpx.Request(
        "POST", URL, content=orjson.dumps({**payload, "n": 2}), headers=HEADERS
    )
    pair = [request, other]
    turns.handle_request(other)

    def disk_hit() -> object:
        pair.reverse()
        return turns.handle_request(pair[0])

    us = side_by_side({"floor": floor_call, "disk": disk_hit}, number=500)
    assert calls == 2, "every timed call must be a hit"
    row("httpx transport hit from the disk tier (warm process)", us["disk"])
    row("  / floor", us["disk"] / us["floor"], unit="x ")
    fresh_rows(root, floor)
    vcrpy_rows(transport, body, hit)


def httpx2_hit(store: FileExecutionStore, body: bytes) -> Callable[[], object] | None:
    """An httpx2 transport's hit, ready to time; None without httpx2."""
    try:
        import httpx2
    except ImportError:
        return None
    from intentusnet.integrations.httpx2 import RecordingTransport as Transport2

    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(200, json={"choices": [{"text": "x" * 400}]})

    transport = Transport2(
        store,
        wrapped=httpx2.MockTransport(answer),
        cache=ReplayCache(store=store, namespace="http2", record_hits=False),
    )
    request = httpx2.Request("POST", URL, content=body, headers=HEADERS)
    transport.handle_request(request)
    return lambda: transport.handle_request(request)


def fresh_rows(root: Path, floor: float) -> None:
    """The first call in a fresh process: a hit that only the disk tier holds.

    Each child process imports everything, opens the store (or, for the floor,
    the diskcache) and builds the request, untimed; then it times its first
    call alone: ``handle_request`` of a request answered before (by another
    process), or the floor's ``compute_hash`` + diskcache ``get``. Medians over
    ``PROCESSES`` processes of each kind, taking turns.
    """
    hits: list[float] = []
    floors: list[float] = []
    for _ in range(PROCESSES):
        for kind, samples in (("hit", hits), ("floor", floors)):
            out = subprocess.run(
                [sys.executable, __file__, "--child", kind, "--root", str(root)],
                capture_output=True,
                text=True,
                check=True,
                timeout=60,
            )
            samples.append(float(out.stdout))
    hit, first = statistics.median(hits), statistics.median(floors)
    label = f"a fresh process's first call (median of {PROCESSES})"
    row(f"floor, {label}", first)
    row(f"disk-tier hit, {label}", hit, note="target <= 2x")
    row("  / the fresh process's floor", hit / first, unit="x ")
    row("  / floor", hit / floor, unit="x ")


def vcrpy_rows(transport: RecordingTransport, body: bytes, hit: float) -> None:
    """The same answer replayed by vcrpy from its cassette, through a client.

    vcrpy patches httpx while a cassette is in use, so the three clients take
    turns batch by batch (``REPEAT`` batches of ``NUMBER`` posts), the vcrpy
    batch inside its cassette, the others outside it. vcrpy's own work is its
    time less the client's, compared with ``hit``: the transport's hit alone.
    """
    try:
        import vcr  # type: ignore[import-untyped]  # not a project dependency
    except ImportError:
        print("  vcrpy not installed: pip install vcrpy to compare")
        return
    calls = 0

    def refused(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return upstream(request)

    def batch(http: httpx.Client) -> float:
        start = time.perf_counter()
        for _ in range(NUMBER):
            http.post(URL, content=body, headers=HEADERS)
        return (time.perf_counter() - start) / NUMBER * 1e6

    samples: dict[str, list[float]] = {"client": [], "ours": [], "vcrpy": []}
    with (
        tempfile.TemporaryDirectory() as directory,
        httpx.Client(transport=httpx.MockTransport(upstream)) as plain,
        httpx.Client(transport=transport) as ours,
        httpx.Client(transport=httpx.MockTransport(refused)) as replayed,
    ):
        cassette = str(Path(directory) / "cassette.yaml")
        recorder = vcr.VCR(
            filter_headers=["authorization"], match_on=["method", "uri", "body"]
        )
        with recorder.use_cassette(cassette, record_mode="once"):
            plain.post(URL, content=body, headers=HEADERS)
        for n in range(REPEAT + 1):  # the first round warms up
            client, served = batch(plain), batch(ours)
            with recorder.use_cassette(
                cassette, record_mode="none", allow_playback_repeats=True
            ):
                vcr_us = batch(replayed)
            if n:
                samples["client"].append(client)
                samples["ours"].append(served)
                samples["vcrpy"].append(vcr_us)
    assert calls == 0, "vcrpy must replay every call from its cassette"
    us = {label: statistics.median(times) for label, times in samples.items()}
    print("through httpx.Client.post (the client's own work included), taking turns")
    row("client, no cache (a mock transport answers)", us["client"])
    row("client, transport hit", us["ours"])
    row("client, vcrpy replay of the same answer", us["vcrpy"])
    row("  vcrpy / transport hit", us["vcrpy"] / us["ours"], unit="x ")
    own = us["vcrpy"] - us["client"]
    row("  vcrpy's own work: its replay less the client's", own)
    row("  / transport hit (timed alone, above)", own / hit, unit="x ")


def child(kind: str, root: Path) -> None:
    """Print the time of this fresh process's first call of ``kind``."""
    payload = payload_1kb()
    if kind == "floor":
        env = IntentEnvelope(intent=IntentRef(name="echo"), payload=payload)
        floor_cache = diskcache.Cache(str(root / "floor"))
        start = time.perf_counter_ns()
        found = floor_cache.get(compute_hash(env))
        elapsed = time.perf_counter_ns() - start
        assert found is not None
    else:

        def refused(request: httpx.Request) -> httpx.Response:
            raise AssertionError("a fresh process's call must be a hit")

        store = FileExecutionStore(root / "records")
        transport = RecordingTransport(
            store,
            wrapped=httpx.MockTransport(refused),
            cache=ReplayCache(store=store, namespace="http", record_hits=False),
        )
        request = httpx.Request(
            "POST", URL, content=orjson.dumps(payload), headers=HEADERS
        )
        start = time.perf_counter_ns()
        response = transport.handle_request(request)
        elapsed = time.perf_counter_ns() - start
        assert response.headers["x-intentusnet-cache"] == "hit"
    print(elapsed / 1000)


if __name__ == "__main__":
    main()
