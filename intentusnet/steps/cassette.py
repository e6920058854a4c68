"""A record as a cassette: which recorded step answers a step call.

A step call is matched to the recorded steps by ``(name, argsHash)`` and
occurrence: the n-th call with these arguments gets the n-th recorded one.
What happens then is :func:`~intentusnet.steps.selection.classify`'s to say,
from the re-run's options (served, run live, its failure raised again, served
with an edited output). A call with no recording is a miss: it runs live when
the re-run has a starting point, was allowed to, or follows an overridden step;
otherwise it raises ``CassetteMiss``; in a re-run, ``NondeterminismError``
(naming the recorded step the code was expected to ask for next: the first not
yet served) when there is one, as the code asks for another step than the
record holds there. A snapshot (``ctx.snapshot``) with no recording just
returns its state.

A side-effect step (``side_effect=True``, in the call or in the record) that
is recorded and succeeded is always served, whatever the options; when it is
not recorded with these arguments while a call of it is still unserved, the
re-run stops with ``SideEffectMismatch`` rather than do something the original
did not.

The same cassette serves plain code, without a router: ``Cassette.from_store``
opens one, ``serve`` and ``call`` answer calls, and inside ``with cassette:``
every ``@step`` function called outside an agent is answered by it.
"""

from __future__ import annotations

import difflib
import threading
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar, Token
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Final, TypeVar, cast

from .._util.jsonvalue import JSONObject, JSONValue, copy_json
from ..errors import (
    CassetteMiss,
    IntentusNetError,
    NondeterminismError,
    SideEffectMismatch,
)
from ..hashing import canonical_json, hash_bytes
from ..record.model import ExecutionRecord
from ..replay import diff_paths
from ..routing.agents import SNAPSHOT_PREFIX
from ..routing.execution import jsonish, replayed_error
from ..routing.seams import LIVE, REPLAY_ERROR, SERVE, StepEnd
from .selection import OVERRIDE, RerunSpec, classify
from .selection import REPLAY_ERROR as ERROR_AGAIN
from .selection import SERVE as SERVED
from .selection import SIDE_EFFECT as SIDE
from .view import RecordedStep, StepRun, chain_record_steps, record_steps

if TYPE_CHECKING:
    from ..store.protocol import ExecutionStore

__all__ = ["Cassette", "Decision", "active_cassette"]

_T = TypeVar("_T")
_MAX_CANDIDATES: Final = 3
#: The cassette ``with cassette:`` made current: it answers ``@step`` calls
#: made outside any agent.
_ACTIVE: ContextVar[Cassette | None] = ContextVar("intentusnet_cassette", default=None)


def active_cassette() -> Cassette | None:
    """The cassette of the innermost ``with cassette:`` block, if any."""
    return _ACTIVE.get()


@dataclass(frozen=True, slots=True)
class Decision:
    """What to do with one step call.

    Attributes:
        action: ``serve`` (return the recorded output), ``replay_error`` (raise
            the recorded failure again) or ``live`` (call it).
        recorded: the recorded step matched, if any (for an overridden step,
            with the output given).
        miss: ran live although no recording could answer it.
        overridden: served with an output given instead of the recorded one.
        served_from: the record holding ``recorded``, when it is not the
            cassette's own (a cassette over several records).
    """

    action: str
    recorded: RecordedStep | None = None
    miss: bool = False
    overridden: bool = False
    #: a re-run numbers its steps itself (see ``StepDecision.position``)
    position: int | None = None
    served_from: str | None = None


