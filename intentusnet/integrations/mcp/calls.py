"""The recorded calls of an upstream's MCP sessions, answering a replayed or cached one.

A call is a content-addressed unit: matched by its step name
(``mcp:tools/call:TOOL``, ...) and the canonical hash of its arguments, among
the sessions of one upstream (the records whose envelope names it), newest
first. The newest session holding an answer to a call answers it, by
occurrence: the n-th call with these arguments gets that session's n-th
recorded answer, and the last one once they run out, so a client that asks
again gets the same answer again.

An answer the server said was outdated is not given: a listing recorded before
a ``notifications/*/list_changed`` of its kind in its session, or a
``resources/read`` before a ``notifications/resources/updated`` of its URI. In a
``cache`` session the same notification, live, drops the answers known so far;
and a call the session forwarded answers its next identical call (read back
from the session's own record).
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from collections.abc import Sequence
from typing import TYPE_CHECKING, Final, TypeAlias

from ..._util.jsonvalue import JSONObject, JSONValue
from ...record.model import ExecutionRecord
from ...replay import diff_paths
from ...routing.seams import LIVE, REPLAY_ERROR, SERVE
from ...steps.cassette import Decision
from ...steps.view import RecordedStep, record_steps
from .jsonrpc import CALL_METHODS, OUTDATES, PROGRESS, destructive_tools

if TYPE_CHECKING:
    from ...store.protocol import ExecutionStore

__all__ = ["RecordedCalls", "outdated"]

_NEAREST: Final = 3
_CALL_PREFIXES: Final = tuple(f"mcp:{method}" for method in sorted(CALL_METHODS))
_Key: TypeAlias = tuple[str, str]


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


def outdated(name: str, args: JSONValue, notice: str, params: JSONValue) -> bool:
    """The answer to step ``name`` (``args``) is outdated by the server's ``notice``.

    ``notice`` is a notification's step name (``mcp:notifications/...``) and
    ``params`` its parameters.
    """
    if name not in OUTDATES.get(notice, ()):
        return False
    if name != "mcp:resources/read":
        return True
    uri = params.get("uri") if isinstance(params, dict) else None
    return isinstance(args, dict) and args.get("uri") == uri


class RecordedCalls:
    """The answered MCP calls of an upstream's sessions, by name and arguments hash.

    Also the cassette a ``cache`` session's execution is routed with: a call
    a session holds is served (its recorded failure raised again), anything
    else, and every side effect and listing, is forwarded.

    Args:
        records: the sessions, newest first.
    """

    def __init__(self, records: Sequence[ExecutionRecord]) -> None:
        self.records = list(records)
        #: a replayed session is never parked (``seams.Cassette.attention``)
        self.attention: JSONObject | None = None
        #: each call's answers: from the newest session holding one
        self._queues: dict[_Key, tuple[str, list[RecordedStep]]] = {}
        self._by_name: dict[str, list[RecordedStep]] = defaultdict(list)
        self._calls: dict[_Key, int] = defaultdict(int)
        #: calls a session holds no answer to (cancelled, cut short)
        self._unanswered: dict[_Key, tuple[str, RecordedStep]] = {}
        #: the progress notifications recorded for each call
        self._progress: dict[tuple[str, int], list[JSONObject]] = defaultdict(list)
        #: the tools a recorded tools/list marks destructiveHint: true
        self.destructive: set[str] = set()
        #: a cache session's own record, and the calls it forwarded
        self._own: tuple[ExecutionStore, str] | None = None
        self._asked: dict[_Key, JSONValue] = {}
        self._forwarded: dict[_Key, int] = {}
        for record in self.records:
            self._add(record.execution_id, record_steps(record), own=False)

    def _add(self, source: str, steps: Sequence[RecordedStep], *, own: bool) -> None:
        """Index one session's answered calls, less those it was told are outdated."""
        found: dict[_Key, list[RecordedStep]] = defaultdict(list)
        for step in steps:
            if not step.name.startswith("mcp:"):
                continue
            if step.parent is not None:  # what the server sent during a call
                if step.name == PROGRESS and isinstance(step.args, dict):
                    self._progress[source, step.parent].append(step.args)
                continue
            if step.name in OUTDATES:
                for key in [k for k, v in found.items() if self._stale(k, v, step)]:
                    del found[key]
            elif _answered(step):
                found[step.name, step.args_hash].append(step)
            elif not own:
                self._unanswered.setdefault((step.name, step.args_hash), (source, step))
        for key, answers in found.items():
            if key in self._queues and not own:
                continue  # a newer session answers it
            self._queues[key] = (source, answers)
            self._by_name[key[0]].extend(answers)
            if key[0] == "mcp:tools/list":
                for answer in answers:
                    self.destructive |= destructive_tools(answer.output)

    @staticmethod
    def _stale(key: _Key, answers: list[RecordedStep], notice: RecordedStep) -> bool:
        return outdated(key[0], answers[0].args, notice.name, notice.args)

    @property
    def execution_id(self) -> str:
        """The newest session the answers come from."""
        return self.records[0].execution_id if self.records else "none"

    def find(self, name: str, args_hash: str) -> tuple[str, RecordedStep] | None:
        """The session and recorded answer to this call, or ``None``.

        A listing (``initialize``, ``tools/list``, ...) whose parameters differ
        gets the first recorded one of its kind.
        """
        key = (name, args_hash)
        if key not in self._queues and key in self._forwarded:
            self._read_own()
        held = self._queues.get(key)
        if held is None:
            if is_call(name):
                return None
            for (named, _), (source, answers) in self._queues.items():
                if named == name:
                    return source, answers[0]
            return None
        self._calls[key] += 1
        source, queue = held
        return source, queue[min(self._calls[key], len(queue)) - 1]

    def progress(self, source: str, step: RecordedStep) -> list[JSONObject]:
        """The progress notifications recorded during ``step``, in order.

        Each is the notification's ``params`` less its ``progressToken``.
        """
        return self._progress.get((source, step.number), [])

    def unanswered(self, name: str, args_hash: str) -> tuple[str, RecordedStep] | None:
        """A recorded call with these arguments that got no answer, if any.

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

    # -- a cache session: what it learns live ----------------------------------

    def own(self, store: ExecutionStore, execution_id: str) -> None:
        """The cache session's own record: the calls it forwards answer again."""
        self._own = (store, execution_id)

    def notified(self, notice: str, params: JSONValue) -> None:
        """The server sent ``notice`` (a step name) live: drop what it outdates."""
        for key in [
            k
            for k, v in self._queues.items()
            if outdated(k[0], v[1][0].args, notice, params)
        ]:
            del self._queues[key]
        for key in [
            k
            for k in self._forwarded
            if outdated(k[0], self._asked.get(k), notice, params)
        ]:
            del self._forwarded[key]

    def _read_own(self) -> None:
        """Index the answers the own record holds to the calls forwarded."""
        if self._own is None:
            return
        store, execution_id = self._own
        numbers = set(self._forwarded.values())
        steps = [
            s for s in record_steps(store.load(execution_id)) if s.number in numbers
        ]
        self._forwarded.clear()
        self._add(execution_id, steps, own=True)

    # -- the routing.seams.Cassette protocol (a cache session) -----------------

    def decide(
        self, name: str, args: JSONValue, args_hash: str, *, side_effect: bool
    ) -> Decision:
        """Serve a recorded call; forward a miss, a listing and a side effect."""
        if side_effect or not is_call(name):
            return Decision(LIVE)
        found = self.find(name, args_hash)
        if found is None:
            self._asked[name, args_hash] = args
            return Decision(LIVE)
        source, step = found
        return Decision(SERVE if step.ok else REPLAY_ERROR, step, served_from=source)

    def ended(
        self,
        number: int,
        name: str,
        args_hash: str,
        source: str,
        decision: object,
        outcome: str,
    ) -> None:
        """Note a call forwarded: its answer, once recorded, answers it again."""
        key = (name, args_hash)
        if source == "live" and key in self._asked:
            self._forwarded[key] = number

    def child(self, execution_id: str) -> None:
        """MCP sessions route no child intents."""
        return None
