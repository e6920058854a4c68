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

An answer is given only to a call asked in the protocol revision it was asked
in (:class:`~.recorded.Asker`, :meth:`~.recorded.RecordedSession.revision`): a
2025 session's answers never reach a 2026-07-28 request, nor the reverse, and
a request naming no revision gets only answers to requests that named none. A
record from before revisions were recorded, of a session with no
``initialize``, held stateless requests: it answers stateless requests (those
naming their revision in ``_meta``), as it did.

An answer marked ``cacheScope: "private"`` is given only to the client it was
given to (:class:`~.recorded.Asker`'s ``client``: the local user, or on
``--listen`` the credential it came with, all those with none being one
client), never to another.
"""

from __future__ import annotations

import difflib
from collections import defaultdict
from contextvars import ContextVar
from itertools import groupby
from typing import TYPE_CHECKING, Final, TypeAlias

from ..._util.jsonvalue import JSONObject, JSONValue
from ...errors import RecordIntegrityError, RecordNotFound, StoreError
from ...replay import ReplayEngine, diff_paths
from ...routing.seams import LIVE, REPLAY_ERROR, SERVE, StepEnd
from ...steps.cassette import Decision
from ...steps.view import RecordedStep
from ...store.step_index import StepIndex, StepRef
from .jsonrpc import CALL_METHODS, destructive_tools
from .recorded import (
    Asker,
    Clock,
    RecordedSession,
    answered,
    outdated,
    private,
    ttl_ms,
)

if TYPE_CHECKING:
    from ...store.protocol import ExecutionStore

__all__ = ["ASKER", "Asker", "RecordedCalls", "outdated"]

#: Who asks the call a cache session's step is routed for: set by the session
#: on each request's own task (the router's cassette protocol passes only the
#: step's name and arguments).
_NOBODY: Final = Asker()  # frozen: a shared default is safe
ASKER: ContextVar[Asker] = ContextVar("intentusnet_mcp_asker", default=_NOBODY)

_NEAREST: Final = 3
#: The most records followed from a served answer to the one the server gave.
_HOPS: Final = 64
_CALL_PREFIXES: Final = tuple(f"mcp:{method}" for method in sorted(CALL_METHODS))
_Key: TypeAlias = tuple[str, str, Asker]
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
        self._unanswered: dict[tuple[str, str], tuple[str, RecordedStep]] = {}
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

    def _resolve(
        self, name: str, args_hash: str | None, asker: Asker | None
    ) -> _Found | None:
        """The newest session's servable answers to a call (``None``: any args).

        ``asker``: who asks (its revision); ``None``: any revision.
        """
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
                if asker is not None and not self._fits(session, step, asker):
                    continue
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

    def _fits(self, session: RecordedSession, step: RecordedStep, asker: Asker) -> bool:
        """``step``'s answer may be given to ``asker``: its round, revision, client.

        A step a cache session served is judged by the step it was served
        from (its session's revision may not say). An old record that names
        no revision (stateless requests) answers stateless requests. A
        ``private`` answer goes only to the client it was given to.
        """
        source = self._answered_by(session, step) or (session, step)
        if source[0].continues(source[1]) != asker.continues:
            return False  # another round of a multi-round-trip exchange
        version, named = source[0].revision(source[1])
        if named is None:
            fits = asker.stateless
        else:
            fits = (version, named) == (asker.version, asker.stateless)
        if not fits or not private(source[1]):
            return fits
        return _sees(asker, source[0].client(source[1]))

    def _answered_by(
        self, session: RecordedSession, step: RecordedStep
    ) -> tuple[RecordedSession, RecordedStep] | None:
        """The session and step the server gave ``step``'s answer in.

        ``step`` itself when it was answered live; ``None`` when the record a
        served answer came from cannot be read.
        """
        for _ in range(_HOPS):
            origin = session.origin(step)
            if origin is None:
                return session, step
            found = self._session(origin[0])
            if found is None or origin[1] not in found.steps:
                return None
            session, step = found, found.steps[origin[1]]
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
        source = self._answered_by(session, step)
        return source is None or source[0].expired(source[1], self._clock())

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

    def find(
        self, name: str, args_hash: str, asker: Asker
    ) -> tuple[str, RecordedStep] | None:
        """The session and recorded answer to this call by ``asker``, or ``None``.

        A listing (``tools/list``, ...) whose parameters differ gets the first
        recorded one of its kind, of ``asker``'s revision, in the newest
        session with one. ``initialize`` is answered from a session that
        negotiated the revision the client asks for, else from the newest (a
        server answers its own revision when it does not speak the client's).
        """
        key = (name, args_hash, asker)
        if key not in self._queues and key in self._forwarded:
            self._read_own()
        if key not in self._queues:
            found = self._resolve(name, args_hash, asker)
            if found is None:
                if is_call(name):
                    return None
                found = self._resolve(name, None, asker)
                if found is None and name == "mcp:initialize":
                    found = self._resolve(name, None, None)
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

    def sent(self, source: str, step: RecordedStep) -> list[tuple[str, JSONObject]]:
        """The notifications and requests the server sent during ``step``, in order.

        Each is its step name and parameters (``RecordedSession.sent``).
        """
        session = self._sessions.get(source)
        return [] if session is None else session.sent(step.number)

    def detail(self, source: str, step: RecordedStep) -> JSONObject:
        """The HTTP status and ``data`` ``step``'s recorded error came with, if any."""
        session = self._sessions.get(source)
        return {} if session is None else session.detail(step)

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
            if step is None or (private(step) and not _sees(key[2], own.client(step))):
                continue  # a private answer of another client's
            if answered(step):
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
        asker = ASKER.get()
        found = self.find(name, args_hash, asker)
        if found is not None:
            source, step = found
            session = self._sessions.get(source)
            if session is None or not self._expired(session, step):
                action = SERVE if step.ok else REPLAY_ERROR
                return Decision(action, step, served_from=source)
            del self._queues[name, args_hash, asker]  # ran out since it was found
        self._asked[name, args_hash, asker] = args
        return Decision(LIVE)

    def ended(self, end: StepEnd) -> None:
        """Note a call forwarded: its answer, once recorded, answers it again."""
        key = (end.name, end.args_hash, ASKER.get())
        if end.source == "live" and key in self._asked:
            self._forwarded[key] = end.number

    def patch(self, marker: str, args_hash: str, *, new: bool) -> Decision | None:
        """MCP sessions run no agent code: a patch check takes today's path."""
        return Decision(LIVE) if new else None

    def child(self, execution_id: str) -> None:
        """MCP sessions route no child intents."""
        return None


def _sees(asker: Asker, client: str | None) -> bool:
    """``asker`` may get a ``private`` answer given to ``client``: the same one.

    The ``--listen`` clients that present no credential are one client (the
    proxy cannot tell them apart, nor can the upstream); never the local user.
    """
    return client == asker.client


def _execution(ref: StepRef) -> str:
    return ref.execution_id
