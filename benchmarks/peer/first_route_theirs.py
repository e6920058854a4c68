"""A fresh process's first routed intent with IntentusNet 1.3.0's public API."""

from intentusnet import (
    AgentDefinition,
    AgentRegistry,
    AgentResponse,
    BaseAgent,
    Capability,
    IntentContext,
    IntentEnvelope,
    IntentMetadata,
    IntentRef,
    IntentRouter,
)


class Echo(BaseAgent):
    """Answers the payload it is given."""

    def handle_intent(self, env: IntentEnvelope) -> AgentResponse:
        """The payload, as a success from this agent."""
        return AgentResponse.success({"echo": env.payload}, agent="echo")


registry = AgentRegistry()
router = IntentRouter(registry)
echo = AgentDefinition(name="echo", capabilities=[Capability(IntentRef(name="echo"))])
registry.register(Echo(echo, router))
now = "2026-01-01T00:00:00+00:00"  # the peer's envelope has no defaults
envelope = IntentEnvelope(
    version="1.0",
    intent=IntentRef(name="echo"),
    payload={"x": 1},
    context=IntentContext(sourceAgent="bench", timestamp=now),
    metadata=IntentMetadata(requestId="r", source="bench", createdAt=now, traceId="t"),
)
answer = router.route_intent(envelope)
assert answer.status == "success", answer
