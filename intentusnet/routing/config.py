"""The router's configuration for an intent, and its fingerprint (config drift).

A record's header carries the configuration its execution was routed under:
the agents registered for its intent (name, version, priority, in routing
order) and the strategy asked for, with a fingerprint over them. Two runs of
the same envelope with different fingerprints ran under different
configurations: an agent was added, removed, upgraded or re-prioritised, or
another strategy was asked for. ``diff`` and ``debug`` report it.
"""

from __future__ import annotations

from .._util.jsonvalue import JSONObject, JSONValue
from ..envelope import IntentRef, RoutingStrategy
from ..hashing import canonical_json, hash_bytes
from .agents import AgentRegistry

__all__ = ["configuration"]

#: The format of the configuration object (its fingerprint covers it too).
CONFIG_VERSION = 1


def configuration(
    registry: AgentRegistry, intent: IntentRef, strategy: RoutingStrategy
) -> JSONObject:
    """``{"fingerprint", "strategy", "agents"}`` for ``intent`` in ``registry``.

    The fingerprint is ``"sha256:"`` + the hex SHA-256 of the RFC 8785 JSON of
    ``[1, strategy, [[name, version, priority], ...]]``.
    """
    agents: list[JSONValue] = [
        {
            "name": agent.name,
            "version": agent.definition.version,
            "priority": agent.definition.priority,
        }
        for agent in registry.candidates(intent)
    ]
    hashed: list[JSONValue] = [
        CONFIG_VERSION,
        strategy.value,
        [
            [a["name"], a["version"], a["priority"]]
            for a in agents
            if isinstance(a, dict)
        ],
    ]
    return {
        "fingerprint": hash_bytes(canonical_json(hashed)),
        "strategy": strategy.value,
        "agents": agents,
    }
