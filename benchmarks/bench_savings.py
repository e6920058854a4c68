"""What caching saved: the cost of a savings report over a store, by its size.

Fills a file store with N recorded LLM calls (answers carrying usage, routed
through a router with a replay cache) and N hits of them, then times a
``savings_report`` (what ``intentusnet stats`` and each ``/metrics`` scrape pay),
its parts (the catalog's running totals, the usage of the records hits were
served from, the hit journal), and beside them
what reading usage from the record files instead would cost (a load of every
record).

Run: python benchmarks/bench_savings.py [--records N] [--dir PATH]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import row

from intentusnet import FileExecutionStore, IntentRouter, ReplayCache, savings_report


def _median_s(fn: object, repeat: int) -> float:
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        samples.append(time.perf_counter() - start)
    samples.sort()
    return samples[len(samples) // 2]


def main() -> None:
    """Print the medians."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--dir", help="where to put the store (default: a temp dir)")
    args = parser.parse_args()
    n = args.records
    root = Path(tempfile.mkdtemp(prefix="bench-savings-", dir=args.dir))
    store = FileExecutionStore(root / "records")
    with IntentRouter(store=store, cache=ReplayCache()) as router:

        @router.agent("llm", name="llm")
        def llm(env, ctx):  # type: ignore[no-untyped-def]
            usage = {
                "provider": "openai",
                "model": f"model-{env.payload['i'] % 4}",
                "inputTokens": 1000,
                "outputTokens": 200,
            }
            return {"response": {"status": 200}, "usage": usage}

        for i in range(n):
            for _ in range(2):  # a miss, then a hit
                router.route_intent({"intent": {"name": "llm"}, "payload": {"i": i}})
    report = savings_report(store)
    assert (report.misses, report.hits) == (n, n), (report.misses, report.hits)
    print(f"savings report over {n} records and {n} hits (medians; a busy VM: rough)")
    whole = _median_s(lambda: savings_report(store), 5)
    row("savings_report, per record and its hit", whole / n * 1e6)
    row("  the whole report", whole * 1e3, "ms")
    totals = _median_s(store.usage_totals, 5)
    row("  of which: the catalog's running totals", totals * 1e6)
    ids = [s.execution_id for s in store.list()]
    usage = _median_s(lambda: store.usage_of(ids), 5)
    row("  of which: the usage of the hits' records, per record", usage / n * 1e6)
    hits = _median_s(store.cache_hits, 5)
    row("  of which: the hit journal read and checked, per hit", hits / n * 1e6)
    loads = _median_s(lambda: [store.load(s.execution_id) for s in store.list()], 3)
    row(
        "what the column saves: store.load() of every record, per record",
        loads / n * 1e6,
    )
    store.close()


if __name__ == "__main__":
    main()
