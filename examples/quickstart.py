"""IntentusNet in five minutes: routing, strategies, faults as data, timeouts.

Run: python examples/quickstart.py
"""

from __future__ import annotations

import asyncio
import time

from intentusnet import (
    AgentContext,
    IntentEnvelope,
    IntentRef,
    IntentRouter,
    RoutingOptions,
)


def build_router() -> IntentRouter:
    """Three agents for one intent: a fast one, a failing one, a slow one."""
    router = IntentRouter()

    @router.agent("summarize", name="flaky", priority=10)
    def flaky(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        raise ConnectionError("model endpoint refused the connection")

    @router.agent("summarize", name="short", priority=20)
    def short(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        text = str(env.payload["text"])
        return {"summary": text.split(".")[0] + ".", "attempt": ctx.attempt}

    @router.agent("summarize", name="thorough", priority=30)
    async def thorough(env: IntentEnvelope, ctx: AgentContext) -> dict[str, object]:
        await asyncio.sleep(0.2)  # a slow model
        return {"summary": str(env.payload["text"])}

    return router


def envelope(strategy: str = "DIRECT", **routing: object) -> IntentEnvelope:
    """An intent to summarise a short text, routed as asked."""
    return IntentEnvelope(
        intent=IntentRef(name="summarize"),
        payload={"text": "Routers pick agents. Records remember everything."},
        routing=RoutingOptions(strategy=strategy, **routing),  # type: ignore[arg-type]
    )


def show(title: str, router: IntentRouter, env: IntentEnvelope) -> None:
    """Route one envelope and print what happened."""
    started = time.perf_counter()
    resp = router.route_intent(env)
    took = (time.perf_counter() - started) * 1000
    print(f"\n== {title}  ({took:.0f} ms)")
    print("   candidates in order:", resp.metadata.decision.candidates)  # type: ignore[union-attr]
    for attempt in resp.metadata.attempts:
        code = f" {attempt.error_code.value}" if attempt.error_code else ""
        print(f"   - {attempt.agent}: {attempt.outcome}{code}")
    if resp.status == "success":
        print(f"   answered by {resp.metadata.agent}: {resp.payload}")
    else:
        assert resp.error is not None
        print(f"   error {resp.error.code.value}: {resp.error.message}")


def main() -> None:
    """Walk through each strategy."""
    with build_router() as router:
        print(
            "Agents for 'summarize', by priority: flaky (10), short (20), thorough (30)"
        )
        show(
            "DIRECT picks the first candidate (and its fault is data)",
            router,
            envelope(),
        )
        show("FALLBACK moves past the failure", router, envelope("FALLBACK"))
        show("BROADCAST asks everyone", router, envelope("BROADCAST"))
        show("PARALLEL takes the first success", router, envelope("PARALLEL"))
        show(
            "a timeout bounds each attempt",
            router,
            envelope("DIRECT", target_agent="thorough", timeout_ms=50),
        )
        same = envelope().metadata.request_id != envelope().metadata.request_id
        print(f"\nTwo requests, different ids ({same}), same hash:")
        from intentusnet import compute_hash

        print("  ", compute_hash(envelope()))
        print("  ", compute_hash(envelope()))


if __name__ == "__main__":
    main()
