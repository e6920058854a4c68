"""The step state of one execution: numbering, recording, and (in a re-run) serving.

Every execution that records, or re-runs a record, has one ``StepSession``.
A step call opens with :meth:`StepSession.open`, which numbers it, asks the
cassette (in a re-run) what to do and writes ``STEP_START``; it closes with
:meth:`~StepSession.serve`, :meth:`~StepSession.succeeded`,
:meth:`~StepSession.failed` or :meth:`~StepSession.routed`, which write
``STEP_END``. The event data is described in docs/records.md.
"""

from __future__ import annotations

import asyncio
import threading
import time
import traceback
from contextvars import ContextVar, Token
from hashlib import sha256
from pathlib import Path
from typing import TYPE_CHECKING, Final, TypeAlias, cast

import orjson

from .._util.jsonvalue import JSONObject, JSONValue, check_json
from .._util.time import ms_since
from ..errors import CassetteMiss, EnvelopeValidationError
from ..hashing import HASH_PREFIX, _encode, canonical_json, hash_bytes
from ..record.model import EventType
from .cassette import LIVE, Cassette, Decision
from .view import StepRun

if TYPE_CHECKING:
    from ..envelope import AgentResponse
    from ..routing.agents import AgentContext
    from ..routing.recorder import Recorder
    from ..store import ExecutionStore

__all__ = ["OpenStep", "StepSession", "enter_step", "jsonish", "leave_step"]

# Bound once: two values are hashed per step, on the agent's path.
_dumps = orjson.dumps
_SORTED: Final = orjson.OPT_SORT_KEYS
#: A ``repr`` stored for a value that is not JSON is cut to this many characters.
MAX_REPR: Final = 2000
#: Frames of this file (which calls the step) are left out of step tracebacks.
_STEPS_FILE: Final = str(Path(__file__).with_name("steps.py"))

_Active: TypeAlias = "tuple[StepSession, int] | None"
#: The step running in this context, if any, and the session it belongs to:
#: a step called from inside it is recorded as its child.
_ACTIVE: ContextVar[_Active] = ContextVar("intentusnet_active_step", default=None)


def jsonish(value: object) -> tuple[JSONValue, str, str | None]:
    """Return ``value`` as recorded, its canonical hash, and why it is not JSON.

    A value JSON cannot carry is recorded as its ``repr`` (cut to ``MAX_REPR``
    characters), hashed as that string, with the reason.
    """
    try:
        plain = check_json(value)
    except EnvelopeValidationError as exc:
        text = repr(value)
        if len(text) > MAX_REPR:
            text = text[: MAX_REPR - 3] + "..."
        return text, hash_bytes(canonical_json(text)), f"not JSON ({exc})"
    checked = cast(JSONValue, value)
    # The canonical form, as hashing._encode makes it, without two calls.
    data = _dumps(checked, option=_SORTED) if plain else _encode(checked, plain=False)
    return checked, HASH_PREFIX + sha256(data).hexdigest(), None


def _copy(value: JSONValue) -> JSONValue:
    # Served values must not alias the loaded record, which the re-run diffs.
    if isinstance(value, dict | list):
        copied: JSONValue = orjson.loads(orjson.dumps(value))
        return copied
    return value


