"""IntentusNet 1.3.0's side of bench_peer.py: one row per run, its result as JSON.

Run by bench_peer.py with the peer's virtualenv python, never with this
checkout on the path (both packages are named ``intentusnet``). Drives only
the names its package exports (``IntentRouter``, ``AgentRegistry``,
``BaseAgent``, ``IntentEnvelope``, ``FileExecutionStore``, ``ReplayEngine``),
as its README shows.

Run: PEER_VENV/bin/python benchmarks/peer/theirs.py ROW [--dir DIR] [--quick]
"""

from __future__ import annotations

import argparse
import datetime as dt
import uuid

from _drive import batch_us, each_us, main, payload_1kb, payload_small

from intentusnet import (
    AgentDefinition,
    AgentRegistry,
    AgentResponse,
    BaseAgent,
    Capability,
    FileExecutionStore,
    IntentContext,
    IntentEnvelope,
    IntentMetadata,
    IntentRef,
    IntentRouter,
    ReplayEngine,
)


class Echo(BaseAgent):
    """Answers the payload it is given."""

    def handle_intent(self, env: IntentEnvelope) -> AgentResponse:
        """The payload, as a success from this agent."""
        return AgentResponse.success(
            env.payload, agent=self.definition.name, trace_id=env.metadata.traceId
        )


def echo_router(store: FileExecutionStore | None = None) -> IntentRouter:
    """A router with one agent, ``echo``, for intent ``echo`` version 1.0."""
    registry = AgentRegistry()
    router = IntentRouter(registry, record_store=store)
    definition = AgentDefinition(
        name="echo", capabilities=[Capability(intent=IntentRef(name="echo"))]
    )
    registry.register(Echo(definition, router))
    return router


def envelope(payload: dict[str, object]) -> IntentEnvelope:
    """An envelope for intent ``echo``; the peer's envelope has no defaults."""
    now = dt.datetime.now(dt.UTC).isoformat()
    return IntentEnvelope(
        version="1.0",
        intent=IntentRef(name="echo"),
        payload=payload,
        context=IntentContext(sourceAgent="bench", timestamp=now),
        metadata=IntentMetadata(
            requestId=str(uuid.uuid4()),
            source="bench",
            createdAt=now,
            traceId=str(uuid.uuid4()),
        ),
    )


def routed(router: IntentRouter, env: IntentEnvelope) -> AgentResponse:
    """``route_intent(env)``, then empty the path the peer's agent appended to.

    The peer's ``BaseAgent.handle`` appends its name to the envelope's
    ``routingMetadata.decisionPath`` on every call; routing one envelope again
    and again would grow that list (and each record, which holds it) without
    bound. Emptying it keeps every call the same work, as a new envelope's.
    """
    response = router.route_intent(env)
    env.routingMetadata.decisionPath.clear()
    return response


def route(payload: dict[str, object], quick: bool) -> dict[str, float]:
    """``route_intent`` of one prebuilt envelope, no store."""
    router = echo_router()
    env = envelope(payload)
    number, repeat = (200, 3) if quick else (5000, 9)
    return batch_us({"us": lambda: routed(router, env)}, number, repeat)


def route_small(args: argparse.Namespace) -> dict[str, float]:
    """Row 1, 2-byte payload."""
    return route(payload_small(), args.quick)


def route_1kb(args: argparse.Namespace) -> dict[str, float]:
    """Row 1, 1 KB payload."""
    return route(payload_1kb(), args.quick)


def record(args: argparse.Namespace) -> dict[str, float]:
    """Row 2: ``route_intent`` saving each execution's record (a closed file)."""
    router = echo_router(FileExecutionStore(args.dir))
    env = envelope(payload_small())
    number, repeat = (20, 3) if args.quick else (100, 9)
    return batch_us({"us": lambda: routed(router, env)}, number, repeat)


def load(args: argparse.Namespace) -> dict[str, float]:
    """Row 4: load + check + replay of records not loaded before; one again unchecked.

    The peer's store parses the file and checks nothing (no line hash, no
    chain). The one check 1.3.0 offers on a loaded record is its
    ``ReplayEngine.replay(env=...)``: the envelope given is hashed
    (``sha256`` of its sorted JSON) and compared with the header's
    ``envelopeHash`` (``envelope_hash_ok``). A first load passes the record's
    own envelope, so the peer checks what it can: the row the issue compares
    a first load with. The repeated load stays unchecked, as its row says.
    """
    store = FileExecutionStore(args.dir)
    router = echo_router(store)
    env = envelope(payload_small())
    calls = 50 if args.quick else 2000
    for _ in range(calls + 1):
        routed(router, env)
    ids = store.list_ids()
    assert len(ids) == calls + 1, "one record per routed intent"

    def checked(i: int) -> object:
        engine = ReplayEngine(store.load(ids[i]))
        result = engine.replay(env=engine.record.envelope)
        if not result.envelope_hash_ok:
            raise AssertionError(f"record {ids[i]}: envelope hash does not match")
        return result

    def replay(i: int) -> object:
        return ReplayEngine(store.load(ids[i])).replay()

    first = each_us(checked, calls)
    each_us(lambda _i: replay(calls), 100)  # the record below is now loaded before
    again = each_us(lambda _i: replay(calls), calls)
    return {"first": first, "repeat": again}


def replay_setup(args: argparse.Namespace) -> dict[str, str]:
    """Row 5's record for the peer's ``intentusnet replay ID``: route one."""
    store = FileExecutionStore(args.dir)
    routed(echo_router(store), envelope(payload_small()))
    (execution_id,) = store.list_ids()
    return {"id": execution_id}


if __name__ == "__main__":
    main(
        {
            "route_small": route_small,
            "route_1kb": route_1kb,
            "record": record,
            "load": load,
            "replay_setup": replay_setup,
        }
    )
