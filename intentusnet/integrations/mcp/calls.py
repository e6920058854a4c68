"""The recorded calls of an upstream's MCP sessions, answering a replayed or cached one.

A call is a content-addressed unit: its step name (``mcp:tools/call:TOOL``,
...) and the canonical hash of its arguments, among the sessions of one
upstream (the records whose envelope hash names it). The store's step index
(``store.step_index``) says which sessions hold it, newest first, in any
number of sessions; the newest whose record loads (so verifies), names the
step there and holds a servable answer answers it, by occurrence: the n-th
call with these arguments gets that session's n-th answer, and the last one
once they run out, so a client that asks again gets the same answer again.

The server may say an answer is outdated: a listing recorded before a
``notifications/*/list_changed`` of its kind in its session, or a
``resources/read`` before a ``notifications/resources/updated`` of its URI. An
outdated answer is stale for calls made after the change, never for the call
that came before it: a replay gives the n-th call the n-th answer, outdated
later or not, and refuses a call asked more often than recorded whose last
answer was outdated; a ``cache`` session never serves an outdated answer. In a
``cache`` session the same notification, live, drops the answers of
its kind recorded before it; an answer whose ``ttlMs`` hint has run out (by the
session's clock) is not served either; and a call the session forwarded
answers its next identical call (read back from the session's own record).
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from itertools import groupby
from typing import TYPE_CHECKING, Final, TypeAlias

from ..._util.jsonvalue import JSONObject, JSONValue
from ...errors import RecordIntegrityError, RecordNotFound, StoreError
from ...replay import ReplayEngine, diff_paths
from ...routing.seams import LIVE, REPLAY_ERROR, SERVE
from ...steps.cassette import Decision
from ...steps.view import RecordedStep
from ...store.step_index import StepIndex, StepRef
from .jsonrpc import CALL_METHODS, destructive_tools
from .recorded import Clock, RecordedSession, answered, outdated, ttl_ms

if TYPE_CHECKING:
    from ...store.protocol import ExecutionStore

__all__ = ["RecordedCalls", "outdated"]

_NEAREST: Final = 3
#: The most records followed from a served answer to the one the server gave.
_HOPS: Final = 64
_CALL_PREFIXES: Final = tuple(f"mcp:{method}" for method in sorted(CALL_METHODS))
_Key: TypeAlias = tuple[str, str]
_Found: TypeAlias = tuple[str, list[RecordedStep]]


def is_call(name: str) -> bool:
    """The step is a call keyed by its exact arguments (not a listing)."""
    return name.startswith(_CALL_PREFIXES)


class RecordedCalls:
    """The answered MCP calls of an upstream's sessions, by name and arguments hash.

    Also the cassette a ``cache`` session's execution is routed with: a call
    a session holds is served (its recorded failure raised again), anything
    else, and every side effect and listing, is forwarded.

    Args:
        store: where the sessions are; it keeps a step index.
        envelope_hash: the upstream's session envelope hash.
        newest: the newest session of the upstream (named in messages).
        only: the one session that answers (``--record ID``), or ``None``.
        force: sessions that are not replayable (cut short) answer too.
        clock: a cache session's clock: an answer whose ``ttlMs`` ran out is
            not served. ``None`` (a replay): answers never expire.
        replay: a replay: each call gets the answer its turn got in the
            session, outdated later or not (see the module's docstring).
    """

    def __init__(
        self,
        store: ExecutionStore,
        envelope_hash: str,
        newest: str,
        *,
        only: str | None = None,
        force: bool = False,
        clock: Clock | None = None,
        replay: bool = False,
    ) -> None:
        if not isinstance(store, StepIndex):
            raise StoreError(
                f"the store at {store.where} keeps no step index: "
                "MCP sessions are answered only from one that does"
            )
        self._store = store
        self._envelope_hash = envelope_hash
        self.execution_id = newest
        self._only = only
        self._force = force
        self._clock = clock
        self._replay = replay
        #: a replayed session is never parked (``seams.Cassette.attention``)
        self.attention: JSONObject | None = None
        #: the sessions loaded so far (None: not usable), and those that answered
        self._sessions: dict[str, RecordedSession | None] = {}
        self.answered_from: dict[str, None] = {}
        #: each call's answers, from the newest session holding one
        self._queues: dict[_Key, _Found] = {}
        self._calls: dict[_Key, int] = defaultdict(int)
        #: calls a session holds no answer to (cancelled, cut short)
        self._unanswered: dict[_Key, tuple[str, RecordedStep]] = {}
        #: the notifications a cache session's server sent live
        self._notices: list[tuple[str, JSONValue]] = []
        #: a cache session's own record, and the calls it forwarded
        self._own: tuple[ExecutionStore, str] | None = None
        self._asked: dict[_Key, JSONValue] = {}
        self._forwarded: dict[_Key, int] = {}
        self._destructive: set[str] | None = None

    # -- the sessions that answer ------------------------------------------------

    def _session(self, execution_id: str) -> RecordedSession | None:
        """A session that answers, loaded (and verified) once; None if not usable.

        A record that does not load (changed, cut, deleted) answers nothing,
        nor does one that is not replayable, unless ``force``.
        """
        if execution_id not in self._sessions:
            session = None
            try:
                record = self._store.load(execution_id)
            except (RecordIntegrityError, RecordNotFound):
                record = None
            if record is not None and (
                self._force or ReplayEngine(record).is_replayable()[0]
            ):
                session = RecordedSession(record)
            self._sessions[execution_id] = session
        return self._sessions[execution_id]

    def _refs(self, name: str, args_hash: str | None) -> list[StepRef]:
        found = self._store.find_steps(self._envelope_hash, name, args_hash)
        if self._only is not None:
            found = [ref for ref in found if ref.execution_id == self._only]
        return found

    def _resolve(self, name: str, args_hash: str | None) -> _Found | None:
        """The newest session's servable answers to a call (``None``: any args)."""
        for execution_id, refs in groupby(self._refs(name, args_hash), _execution):
            session = self._session(execution_id)
            if session is None:
                continue
            answers = []
            for ref in refs:
                try:
                    step = session.answer(ref.step, name, args_hash)
                except LookupError:
                    continue  # the index points at another step: not this call
                if not answered(step):
                    if args_hash is not None:
                        unanswered = (execution_id, step)
                        self._unanswered.setdefault((name, args_hash), unanswered)
                elif self._servable(session, step):
                    # a replay gives each call the answer its turn got, even
                    # one the server outdated later (the call came before that)
                    answers.append(step)
            if answers:
                return execution_id, answers
        return None

    def _servable(self, session: RecordedSession, step: RecordedStep) -> bool:
        """Not outdated (in its session unless a replay, or live), nor expired."""
        if not self._replay and session.outdated(step):
            return False
        if any(outdated(step.name, step.args, *n) for n in self._notices):
            return False
        return not self._expired(session, step)

    def _expired(self, session: RecordedSession, step: RecordedStep) -> bool:
        """A cache session's clock says the answer's ``ttlMs`` ran out.

        A step a cache session served from another record is as old as the
        answer it served (followed to the step the server answered); one whose
        origin cannot be read is taken to have run out, if it has a hint.
        """
        if self._clock is None or ttl_ms(step) is None:
            return False
        for _ in range(_HOPS):
            origin = session.origin(step)
            if origin is None:
                return session.expired(step, self._clock())
            found = self._session(origin[0])
            if found is None or origin[1] not in found.steps:
                return True
            session, step = found, found.steps[origin[1]]
        return True

    @property
    def destructive(self) -> set[str]:
        """The tools the newest recorded ``tools/list`` pages mark destructive."""
        if self._destructive is None:
            self._destructive = set()
            seen: set[str] = set()  # the pages (by arguments), newest first
            for ref in self._refs("mcp:tools/list", None):
                session = self._session(ref.execution_id)
                if session is None:
                    continue
                step = session.steps.get(ref.step)
                if step is None or not step.ok or step.args_hash in seen:
                    continue
                seen.add(step.args_hash)
                self._destructive |= destructive_tools(step.output)
        return self._destructive

    # -- answering -----------------------------------------------------------------

    def find(self, name: str, args_hash: str) -> tuple[str, RecordedStep] | None:
        """The session and recorded answer to this call, or ``None``.

        A listing (``initialize``, ``tools/list``, ...) whose parameters differ
        gets the first recorded one of its kind in the newest session with one.
        """
        key = (name, args_hash)
        if key not in self._queues and key in self._forwarded:
            self._read_own()
        if key not in self._queues:
            found = self._resolve(name, args_hash)
            if found is None:
                if is_call(name):
                    return None
                found = self._resolve(name, None)
                if found is None:
                    return None
                found = (found[0], found[1][:1])
            self._queues[key] = found
        self._calls[key] += 1
        source, queue = self._queues[key]
        if (
            self._replay
            and self._calls[key] > len(queue)
            and self._stale(source, queue[-1])
        ):
            return None  # asked again after the change: the last answer is stale
        self.answered_from[source] = None
        return source, queue[min(self._calls[key], len(queue)) - 1]

    def _stale(self, source: str, step: RecordedStep) -> bool:
        """The server outdated ``step``'s answer in its session (a replay's rule)."""
        session = self._sessions.get(source)
        return session is not None and session.outdated(step)

    def progress(self, source: str, step: RecordedStep) -> list[JSONObject]:
        """The progress notifications recorded during ``step``, in order.

        Each is the notification's ``params`` less its ``progressToken``.
        """
        session = self._sessions.get(source)
        return [] if session is None else session.progress(step.number)

    def unanswered(self, name: str, args_hash: str) -> tuple[str, RecordedStep] | None:
        """A recorded call with these arguments that got no answer, if any.

        The client cancelled it, or it was in flight when the upstream (or
        the proxy) stopped.
        """
        return self._unanswered.get((name, args_hash))

    def nearest(self, name: str, args: JSONValue) -> list[str]:
        """Describe the recorded calls most like ``name`` with ``args``."""
        described = []
        for ref in self._refs(name, None):
            session = self._session(ref.execution_id)
            step = None if session is None else session.steps.get(ref.step)
            if step is None:
                continue
            paths = diff_paths(step.args, args, limit=5)
            differ = ", ".join(paths) if paths else "nothing visible"
            described.append(f"{step.args!r} (step {step.number}, differ at {differ})")
            if len(described) == _NEAREST:
                break
        if described:
            return described
        newest = self._session(self.execution_id) if self.execution_id else None
        names = {s.name for s in newest.steps.values()} if newest else set()
        close = difflib.get_close_matches(name, sorted(names), n=_NEAREST)
        return [f"{other} (another name)" for other in close]

    # -- a cache session: what it learns live ----------------------------------

    def own(self, store: ExecutionStore, execution_id: str) -> None:
        """The cache session's own record: the calls it forwards answer again."""
        self._own = (store, execution_id)

    def notified(self, notice: str, params: JSONValue) -> None:
        """The server sent ``notice`` (a step name) live: drop what it outdates."""
        self._notices.append((notice, params))
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
        own = RecordedSession(store.load(execution_id))
        for key, number in self._forwarded.items():
            step = own.steps.get(number)
            if step is not None and answered(step):
                self._queues[key] = (execution_id, [step])
                self._sessions[execution_id] = own
        self._forwarded.clear()

    # -- the routing.seams.Cassette protocol (a cache session) -----------------

    def decide(
        self, name: str, args: JSONValue, args_hash: str, *, side_effect: bool
    ) -> Decision:
        """Serve a recorded call; forward a miss, an expired answer, a listing."""
        if side_effect or not is_call(name):
            return Decision(LIVE)
        found = self.find(name, args_hash)
        if found is not None:
            source, step = found
            session = self._sessions.get(source)
            if session is None or not self._expired(session, step):
                action = SERVE if step.ok else REPLAY_ERROR
                return Decision(action, step, served_from=source)
            del self._queues[name, args_hash]  # ran out since it was found
        self._asked[name, args_hash] = args
        return Decision(LIVE)

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


def _execution(ref: StepRef) -> str:
    return ref.execution_id