class Cassette:
    """The recorded steps of one record, handed out to step calls.

    A re-run (``intentusnet.rerun``) makes one for the record it re-runs; plain
    code opens one with :meth:`from_store` and asks it with :meth:`serve` or
    :meth:`call`. Thread-safe: calls made at once are matched under a lock.
    Added in 0.1.0.

    Args:
        record: the record whose steps answer.
        allow_live: a call the record cannot answer runs live (``call``)
            instead of raising ``CassetteMiss``.
        spec: a re-run's resolved options; strict by default.
        source_store: where the record's children are loaded from, to re-run
            them too; without it they run live.
        chain: ``record``'s resume chain, oldest first (``record`` last): its
            steps are the chain's, merged (``view.chain_record_steps``), each
            served from the record holding it (a fork).
        steps: ``record``'s steps (``view.record_steps(record)``) when the
            caller has them already; not with ``chain`` (added in 0.1.0).

    Attributes:
        runs: how each step call ended, in that order.
        misses: the calls no recording could answer, raised as
            ``CassetteMiss`` (shared with the cassettes of its children).
    """

    def __init__(
        self,
        record: ExecutionRecord,
        *,
        allow_live: bool = False,
        spec: RerunSpec | None = None,
        source_store: ExecutionStore | None = None,
        misses: list[CassetteMiss] | None = None,
        chain: Sequence[ExecutionRecord] = (),
        steps: tuple[RecordedStep, ...] | None = None,
    ) -> None:
        self.spec = spec if spec is not None else RerunSpec(allow_live=allow_live)
        self.execution_id = record.execution_id
        self.record = record
        self.allow_live = self.spec.allow_live
        self.source_store = source_store
        self.runs: list[StepRun] = []
        #: a re-run is never parked (see ``seams.Cassette.attention``)
        self.attention: JSONObject | None = None
        self.misses: list[CassetteMiss] = [] if misses is None else misses
        #: by step number, the record of the chain holding it (a chain only)
        self._holders: dict[int, str] = {}
        if len(chain) > 1:
            self.steps, self._holders = chain_record_steps(chain)
        else:
            self.steps = record_steps(record) if steps is None else steps
        self._lock = threading.Lock()
        self._queues: dict[tuple[str, str], list[RecordedStep]] = defaultdict(list)
        self._by_name: dict[str, list[RecordedStep]] = defaultdict(list)
        self._children: dict[int, list[RecordedStep]] = defaultdict(list)
        self._calls: dict[tuple[str, str], int] = defaultdict(int)
        self._used: set[int] = set()
        self._tokens: list[Token[Cassette | None]] = []
        #: an overridden step was served: what follows it may run live
        self._forked = False
        self._count = 0
        for step in self.steps:
            self._queues[step.name, step.args_hash].append(step)
            self._by_name[step.name].append(step)
            if step.parent is not None:
                self._children[step.parent].append(step)

    @classmethod
    def from_store(
        cls, store: ExecutionStore, execution_id: str, *, allow_live: bool = False
    ) -> Cassette:
        """Open the cassette of record ``execution_id`` in ``store``.

        Added in 0.1.0.

        Raises:
            RecordNotFound, InvalidExecutionId, RecordIntegrityError: from the
                store.
        """
        return cls(store.load(execution_id), allow_live=allow_live)

    @property
    def mode(self) -> str:
        """``strict``, or where a re-run starts (``from_failure``, ...)."""
        return self.spec.mode

    # -- plain code -------------------------------------------------------------

    def serve(
        self,
        name: str,
        args: Mapping[str, object] | None = None,
        *,
        side_effect: bool = False,
    ) -> JSONValue:
        """The recorded output of the call ``name`` with ``args``.

        The call is matched as a re-run matches it: by name, the canonical hash
        of ``args`` (a mapping of keyword arguments, as ``ctx.step`` records
        them) and occurrence. Added in 0.1.0.

        Raises:
            CassetteMiss: the record holds no such call (the nearest recorded
                calls are named), or cannot serve it.
            SideEffectMismatch: a side effect is called with arguments the
                record does not hold while a recorded call of it is unserved.
            ReplayedStepError: the recorded call failed: its failure again.
        """
        kwargs, decision, number, args_hash = self._plain(name, args, side_effect)
        if decision.action == LIVE:  # allow_live, but there is nothing to call
            raise self._miss(name, args_hash, kwargs, decision.recorded)
        return self._served(name, decision, number, args_hash)

    def call(
        self,
        name: str,
        args: Mapping[str, object] | None,
        fn: Callable[..., _T],
        *,
        side_effect: bool = False,
    ) -> _T:
        """``fn(**args)`` answered from the record, as :meth:`serve` answers it.

        ``fn`` runs only when the record cannot answer and the cassette was
        opened with ``allow_live=True``. Added in 0.1.0.

        Raises:
            CassetteMiss: no recording answers and ``allow_live`` is off.
            SideEffectMismatch: as for :meth:`serve`.
            ReplayedStepError: the recorded call failed: its failure again.
        """
        kwargs, decision, number, args_hash = self._plain(name, args, side_effect)
        if decision.action != LIVE:
            return cast(_T, self._served(name, decision, number, args_hash))
        value = fn(**kwargs)
        self.ended(StepEnd(number, name, args_hash, "live", decision, "success"))
        return value

    async def acall(
        self,
        name: str,
        args: Mapping[str, object] | None,
        fn: Callable[..., Awaitable[_T]],
        *,
        side_effect: bool = False,
    ) -> _T:
        """The async :meth:`call`: ``fn(**args)`` is awaited when it runs.

        Added in 0.1.0.
        """
        kwargs, decision, number, args_hash = self._plain(name, args, side_effect)
        if decision.action != LIVE:
            return cast(_T, self._served(name, decision, number, args_hash))
        value = await fn(**kwargs)
        self.ended(StepEnd(number, name, args_hash, "live", decision, "success"))
        return value

    def __enter__(self) -> Cassette:
        """Answer every ``@step`` call made outside an agent from this cassette."""
        self._tokens.append(_ACTIVE.set(self))
        return self

    def __exit__(self, *exc_info: object) -> None:
        _ACTIVE.reset(self._tokens.pop())

    def _plain(
        self, name: str, args: Mapping[str, object] | None, side_effect: bool
    ) -> tuple[dict[str, object], Decision, int, str]:
        """Match a call from plain code: its kwargs, decision, number, args hash."""
        kwargs = dict(args) if args else {}
        recorded_args, args_hash, _reason = jsonish(kwargs)
        with self._lock:
            self._count += 1
            number = self._count
        decision = self._decide(name, recorded_args, args_hash, side_effect, False)
        return kwargs, decision, number, args_hash

    def _served(
        self, name: str, decision: Decision, number: int, args_hash: str
    ) -> JSONValue:
        found = decision.recorded
        assert found is not None  # served and replayed calls have a recording
        self.ended(StepEnd(number, name, args_hash, "record", decision, found.outcome))
        if decision.action == REPLAY_ERROR:
            raise replayed_error(name, found.error)
        return copy_json(found.output)  # never an alias of the loaded record

    def _miss(
        self,
        name: str,
        args_hash: str,
        args: object,
        found: RecordedStep | None,
    ) -> CassetteMiss:
        recorded_args = jsonish(args)[0]
        miss = CassetteMiss(
            name,
            args_hash,
            occurrence=self._calls[name, args_hash],
            candidates=self.nearest(name, recorded_args),
            execution_id=self.execution_id,
            why="" if found is None else "the recorded call cannot be served",
        )
        with self._lock:
            self.misses.append(miss)
        return miss

    # -- a re-run's step session asks these ------------------------------------

    def decide(
        self, name: str, args: JSONValue, args_hash: str, *, side_effect: bool
    ) -> Decision:
        """Match one step call and say what to do.

        Raises:
            SideEffectMismatch: a side-effect step is needed with arguments the
                record does not hold, while a recorded call is still unserved.
            CassetteMiss: no recording answers it and it may not run live.
            NondeterminismError: so, while a recorded step is still unserved.
        """
        return self._decide(name, args, args_hash, side_effect, True)

    def _decide(
        self,
        name: str,
        args: JSONValue,
        args_hash: str,
        side_effect: bool,
        in_order: bool,
    ) -> Decision:
        """``decide``; ``in_order``: the calls come in the code's order (a re-run)."""
        try:
            with self._lock:
                key = (name, args_hash)
                self._calls[key] += 1
                occurrence = self._calls[key]
                named = self._by_name.get(name, ())
                side = side_effect or any(s.side_effect for s in named)
                recorded = self._unserved(key)
                if recorded is not None:
                    self._consume(recorded)
                    return self._recorded(recorded, side, args, occurrence)
                if side:
                    waiting = [s for s in named if s.number not in self._used and s.ok]
                    if waiting:
                        raise SideEffectMismatch(
                            name,
                            args_hash,
                            occurrence=occurrence,
                            candidates=self._describe(waiting, args),
                            execution_id=self.execution_id,
                            why="it has side effects and the record holds a call "
                            "of it with other arguments, not yet served; it is "
                            "not run again",
                        )
                if name.startswith(SNAPSHOT_PREFIX):
                    return Decision(LIVE)  # a new snapshot: it just returns its state
                if self.spec.lenient or self._forked:
                    return Decision(LIVE, None, miss=True)
                expected = next(
                    (s for s in self.steps if s.number not in self._used), None
                )
                if in_order and expected is not None:
                    # the record holds another step where this one is asked for
                    raise NondeterminismError(
                        expected.number,
                        (expected.name, expected.args_hash),
                        (name, args_hash),
                        execution_id=self.execution_id,
                        parked=False,
                        occurrence=occurrence,
                        candidates=self.nearest(name, args),
                    )
                raise CassetteMiss(
                    name,
                    args_hash,
                    occurrence=occurrence,
                    candidates=self.nearest(name, args),
                    execution_id=self.execution_id,
                )
        except CassetteMiss as miss:
            with self._lock:
                self.misses.append(miss)
            raise

    def patch(self, marker: str, args_hash: str, *, new: bool) -> Decision | None:
        """Match a patch check (``ctx.patched``; see ``seams.Cassette.patch``).

        A recorded, unserved marker is served (run live in the live part).
        Without one, the record went on without the patch while a recorded
        step before the live part is still unserved: ``None``, the old path;
        else today's code goes on: the marker runs live when ``new``.
        """
        with self._lock:
            key = (marker, args_hash)
            self._calls[key] += 1
            recorded = self._unserved(key)
            if recorded is not None:
                self._consume(recorded)
                if recorded.ok and classify(recorded, self.spec)[0] == SERVED:
                    return Decision(SERVE, recorded, served_from=self._held(recorded))
                return Decision(LIVE, recorded) if new else None
            start = self.spec.live_from
            waiting = next((s for s in self.steps if s.number not in self._used), None)
            if waiting is not None and (start is None or waiting.start_seq < start):
                return None  # the record went on without the patch
            return Decision(LIVE) if new else None

    def ended(self, end: StepEnd) -> None:
        """Note how a step of the re-run ended (see ``runs``)."""
        decision, source = end.decision, end.source
        recorded = None if decision is None else decision.recorded
        run = StepRun(
            number=end.number,
            name=end.name,
            args_hash=end.args_hash,
            source=source,
            recorded=None if recorded is None else recorded.number,
            miss=source == "miss" or (decision is not None and decision.miss),
            outcome=end.outcome,
            overridden=decision is not None and decision.overridden,
        )
        with self._lock:
            self.runs.append(run)

    def child(self, execution_id: str) -> Cassette | None:
        """The cassette of the recorded child ``execution_id``.

        ``None`` without a source store, or when the child is gone or damaged.
        """
        if self.source_store is None:
            return None
        try:
            record = self.source_store.load(execution_id)
        except IntentusNetError:
            return None
        return Cassette(
            record,
            spec=self.spec.for_child(record),
            source_store=self.source_store,
            misses=self.misses,
        )

    def _unserved(self, key: tuple[str, str]) -> RecordedStep | None:
        """The first recorded call of ``key`` not served yet (under the lock)."""
        queue = self._queues.get(key, ())
        return next((s for s in queue if s.number not in self._used), None)

    def _recorded(
        self, recorded: RecordedStep, side: bool, args: JSONValue, occurrence: int
    ) -> Decision:
        spec = self.spec
        if side and not recorded.side_effect:  # marked in today's call only
            recorded = replace(recorded, side_effect=True)
        action, _why = classify(recorded, spec)
        if action == OVERRIDE:
            self._forked = True
            output = spec.overrides[recorded.number]
            edited = replace(
                recorded,
                output=output,
                output_hash=hash_bytes(canonical_json(output)),
                outcome="success",
                error=None,
                traceback=None,
            )
            return Decision(SERVE, edited, overridden=True)
        if action in (SERVED, SIDE):
            return Decision(SERVE, recorded, served_from=self._held(recorded))
        if action == ERROR_AGAIN:
            return Decision(REPLAY_ERROR, recorded, served_from=self._held(recorded))
        if action == LIVE:
            return Decision(LIVE, recorded)
        # a miss: it cannot be served
        if (spec.lenient or self._forked) and not side:
            return Decision(LIVE, recorded, miss=True)
        raise CassetteMiss(
            recorded.name,
            recorded.args_hash,
            occurrence=occurrence,
            candidates=self.nearest(recorded.name, args),
            execution_id=self.execution_id,
            why=f"the recorded call cannot be served ({recorded.reason})",
        )

    def _held(self, step: RecordedStep) -> str | None:
        """The record of the chain holding ``step``; ``None``: the cassette's."""
        return self._holders.get(step.number)

    def _consume(self, step: RecordedStep) -> None:
        # A served step's nested steps were answered with it.
        pending = [step]
        while pending:
            current = pending.pop()
            self._used.add(current.number)
            pending.extend(self._children.get(current.number, ()))

    def nearest(self, name: str, args: JSONValue) -> list[str]:
        """Describe the recorded steps most like a call of ``name`` with ``args``."""
        same = self._by_name.get(name)
        if same:
            return self._describe(same, args)
        close = difflib.get_close_matches(name, list(self._by_name), n=_MAX_CANDIDATES)
        return [f"{other} (another name)" for other in close]

    def _describe(self, steps: Iterable[RecordedStep], args: JSONValue) -> list[str]:
        described: list[str] = []
        for step in steps:
            if len(described) == _MAX_CANDIDATES:
                break
            paths = diff_paths(step.args, args, limit=5)
            differ = ", ".join(paths) if paths else "nothing visible"
            described.append(
                f"{step.name} (step {step.number}, args differ at {differ})"
            )
        return described
