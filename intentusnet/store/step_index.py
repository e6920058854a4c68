"""The step index: which records hold an ended step of a name and arguments.

Every store keeps, beside its catalog, one entry per ``STEP_END`` line of its
records of the intents in :data:`INDEXED_INTENTS`: (the record's envelope hash,
the step's name, its ``argsHash``) -> (execution id, step number), newest
record first. It is derived data like the
catalog (written with a record's row, rebuilt by ``reindex``), and only a
pointer: whoever answers from it loads the record (which verifies it) and
checks the step there. The MCP proxy asks it for the recorded answers to a call
of one upstream in every session (docs/mcp.md); any lookup of recorded steps by
what they were called with can.
"""

from __future__ import annotations

from typing import Final, NamedTuple, Protocol, TypeAlias, runtime_checkable

from .._util.jsonvalue import JSONObject
from ..record.model import EventType, ExecutionRecord

__all__ = [
    "INDEXED_INTENTS",
    "StepIndex",
    "StepKey",
    "StepRef",
    "ended_step",
    "ended_steps",
    "indexed",
]

#: The intents whose records' steps are indexed: the MCP proxy's sessions
#: (``integrations/mcp``), whose calls are looked up by their arguments. Not
#: every intent: a row of the file store's step index costs a recorded step
#: about 6-12 us more (routing an execution of 10 steps, file store on tmpfs),
#: a quarter to a half of what a step costs without it, for lookups no other
#: part of the project makes.
INDEXED_INTENTS: Final = frozenset({"mcp.session"})

#: One ended step as its ``STEP_END`` line names it: (name, argsHash, number).
StepKey: TypeAlias = tuple[str, str, int]
#: A step index row: (envelope hash, name, args hash, created_us, id, number).
StepRow: TypeAlias = tuple[str, str, str, int, str, int]


class StepRef(NamedTuple):
    """An ended step of a record: where a lookup of the step index points.

    Added in 0.1.0.
    """

    execution_id: str
    step: int


@runtime_checkable
class StepIndex(Protocol):
    """A store that finds recorded steps by name and arguments (added in 0.1.0).

    The file store keeps the index in its catalog, PostgreSQL in a table beside
    its records, the memory store reads its records.
    """

    def find_steps(
        self,
        envelope_hash: str,
        name: str,
        args_hash: str | None = None,
        *,
        limit: int | None = None,
    ) -> list[StepRef]:
        """The ended steps named ``name`` of records with this envelope hash.

        Only records of the intents in :data:`INDEXED_INTENTS` are indexed.

        Args:
            envelope_hash: the records' envelope hash.
            name: the step's name, exactly.
            args_hash: the step's ``argsHash``; ``None`` for any arguments.
            limit: at most this many, ``None`` for all.

        Returns:
            Newest record first (by creation, then id), and a record's steps in
            their order. Only what the index says: load the record to use it.
        """
        ...


def indexed(intent: str) -> bool:
    """Whether the steps of records of ``intent`` are indexed."""
    return intent in INDEXED_INTENTS


def ended_step(data: JSONObject) -> StepKey | None:
    """The index key of a ``STEP_END`` line's data; None if it names no step."""
    name, args_hash, number = data.get("name"), data.get("argsHash"), data.get("step")
    if type(name) is str and type(args_hash) is str and type(number) is int:
        return name, args_hash, number
    return None


def ended_steps(record: ExecutionRecord) -> list[StepKey]:
    """The index keys of every ``STEP_END`` line of ``record``, in order.

    None unless the record's intent is indexed (:data:`INDEXED_INTENTS`).
    """
    found: list[StepKey] = []
    if not indexed(record.header.intent_name):
        return found
    for event in record.events:
        if event.type is EventType.STEP_END:
            key = ended_step(event.data)
            if key is not None:
                found.append(key)
    return found


def step_rows(
    envelope_hash: str, created_us: int, execution_id: str, keys: list[StepKey]
) -> list[StepRow]:
    """The index rows of one record's ended steps."""
    return [
        (envelope_hash, name, args_hash, created_us, execution_id, number)
        for name, args_hash, number in keys
    ]
