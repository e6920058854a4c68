"""IntentusNet in five minutes.

Routing with every strategy, faults as data and timeouts; then, recording to the
default store, force-replaying the record of a process that was killed
mid-execution, and recording, inspecting and replaying a FALLBACK execution,
checking an envelope against it.

The records stay in the default store (``.intentusnet/records`` under the
current directory, or ``$INTENTUSNET_STORE``), and the last execution's envelope
in ``.intentusnet/envelope.json``, so that the README's commands can be tried
next: ``intentusnet inspect last``, ``intentusnet replay last --verify-envelope
.intentusnet/envelope.json``.

Run: python examples/quickstart.py
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from intentusnet import (
    AgentContext,
    FileExecutionStore,
    IntentEnvelope,
    IntentRef,
    IntentRouter,
    ReplayEngine,
    ReplayHashMismatch,
    ReplayNotAllowed,
    RoutingOptions,
    compute_hash,
)

TEXT = "Routers pick agents. Records remember everything."
#: Where the recorded FALLBACK envelope is kept for ``replay --verify-envelope``.
ENVELOPE_FILE = Path(".intentusnet") / "envelope.json"


def build_router(store: FileExecutionStore | None = None) -> IntentRouter:
    """Three agents for one intent: a failing one, a fast one, a slow one."""
    router = IntentRouter(store=store)

    @router.agent("summarize", name="flaky", priority=10)
    def flaky(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        raise ConnectionError("model endpoint refused the connection")

    @router.agent("summarize", name="short", priority=20)
    def short(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        return {"summary": str(env.payload["text"]).split(".")[0] + "."}

    @router.agent("summarize", name="thorough", priority=30)
    async def thorough(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        if env.payload.get("hang"):
            print(ctx.execution_id, flush=True)  # tell the parent where we are
            await asyncio.sleep(3600)
        await asyncio.sleep(0.2)  # a slow model
        return {"summary": str(env.payload["text"])}

    return router


def envelope(
    strategy: str = "DIRECT", text: str = TEXT, **routing: object
) -> IntentEnvelope:
    """An intent to summarise a text, routed as asked."""
    return IntentEnvelope(
        intent=IntentRef(name="summarize"),
        payload={"text": text},
        routing=RoutingOptions(strategy=strategy, **routing),  # type: ignore[arg-type]
    )


def show(title: str, router: IntentRouter, env: IntentEnvelope) -> str:
    """Route one envelope, print what happened, return the execution id."""
    started = time.perf_counter()
    resp = router.route_intent(env)
    took = (time.perf_counter() - started) * 1000
    decision = resp.metadata.decision
    print(f"\n== {title}  ({took:.0f} ms)")
    print("   candidates in order:", decision.candidates if decision else [])
    for attempt in resp.metadata.attempts:
        code = f" {attempt.error_code.value}" if attempt.error_code else ""
        print(f"   - {attempt.agent}: {attempt.outcome}{code}")
    if resp.status == "success":
        print(f"   answer ({resp.metadata.agent or 'all'}): {resp.payload}")
    else:
        assert resp.error is not None
        print(f"   error {resp.error.code.value}: {resp.error.message}")
    return str(resp.metadata.execution_id)


def part_one() -> None:
    """Strategies, faults as data, timeouts; no store."""
    print("PART 1 - routing (agents by priority: flaky 10, short 20, thorough 30)")
    with build_router() as router:
        show("DIRECT picks the first candidate; its fault is data", router, envelope())
        show("FALLBACK moves past the failure", router, envelope("FALLBACK"))
        show("BROADCAST asks everyone", router, envelope("BROADCAST"))
        show("PARALLEL takes the first success", router, envelope("PARALLEL"))
        show(
            "a timeout bounds each attempt",
            router,
            envelope("DIRECT", target_agent="thorough", timeout_ms=50),
        )
    print("\nTwo requests with different ids and times, one hash:")
    print("  ", compute_hash(envelope()))
    print("  ", compute_hash(envelope()))


def part_two(root: str) -> None:
    """A child process killed mid-execution leaves an incomplete record."""
    print(f"\nPART 2 - a killed process (store: {root})")
    child = subprocess.Popen(
        [sys.executable, __file__, "--child", root],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    execution_id = child.stdout.readline().strip()  # the slow agent has started
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    print(f"   child {child.pid} killed with SIGKILL during {execution_id}")

    store = FileExecutionStore(root)
    engine = ReplayEngine.from_store(store, execution_id)
    print(f"   is_replayable() -> {engine.is_replayable()}")
    try:
        engine.replay()
    except ReplayNotAllowed as exc:
        print(f"   replay() refuses: {exc}")
    forced = engine.replay(force=True)
    print(f"   replay(force=True): partial={forced.partial}, payload={forced.payload}")
    for warning in forced.warnings:
        print(f"     warning: {warning}")


def part_three(root: str) -> None:
    """Record, inspect, replay, verify an envelope; keep the envelope for the CLI."""
    print(f"\nPART 3 - records (store: {root})")
    store = FileExecutionStore(root)
    with build_router(store) as router:
        env = envelope("FALLBACK")
        execution_id = show("a recorded FALLBACK execution", router, env)

    record = store.load(execution_id)
    header = record.header
    print(
        f"\n   record {header.execution_id}: {header.status.value}, "
        f"replayable={header.replayable}, answered by {header.agent}"
    )
    for event in record.events:
        print(f"   {event.at_ms:8.3f} ms  {event.type.value}")
    report = store.verify(execution_id)
    print(f"   {report.events_verified}/{report.events_total} events verified")

    result = ReplayEngine(record).replay(env=env)  # nothing runs
    print(f"\n== replay (from_replay={result.from_replay}): {result.payload}")
    try:
        ReplayEngine(record).replay(env=envelope("FALLBACK", text="Another text."))
    except ReplayHashMismatch as exc:
        print(f"== replay with another envelope is refused: differs at {exc.paths}")

    ENVELOPE_FILE.parent.mkdir(parents=True, exist_ok=True)
    ENVELOPE_FILE.write_text(json.dumps(env.to_wire(), indent=2) + "\n")


def child(root: str) -> None:
    """Broadcast to every agent; the last one hangs until the parent kills us."""
    with build_router(FileExecutionStore(root)) as router:
        router.route_intent(
            IntentEnvelope(
                intent=IntentRef(name="summarize"),
                payload={"text": TEXT, "hang": True},
                routing=RoutingOptions(strategy="BROADCAST"),
            )
        )


def main() -> None:
    """Run the three parts; the records stay in the default store."""
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2])
        return
    part_one()
    # The default store: $INTENTUSNET_STORE, or .intentusnet/records here.
    root = str(FileExecutionStore().root)
    part_two(root)
    part_three(root)  # last, so that `last` names a replayable record
    print(f"\nThe records are kept in {root}; try:")
    print("   intentusnet records list")
    print("   intentusnet inspect last")
    print(f"   intentusnet replay last --verify-envelope {ENVELOPE_FILE}")
    print("   intentusnet verify --all")


if __name__ == "__main__":
    main()
