"""Agents: what they are, how they are registered, and how they are found.

An agent is a function ``(envelope, ctx)`` or an object with such a ``handle``
method, sync or async, returning a JSON object (``dict``) or an ``AgentResponse``.
The registry orders the candidates of an intent deterministically: priority
ascending, then name.
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Protocol, TypeAlias, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from ._json import JSONObject
from .envelope import AgentResponse, IntentEnvelope, IntentRef
from .errors import AgentRegistrationError

if TYPE_CHECKING:
    from .router import IntentRouter

__all__ = [
    "Agent",
    "AgentContext",
    "AgentDefinition",
    "AgentHandler",
    "AgentRegistry",
    "AgentResult",
    "RegisteredAgent",
]

AgentResult: TypeAlias = JSONObject | AgentResponse
AgentHandler: TypeAlias = Callable[
    [IntentEnvelope, "AgentContext"], AgentResult | Awaitable[AgentResult]
]


@runtime_checkable
class Agent(Protocol):
    """An object that handles intents; ``handle`` may be sync or async."""

    def handle(
        self, envelope: IntentEnvelope, ctx: AgentContext
    ) -> AgentResult | Awaitable[AgentResult]:
        """Handle one intent and return a JSON object or an ``AgentResponse``."""


class AgentDefinition(BaseModel):
    """Who an agent is and which intents it handles.

    Args:
        name: unique within a router; letters, digits and ``_ . : -``.
        intents: the intents it handles; a plain string means version ``1.0``.
        version: the agent's own version, recorded with its answers.
        priority: lower runs first among the candidates of an intent.
        description: free text for people.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")]
    intents: tuple[IntentRef, ...] = Field(min_length=1)
    version: str = "1.0"
    priority: int = 100
    description: str | None = None

    @field_validator("intents", mode="before")
    @classmethod
    def _intents_from_strings(cls, value: object) -> object:
        if isinstance(value, str | IntentRef):
            value = [value]
        if isinstance(value, Sequence):
            return [IntentRef(name=v) if isinstance(v, str) else v for v in value]
        return value


class AgentContext:
    """What an agent knows about the execution it runs in.

    Attributes:
        execution_id: the id of this execution (and of its record).
        agent: the name of the agent being run.
        attempt: 1-based number of this attempt within the execution.
        envelope: the envelope being handled.
        deadline: ``time.monotonic()`` value after which the router gives up on
            this attempt, or ``None`` when there is no timeout.
        router: the router running the agent.
    """

    __slots__ = ("agent", "attempt", "deadline", "envelope", "execution_id", "router")

    def __init__(
        self,
        *,
        execution_id: str,
        agent: str,
        attempt: int,
        envelope: IntentEnvelope,
        deadline: float | None,
        router: IntentRouter,
    ) -> None:
        self.execution_id = execution_id
        self.agent = agent
        self.attempt = attempt
        self.envelope = envelope
        self.deadline = deadline
        self.router = router

    @property
    def remaining_ms(self) -> float | None:
        """Milliseconds left before the attempt times out, or ``None``."""
        if self.deadline is None:
            return None
        return max(0.0, (self.deadline - time.monotonic()) * 1000.0)


@dataclass(frozen=True, slots=True)
class RegisteredAgent:
    """An agent definition with its callable, as the router runs it."""

    definition: AgentDefinition
    call: AgentHandler
    is_async: bool

    @property
    def name(self) -> str:
        """The agent's name."""
        return self.definition.name


def _as_callable(handler: AgentHandler | Agent) -> AgentHandler:
    if isinstance(handler, Agent) and not inspect.isfunction(handler):
        return handler.handle
    if callable(handler):
        return handler
    raise AgentRegistrationError(
        f"an agent must be callable or have a handle() method, got "
        f"{type(handler).__name__}"
    )


def _is_async(call: object) -> bool:
    if inspect.iscoroutinefunction(call):
        return True
    dunder = getattr(call, "__call__", None)  # noqa: B004 -- async __call__ objects
    return inspect.iscoroutinefunction(dunder)


class AgentRegistry:
    """Agents by name, and the ordered candidates of each intent.

    Thread-safe: registration takes a lock; lookups read immutable snapshots.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_name: dict[str, RegisteredAgent] = {}
        self._by_intent: dict[tuple[str, str], tuple[RegisteredAgent, ...]] = {}
        #: bumped on every change, so callers can cache derived decisions
        self.generation = 0

    def register(
        self, definition: AgentDefinition, handler: AgentHandler | Agent
    ) -> RegisteredAgent:
        """Add an agent.

        Raises:
            AgentRegistrationError: the name is taken, or the handler is not
                callable.
        """
        call = _as_callable(handler)
        entry = RegisteredAgent(definition, call, _is_async(call))
        with self._lock:
            if definition.name in self._by_name:
                raise AgentRegistrationError(
                    f"an agent named {definition.name!r} is already registered"
                )
            by_name = {**self._by_name, definition.name: entry}
            by_intent = dict(self._by_intent)
            for ref in definition.intents:
                key = (ref.name, ref.version)
                found = (*by_intent.get(key, ()), entry)
                by_intent[key] = tuple(
                    sorted(found, key=lambda a: (a.definition.priority, a.name))
                )
            self._by_name, self._by_intent = by_name, by_intent
            self.generation += 1
        return entry

    def get(self, name: str) -> RegisteredAgent | None:
        """Return the agent with that name, or ``None``."""
        return self._by_name.get(name)

    def candidates(self, intent: IntentRef) -> tuple[RegisteredAgent, ...]:
        """Agents registered for the intent's name and version, in routing order."""
        return self._by_intent.get((intent.name, intent.version), ())

    def intents(self) -> list[tuple[str, str]]:
        """Every (intent name, version) some agent handles, sorted."""
        return sorted(self._by_intent)

    def __len__(self) -> int:
        return len(self._by_name)

    def __contains__(self, name: object) -> bool:
        return name in self._by_name


def make_definition(
    intent: str | IntentRef | Sequence[str | IntentRef],
    *,
    name: str,
    version: str,
    priority: int,
    description: str | None,
) -> AgentDefinition:
    """Build an ``AgentDefinition``, turning validation errors into ours."""
    try:
        return AgentDefinition(
            name=name,
            intents=intent,  # strings are converted
            version=version,
            priority=priority,
            description=description,
        )
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"])
        raise AgentRegistrationError(
            f"invalid agent definition {name!r}: {where}: {first['msg']}"
        ) from None
