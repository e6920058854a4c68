import pytest

from intentusnet import (
    AgentDefinition,
    AgentRegistrationError,
    AgentRegistry,
    IntentRef,
)


def _noop(env, ctx):
    return {}


def test_candidates_ordered_by_priority_then_name():
    """Candidates come in priority order; equal priorities fall back to name."""
    reg = AgentRegistry()
    for name, prio in [("zeta", 10), ("alpha", 10), ("mid", 5), ("beta", 10)]:
        reg.register(AgentDefinition(name=name, intents=["x"], priority=prio), _noop)
    names = [a.name for a in reg.candidates(IntentRef(name="x"))]
    assert names == ["mid", "alpha", "beta", "zeta"]


def test_registration_order_does_not_change_candidates():
    """Two registries filled in different orders give the same candidates."""
    defs = [
        AgentDefinition(name=n, intents=["x"], priority=p)
        for n, p in [("c", 1), ("a", 1), ("b", 0)]
    ]
    one, two = AgentRegistry(), AgentRegistry()
    for d in defs:
        one.register(d, _noop)
    for d in reversed(defs):
        two.register(d, _noop)
    assert [a.name for a in one.candidates(IntentRef(name="x"))] == [
        a.name for a in two.candidates(IntentRef(name="x"))
    ]


def test_candidates_match_intent_version():
    """An agent for version 2.0 is not a candidate for version 1.0."""
    reg = AgentRegistry()
    reg.register(
        AgentDefinition(name="v2", intents=[IntentRef(name="x", version="2.0")]),
        _noop,
    )
    assert reg.candidates(IntentRef(name="x")) == ()
    assert [a.name for a in reg.candidates(IntentRef(name="x", version="2.0"))] == [
        "v2"
    ]


def test_duplicate_name_refused():
    """Registering a second agent under a taken name raises and keeps the first."""
    reg = AgentRegistry()
    first = reg.register(AgentDefinition(name="a", intents=["x"]), _noop)
    with pytest.raises(AgentRegistrationError, match="already registered"):
        reg.register(AgentDefinition(name="a", intents=["y"]), _noop)
    assert reg.get("a") is first
    assert reg.candidates(IntentRef(name="y")) == ()


def test_decorator_uses_function_name(router):
    """@router.agent without a name registers under the function's name."""

    @router.agent("x")
    def summarizer(env, ctx):
        return {}

    assert "summarizer" in router.registry


def test_bad_agent_name_refused(router):
    """An agent name with a slash or a space is refused with a clear error."""
    with pytest.raises(AgentRegistrationError, match="invalid agent definition"):
        router.agent("x", name="bad/name")(_noop)


def test_non_callable_handler_refused():
    """A handler that is neither callable nor has handle() is refused."""
    reg = AgentRegistry()
    with pytest.raises(AgentRegistrationError, match="callable"):
        reg.register(AgentDefinition(name="a", intents=["x"]), 42)  # type: ignore[arg-type]


def test_object_with_handle_method(router):
    """An object with a handle() method is an agent."""

    class Greeter:
        def handle(self, env, ctx):
            return {"hello": env.payload["name"]}

    router.register(AgentDefinition(name="greeter", intents=["greet"]), Greeter())
    resp = router.route_intent({"intent": {"name": "greet"}, "payload": {"name": "x"}})
    assert resp.payload == {"hello": "x"}


def test_async_callable_object_detected(router):
    """An object whose __call__ is async is run as an async agent."""

    class Echo:
        async def __call__(self, env, ctx):
            return {"echo": True}

    entry = router.register(AgentDefinition(name="echo", intents=["e"]), Echo())
    assert entry.is_async
    assert router.route_intent({"intent": {"name": "e"}}).payload == {"echo": True}
