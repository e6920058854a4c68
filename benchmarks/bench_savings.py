"""What caching saved: the cost of a savings report over a store, by its size.

Fills a file store with N recorded LLM calls (answers carrying usage, routed
through a router with a replay cache) and N hits of them, then times:

- a cold report (``savings_report``: every completed record read once, the hit
  journal read whole), per record;
- a warm report (a ``UsageLedger`` that has read every record: the catalog
  listed and the hit journal read), per hit, as ``/metrics`` pays per scrape;
- beside them, the store's own listing (``store.list()``) and a load of every
  record, the parts a cold report is made of.

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
from intentusnet.cache.savings import UsageLedger


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
    listing = _median_s(store.list, 5)
    row("store.list() of every record, per record", listing / n * 1e6)
    loads = _median_s(
        lambda: [store.load(s.execution_id) for s in store.list()], 3
    )
    row("store.load() of every record, per record", loads / n * 1e6)
    cold = _median_s(lambda: savings_report(store), 3)
    row("savings_report (cold: every record read), per record", cold / n * 1e6)
    ledger = UsageLedger(store)
    ledger.report()
    warm = _median_s(ledger.report, 5)
    row("UsageLedger.report (warm: listing + hit journal), per hit", warm / n * 1e6)
    row("  the whole warm report", warm * 1e3, "ms")
    store.close()


if __name__ == "__main__":
    main()
