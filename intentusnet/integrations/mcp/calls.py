"""The recorded calls of an MCP session, answering a replayed or cached one.

A call is matched by its step name (``mcp:tools/call:TOOL``, ...) and the
canonical hash of its arguments, and by occurrence: the n-th call with these
arguments gets the n-th recorded answer, and the last one once they run out,
so a client that asks again gets the same answer again.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from typing import Final

from ..._util.jsonvalue import JSONObject, JSONValue
from ...record.model import ExecutionRecord
from ...replay import diff_paths
from ...routing.seams import LIVE, REPLAY_ERROR, SERVE
from ...steps.cassette import Decision
from ...steps.view import RecordedStep, record_steps
from .jsonrpc import CALL_METHODS, PROGRESS

__all__ = ["RecordedCalls"]

_NEAREST: Final = 3
_CALL_PREFIXES: Final = tuple(f"mcp:{method}" for method in sorted(CALL_METHODS))


def _answered(step: RecordedStep) -> bool:
    """The step holds the server's answer: a result, or a JSON-RPC error.

    A call the client cancelled, or one the upstream never answered (it
    exited), holds no answer to give again.
    """
    if step.outcome == "success":
        return True
    error = step.error or {}
    return step.outcome == "error" and error.get("type") == "UpstreamError"


def is_call(name: str) -> bool:
    """The step is a call keyed by its exact arguments (not a listing)."""
    return name.startswith(_CALL_PREFIXES)


class RecordedCalls:
    """The finished MCP steps of one record, by name and arguments hash.

    Also the cassette a ``cache`` session's execution is routed with: a call
    the record holds is served (its recorded failure raised again), anything
    else, and every side effect, runs live (is forwarded).

    Args:
        record: the session record.
    """

    def __init__(self, record: ExecutionRecord) -> None:
        self.record = record
        #: a replayed session is never parked (``seams.Cassette.attention``)
        self.attention: JSONObject | None = None
        self._queues: dict[tuple[str, str], list[RecordedStep]] = defaultdict(list)
        self._by_name: dict[str, list[RecordedStep]] = defaultdict(list)
        self._calls: dict[tuple[str, str], int] = defaultdict(int)
        #: calls the record holds no answer to (cancelled, cut short)
        self._unanswered: dict[tuple[str, str], RecordedStep] = {}
        #: the progress notifications recorded for each call, by its number
        self._progress: dict[int, list[JSONObject]] = defaultdict(list)
        for step in record_steps(record):
            if not step.name.startswith("mcp:"):
                continue
            if step.parent is not None:  # what the server sent during a call
                if step.name == PROGRESS and isinstance(step.args, dict):
                    self._progress[step.parent].append(step.args)
                continue
            if _answered(step):
                self._queues[step.name, step.args_hash].append(step)
                self._by_name[step.name].append(step)
            else:
                self._unanswered.setdefault((step.name, step.args_hash), step)

    @property
    def execution_id(self) -> str:
        """The record the answers come from."""
        return self.record.execution_id

    def find(self, name: str, args_hash: str) -> RecordedStep | None:
        """The recorded answer to this call, or ``None``.

        A listing (``initialize``, ``tools/list``, ...) whose parameters differ
        gets the first recorded one of its kind.
        """
        key = (name, args_hash)
        queue = self._queues.get(key)
        if not queue:
            named = self._by_name.get(name)
            return named[0] if named and not is_call(name) else None
        self._calls[key] += 1
        return queue[min(self._calls[key], len(queue)) - 1]

    def progress(self, step: RecordedStep) -> list[JSONObject]:
        """The progress notifications recorded during ``step``, in order.

        Each is the notification's ``params`` less its ``progressToken``.
        """
        return self._progress.get(step.number, [])

    def unanswered(self, name: str, args_hash: str) -> RecordedStep | None:
        """The recorded call with these arguments that got no answer, if any.

        The client cancelled it, or it was in flight when the upstream (or
        the proxy) stopped.
        """
        return self._unanswered.get((name, args_hash))

    def nearest(self, name: str, args: JSONValue) -> list[str]:
        """Describe the recorded calls most like ``name`` with ``args``."""
        same = self._by_name.get(name)
        if same:
            described = []
            for step in same[:_NEAREST]:
                paths = diff_paths(step.args, args, limit=5)
                differ = ", ".join(paths) if paths else "nothing visible"
                described.append(
                    f"{step.args!r} (step {step.number}, differ at {differ})"
                )
            return described
        close = difflib.get_close_matches(name, list(self._by_name), n=_NEAREST)
        return [f"{other} (another name)" for other in close]

    # -- the routing.seams.Cassette protocol (a cache session) -----------------

    def decide(
        self, name: str, args: JSONValue, args_hash: str, *, side_effect: bool
    ) -> Decision:
        """Serve a recorded call; forward a miss, a listing and a side effect."""
        if side_effect or not is_call(name):
            return Decision(LIVE)
        found = self.find(name, args_hash)
        if found is None:
            return Decision(LIVE)
        return Decision(SERVE if found.ok else REPLAY_ERROR, found)

    def ended(
        self,
        number: int,
        name: str,
        args_hash: str,
        source: str,
        decision: object,
        outcome: str,
    ) -> None:
        """Nothing to note: the session's own record says how each call ended."""

    def child(self, execution_id: str) -> None:
        """MCP sessions route no child intents."""
        return None