def _format(exc: BaseException) -> str:
    """The traceback of ``exc`` from the step's own code on (our frames left out)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_frame.f_code.co_filename == _STEPS_FILE:
        tb = tb.tb_next
    return "".join(traceback.format_exception(type(exc), exc, tb))


class OpenStep:
    """A step call between its ``STEP_START`` and ``STEP_END`` lines."""

    __slots__ = ("args_hash", "child", "decision", "name", "number", "start")

    def __init__(
        self,
        number: int,
        name: str,
        args_hash: str,
        decision: Decision | None,
        child: str | None,
    ) -> None:
        self.number = number
        self.name = name
        self.args_hash = args_hash
        self.decision = decision
        self.child = child
        self.start = time.perf_counter()

    @property
    def served(self) -> bool:
        """The cassette answers this call; nothing is run."""
        decision = self.decision
        return decision is not None and decision.action != LIVE


class StepSession:
    """Numbers, records and (in a re-run) serves the steps of one execution.

    Args:
        execution_id: the execution.
        recorder: where events go, or ``None`` when nothing is recorded.
        cassette: the record being re-run, if any.
        store: where a re-run records (children of its steps record there too).
        source_store: where the re-run record's children can be loaded from.
    """

    __slots__ = (
        "_count",
        "_lock",
        "cassette",
        "execution_id",
        "misses",
        "recorder",
        "runs",
        "source_store",
        "store",
    )

    def __init__(
        self,
        execution_id: str,
        recorder: Recorder | None,
        *,
        cassette: Cassette | None = None,
        store: ExecutionStore | None = None,
        source_store: ExecutionStore | None = None,
    ) -> None:
        self.execution_id = execution_id
        self.recorder = recorder
        self.cassette = cassette
        self.store = store
        self.source_store = source_store
        self.runs: list[StepRun] = []
        self.misses: list[CassetteMiss] = []
        self._count = 0
        self._lock = threading.Lock()

    def open(
        self,
        ctx: AgentContext,
        name: str,
        args: object,
        *,
        side_effect: bool,
        child: str | None = None,
    ) -> OpenStep:
        """Number a step call, decide how to answer it, write ``STEP_START``.

        Raises:
            CassetteMiss: in a re-run, no recording answers the call (the miss
                is recorded as the step's failure and kept in ``misses``).
        """
        recorded_args, args_hash, reason = jsonish(args)
        with self._lock:
            self._count += 1
            number = self._count
        active = _ACTIVE.get()
        data: JSONObject = {
            "step": number,
            "name": name,
            "agent": ctx.agent,
            "attempt": ctx.attempt,
            "parent": active[1] if active is not None and active[0] is self else None,
            "args": recorded_args,
            "argsHash": args_hash,
            "sideEffect": side_effect,
            "replayable": reason is None,
        }
        if reason is not None:
            data["reason"] = f"args are {reason}"
        decision: Decision | None = None
        miss: CassetteMiss | None = None
        if self.cassette is not None:
            try:
                decision = self.cassette.decide(
                    name, recorded_args, args_hash, side_effect=side_effect
                )
            except CassetteMiss as exc:
                miss = exc
        if child is not None:
            if decision is not None and decision.action != LIVE and decision.recorded:
                child = decision.recorded.child_execution_id  # served: no new child
            data["childExecutionId"] = child
        recorder = self.recorder
        if recorder is not None:
            recorder.event(EventType.STEP_START, data)
        step = OpenStep(number, name, args_hash, decision, child)
        if miss is not None:
            self.misses.append(miss)
            self._end(step, "error", None, None, error=miss, tb=None, miss=True)
            raise miss
        return step

    def serve(self, step: OpenStep) -> JSONValue:
        """Write ``STEP_END`` from the recorded step and return its output."""
        decision = step.decision
        assert decision is not None
        recorded = decision.recorded
        assert recorded is not None
        data: JSONObject = {
            "step": step.number,
            "name": step.name,
            "argsHash": step.args_hash,
            "outcome": recorded.outcome,
            "durationMs": ms_since(step.start),
            "output": recorded.output,
            "outputHash": recorded.output_hash,
            "error": recorded.error,
            "traceback": recorded.traceback,
            "replayable": True,
            "source": "record",
            "servedFrom": {
                "executionId": self.cassette.execution_id if self.cassette else None,
                "step": recorded.number,
            },
        }
        if recorded.child_execution_id is not None:
            data["childExecutionId"] = recorded.child_execution_id
        self._write_end(step, data, recorded.outcome)
        return _copy(recorded.output)

    def succeeded(self, step: OpenStep, value: object) -> None:
        """Write ``STEP_END`` for a call that returned ``value``."""
        output, output_hash, reason = jsonish(value)
        self._end(step, "success", output, output_hash, reason=reason)

    def failed(self, step: OpenStep, exc: BaseException) -> None:
        """Write ``STEP_END`` for a call that raised ``exc``."""
        cancelled = isinstance(exc, asyncio.CancelledError)
        tb = None if cancelled else _format(exc)
        outcome = "cancelled" if cancelled else "error"
        self._end(step, outcome, None, None, error=exc, tb=tb)

    def routed(self, step: OpenStep, response: AgentResponse) -> None:
        """Write ``STEP_END`` for a child intent, from the child's response."""
        summary: JSONObject = {
            "status": response.status,
            "payload": response.payload,
            "error": None
            if response.error is None
            else response.error.model_dump(mode="json"),
        }
        output, output_hash, reason = jsonish(summary)
        error = response.error
        data = self._end_data(
            step,
            "success" if error is None else "error",
            output,
            output_hash,
            reason,
            None
            if error is None
            else {"type": error.code.value, "message": error.message},
            None,
        )
        if step.child is not None:
            data["childExecutionId"] = step.child
        self._write_end(step, data, str(data["outcome"]))

    # -- internals ---------------------------------------------------------------

    def _end(
        self,
        step: OpenStep,
        outcome: str,
        output: JSONValue,
        output_hash: str | None,
        *,
        reason: str | None = None,
        error: BaseException | None = None,
        tb: str | None = None,
        miss: bool = False,
    ) -> None:
        error_data: JSONObject | None = None
        if error is not None:
            error_data = {"type": type(error).__name__, "message": str(error)}
        data = self._end_data(
            step, outcome, output, output_hash, reason, error_data, tb
        )
        if miss:
            data["source"] = "miss"
        self._write_end(step, data, outcome)

    def _end_data(
        self,
        step: OpenStep,
        outcome: str,
        output: JSONValue,
        output_hash: str | None,
        reason: str | None,
        error: JSONObject | None,
        tb: str | None,
    ) -> JSONObject:
        data: JSONObject = {
            "step": step.number,
            "name": step.name,
            "argsHash": step.args_hash,
            "outcome": outcome,
            "durationMs": ms_since(step.start),
            "output": output,
            "outputHash": output_hash,
            "error": error,
            "traceback": tb,
            "replayable": reason is None,
            "source": "live",
        }
        if reason is not None:
            data["reason"] = f"output is {reason}"
        decision = step.decision
        if decision is not None and decision.miss:
            data["liveMiss"] = True
        return data

    def _write_end(self, step: OpenStep, data: JSONObject, outcome: str) -> None:
        recorder = self.recorder
        if recorder is not None:
            recorder.event(EventType.STEP_END, data)
        if self.cassette is not None:
            decision = step.decision
            recorded = None if decision is None else decision.recorded
            run = StepRun(
                number=step.number,
                name=step.name,
                args_hash=step.args_hash,
                source=str(data["source"]),
                recorded=None if recorded is None else recorded.number,
                miss=data["source"] == "miss" or data.get("liveMiss") is True,
                outcome=outcome,
            )
            with self._lock:
                self.runs.append(run)


def enter_step(session: StepSession, number: int) -> Token[_Active]:
    """Mark step ``number`` as running in this context; return the reset token."""
    return _ACTIVE.set((session, number))


def leave_step(token: Token[_Active]) -> None:
    """Undo :func:`enter_step`."""
    _ACTIVE.reset(token)
