"""What OpenTelemetry tracing adds to a recorded execution, and what the seam costs.

Run: python benchmarks/bench_otel.py [--dir PATH] [--before CHECKOUT]

One recorded execution (file store in a temporary directory under --dir, e.g.
/dev/shm; an echo agent making one step: three spans) is timed not
instrumented, then instrumented with an SDK TracerProvider whose
BatchSpanProcessor hands the spans to an exporter that drops them (the cost
measured is the spans', not a collector's). Target: instrumented <= 1.15x.

--before CHECKOUT (an IntentusNet checkout from before the observer seam, e.g.
``git worktree add /tmp/before 3fd5121``) also times the not-instrumented
execution there, in a child process started in the same run, and prints the
ratio: the seam's cost when nothing observes (target: about 1.00x).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from _timing import median_us, row

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRef,
    IntentRouter,
)

NUMBER = 300  # executions per sample: each writes a record file
REPEAT = 7
ROUNDS = 3


def recorded_router(root: Path) -> tuple[IntentRouter, FileExecutionStore]:
    """A router recording into a file store at ``root``, with a one-step agent."""
    store = FileExecutionStore(root)
    router = IntentRouter(store=store)

    @router.agent("echo", name="echo")
    def echo(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        return {"n": ctx.step("double", {"x": 2}, lambda x: 2 * x), **env.payload}

    return router, store


def plain_us(base: str | None) -> float:
    """Median per recorded execution, not instrumented, in microseconds."""
    env = IntentEnvelope(intent=IntentRef(name="echo"), payload={"text": "hi"})
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        router, store = recorded_router(Path(tmp))
        with router:
            value = median_us(
                lambda: router.route_intent(env), number=NUMBER, repeat=REPEAT
            )
        store.close()
    return value


def traced_us(base: str | None) -> float:
    """Median per recorded execution, instrumented, in microseconds."""
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import (
        BatchSpanProcessor,
        SpanExporter,
        SpanExportResult,
    )

    from intentusnet.integrations.opentelemetry import instrument

    class Dropped(SpanExporter):
        """Takes the spans and keeps none."""

        def export(self, spans: Sequence[object]) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(BatchSpanProcessor(Dropped()))
    env = IntentEnvelope(intent=IntentRef(name="echo"), payload={"text": "hi"})
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        router, store = recorded_router(Path(tmp))
        instrumentation = instrument(router, tracer_provider=provider)
        with router:
            value = median_us(
                lambda: router.route_intent(env), number=NUMBER, repeat=REPEAT
            )
        instrumentation.uninstrument()
        store.close()
    provider.shutdown()
    return value


def before_us(checkout: str, base: str | None) -> float:
    """``plain_us`` measured in a child process importing ``checkout``'s package."""
    args = [sys.executable, __file__, "--plain-only"]
    if base is not None:
        args += ["--dir", base]
    done = subprocess.run(
        args,
        env={**os.environ, "PYTHONPATH": checkout},
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return float(done.stdout.strip())


def main() -> None:
    """Print the medians and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None, help="where the record stores go")
    parser.add_argument(
        "--before", default=None, help="a checkout from before the observer seam"
    )
    parser.add_argument("--plain-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.plain_only:
        print(plain_us(args.dir))
        return
    print("one recorded execution (file store, echo agent, one step)")
    plain, traced, before = [], [], []
    for _ in range(ROUNDS):  # interleaved: the machine's load drifts
        plain.append(plain_us(args.dir))
        traced.append(traced_us(args.dir))
        if args.before is not None:
            before.append(before_us(args.before, args.dir))
    mid = statistics.median
    row("not instrumented", mid(plain))
    row("instrumented (SDK, BatchSpanProcessor, dropping exporter)", mid(traced))
    row("ratio instrumented / not", mid(traced) / mid(plain), "x", "target <= 1.15x")
    if before:
        row("not instrumented, before the seam", mid(before))
        row(
            "ratio after / before the seam",
            mid(plain) / mid(before),
            "x",
            "target about 1.00x",
        )


if __name__ == "__main__":
    main()
