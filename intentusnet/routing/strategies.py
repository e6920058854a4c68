"""Routing strategies: which agents, in what order, and what the answer is.

The strategy logic exists once, in ``plan``: a generator that yields the agent
runs it needs (``Run``) and receives their outcomes. The router has two drivers
that execute those runs, one async and one synchronous; neither knows anything
about strategies.
"""

from __future__ import annotations

import traceback
from collections.abc import Generator
from typing import Literal, TypeAlias

from .._util.jsonvalue import JSONObject, JSONValue, check_json
from .._util.time import ms_since
from ..envelope import (
    JSON_CHECKED,
    AgentResponse,
    ErrorCode,
    ErrorInfo,
    IntentEnvelope,
    RoutingDecision,
    RoutingStrategy,
)
from ..errors import EnvelopeValidationError
from .agents import AgentRegistry, RegisteredAgent
from .execution import Execution

__all__ = [
    "Outcome",
    "Plan",
    "Run",
    "decide",
    "internal_error",
    "plan",
]


#: How an agent attempt ended.
OutcomeKind: TypeAlias = Literal["success", "error", "timeout", "cancelled"]


class Outcome:
    """The result of one agent attempt, normalised."""

    __slots__ = (
        "agent",
        "duration_ms",
        "error",
        "ok",
        "outcome",
        "payload",
        "traceback",
    )

    def __init__(
        self,
        agent: str,
        outcome: OutcomeKind,
        duration_ms: float,
        payload: JSONObject | None = None,
        error: ErrorInfo | None = None,
        tb: str | None = None,
    ) -> None:
        self.agent = agent
        self.outcome = outcome
        #: True when the agent answered successfully
        self.ok = outcome == "success"
        self.duration_ms = duration_ms
        self.payload = payload
        self.error = error
        self.traceback = tb


#: A request from the plan to its driver: run ``agents`` (all at once when
#: ``race``, else the one agent), numbering attempts from ``first_attempt``. A
#: bare tuple: one is made per agent run, on the routing hot path.
Run: TypeAlias = (
    "tuple[tuple[RegisteredAgent, ...], bool, int]"  # agents, race, first_attempt
)

Plan: TypeAlias = Generator[Run, list["Outcome"], AgentResponse]


def _undecided() -> RoutingDecision:
    """The decision of an answer given before any agent was chosen.

    A new one each time: a caller may change the answer it gets.
    """
    return RoutingDecision(
        strategy=RoutingStrategy.DIRECT, candidates=[], skipped={}, reason=""
    )


def _error(
    code: ErrorCode,
    message: str,
    agent: str | None = None,
    *,
    retryable: bool = False,
    details: JSONObject | None = None,
) -> ErrorInfo:
    return ErrorInfo(
        code=code,
        message=message,
        agent=agent,
        retryable=retryable,
        details=details if details is not None else {},
    )


def from_result(agent: str, result: object, duration_ms: float) -> Outcome:
    """Turn what an agent returned into an outcome; bad shapes are errors."""
    if type(result) is dict:
        try:
            check_json(result, "payload")
        except EnvelopeValidationError as exc:
            return Outcome(
                agent,
                "error",
                duration_ms,
                error=_error(
                    ErrorCode.INVALID_RESPONSE,
                    f"agent {agent!r} returned a value that is not JSON: {exc}",
                    agent,
                ),
            )
        return Outcome(agent, "success", duration_ms, result)
    if isinstance(result, AgentResponse):
        if result.status == "success":
            return Outcome(agent, "success", duration_ms, payload=result.payload or {})
        error = result.error or _error(
            ErrorCode.AGENT_ERROR, f"agent {agent!r} answered with an error", agent
        )
        if error.agent is None:
            error = error.model_copy(update={"agent": agent})
        return Outcome(agent, "error", duration_ms, error=error)
    return Outcome(
        agent,
        "error",
        duration_ms,
        error=_error(
            ErrorCode.INVALID_RESPONSE,
            f"agent {agent!r} returned {type(result).__name__}; an agent must "
            "return a JSON object (dict) or an AgentResponse",
            agent,
        ),
    )


def from_exception(agent: str, exc: BaseException, duration_ms: float) -> Outcome:
    kind = type(exc).__name__
    text = str(exc)
    return Outcome(
        agent,
        "error",
        duration_ms,
        error=_error(
            ErrorCode.AGENT_ERROR,
            f"agent {agent!r} raised {kind}" + (f": {text}" if text else ""),
            agent,
            details={"exception": kind},
        ),
        tb="".join(traceback.format_exception(exc)),
    )


def _let_finish(finished: list[str], details: JSONObject) -> str:
    """Name the side effects a stopped attempt was let finish (in ``details`` too)."""
    if not finished:
        return ""
    details["sideEffectsFinished"] = list[JSONValue](finished)
    return (
        "; its side effect "
        + ", ".join(finished)
        + " was running and was let finish (never cut in half)"
    )


def timed_out(
    agent: str, timeout_ms: int, duration_ms: float, finished: list[str] | None = None
) -> Outcome:
    """The outcome of an attempt stopped by its timeout.

    ``finished`` names the side-effect steps it was let finish first.
    """
    details: JSONObject = {"timeoutMs": timeout_ms}
    after = _let_finish(finished or [], details)
    return Outcome(
        agent,
        "timeout",
        duration_ms,
        error=_error(
            ErrorCode.AGENT_TIMEOUT,
            f"agent {agent!r} did not answer within {timeout_ms} ms{after}",
            agent,
            retryable=True,
            details=details,
        ),
    )


def cancelled(
    agent: str, duration_ms: float, finished: list[str] | None = None
) -> Outcome:
    """The outcome of a ``PARALLEL`` attempt another agent's answer stopped.

    ``finished`` names the side-effect steps it was let finish first.
    """
    details: JSONObject = {}
    after = _let_finish(finished or [], details)
    return Outcome(
        agent,
        "cancelled",
        duration_ms,
        error=_error(
            ErrorCode.CANCELLED,
            f"agent {agent!r} was cancelled: another agent answered first{after}",
            agent,
            details=details or None,
        ),
    )


# -- deciding ----------------------------------------------------------------------


def decide(
    registry: AgentRegistry, env: IntentEnvelope
) -> tuple[RoutingDecision, tuple[RegisteredAgent, ...]]:
    """Return the routing decision for an envelope and the agents to run, in order.

    Pure: the same registry and the same intent, strategy, target and fallback
    agents always give the same decision.
    """
    routing = env.routing
    strategy = routing.strategy
    candidates = registry.candidates(env.intent)
    intent = f"{env.intent.name!r} v{env.intent.version}"
    skipped: dict[str, str] = {}

    def handles(name: str) -> RegisteredAgent | None:
        agent = registry.get(name)
        if agent is None:
            skipped[name] = "not registered"
        elif agent not in candidates:
            skipped[name] = f"does not handle intent {intent}"
            agent = None
        return agent

    order: tuple[RegisteredAgent, ...]
    if strategy is RoutingStrategy.DIRECT:
        if routing.target_agent is not None:
            target = handles(routing.target_agent)
            order = (target,) if target else ()
            reason = "targetAgent"
        else:
            order = candidates[:1]
            reason = "first candidate by priority, then name"
        for other in candidates:
            if other not in order and other.name not in skipped:
                skipped[other.name] = "not selected by DIRECT"
    elif strategy is RoutingStrategy.FALLBACK:
        named = [routing.target_agent] if routing.target_agent else []
        named += routing.fallback_agents
        chosen: list[RegisteredAgent] = []
        for name in named:
            agent = handles(name)
            if agent is not None and agent not in chosen:
                chosen.append(agent)
        chosen += [a for a in candidates if a not in chosen]
        order = tuple(chosen)
        reason = "targetAgent, then fallbackAgents, then remaining candidates"
    else:
        order = candidates
        reason = f"every candidate ({strategy.value})"
        if routing.target_agent is not None:
            reason += "; targetAgent is ignored by " + strategy.value
    decision = RoutingDecision(
        strategy=strategy,
        candidates=[a.name for a in order],
        skipped=skipped,
        reason=reason,
    )
    return decision, order


# -- planning ----------------------------------------------------------------------


def _record_attempts(
    ex: Execution,
    outcomes: list[Outcome],
    first_attempt: int,
    race: tuple[RegisteredAgent, ...] = (),
) -> None:
    """Record how the attempts ended, and tell the execution's observers.

    The outcomes of a ``race`` come in the order the agents finished; each is
    recorded and told under the number its attempt started with.
    """
    observers = ex.observers
    recorder = ex.recorder
    if recorder is None and not observers.members:
        return  # nobody to tell
    numbers = {agent.name: n for n, agent in enumerate(race, first_attempt)}
    for index, out in enumerate(outcomes, first_attempt):
        number = numbers.get(out.agent, index)
        if observers.members:
            observers.attempt_ended(
                ex.execution_id, out.agent, number, out.outcome, out.error
            )
        if recorder is not None:
            recorder.event(
                "AGENT_ATTEMPT_END",
                {
                    "agent": out.agent,
                    "attempt": number,
                    "outcome": out.outcome,
                    "durationMs": out.duration_ms,
                    "output": out.payload,
                    "error": out.error.model_dump(mode="json") if out.error else None,
                    "traceback": out.traceback,
                },
            )


def _all_failed(outcomes: list[Outcome]) -> ErrorInfo:
    last = outcomes[-1].error
    assert last is not None  # every non-success outcome carries an error
    if len(outcomes) == 1:
        return last
    summary = "; ".join(
        f"{o.agent}: {o.error.code.value}" for o in outcomes if o.error is not None
    )
    return _error(
        last.code,
        f"all {len(outcomes)} agents failed ({summary}); last: {last.message}",
        last.agent,
        retryable=any(o.error.retryable for o in outcomes if o.error is not None),
        details={
            "attempts": [
                o.error.model_dump(mode="json") for o in outcomes if o.error is not None
            ]
        },
    )


def plan(
    env: IntentEnvelope,
    decision: RoutingDecision,
    decision_wire: JSONObject,
    order: tuple[RegisteredAgent, ...],
    ex: Execution,
) -> Plan:
    """Run the strategy: yield ``Run`` requests, receive outcomes, return the answer.

    The response's metadata holds the execution id, the decision, the attempts
    and the duration. ``decision_wire`` is the decision's JSON form, recorded
    as is (shared between executions: never changed).
    """
    strategy = decision.strategy
    observed = ex.observed
    if observed is not None:  # inside the driver's guard: a fault is an answer
        ex.observers.execution_started(observed)
    recorder = ex.recorder
    if recorder is not None:
        recorder.event("ROUTER_DECISION", decision_wire)
    outcomes: list[Outcome] = []

    if not order:
        return _answer(ex, decision, outcomes, None, _no_agent(env, decision))

    if strategy is RoutingStrategy.BROADCAST:
        results: JSONObject = {}
        for agent in order:
            got = yield _start(ex, (agent,), False, len(outcomes) + 1)
            _record_attempts(ex, got, len(outcomes) + 1)
            outcomes += got
            if got[0].ok:
                results[agent.name] = got[0].payload
        if results:
            # The answers were checked one by one; nested under their agents'
            # names they are one level deeper, which may pass the depth limit.
            check_json(results, "payload")
            return _answer(ex, decision, outcomes, results, None)
        return _answer(ex, decision, outcomes, None, _all_failed(outcomes))

    if strategy is RoutingStrategy.PARALLEL:
        got = yield _start(ex, order, True, 1)
        _record_attempts(ex, got, 1, order)
        outcomes += got
        winner = next((o for o in got if o.ok), None)
        if winner is not None:
            return _answer(ex, decision, outcomes, winner.payload, None, winner.agent)
        return _answer(ex, decision, outcomes, None, _all_failed(outcomes))

    # DIRECT runs its one agent; FALLBACK walks the order until one succeeds.
    for index, agent in enumerate(order):
        got = yield _start(ex, (agent,), False, len(outcomes) + 1)
        _record_attempts(ex, got, len(outcomes) + 1)
        outcomes += got
        if got[0].ok:
            return settle(ex, decision, outcomes)
        if index + 1 < len(order) and recorder is not None:
            recorder.event(
                "FALLBACK_TRIGGERED",
                {
                    "from": agent.name,
                    "to": order[index + 1].name,
                    "reason": got[0].error.code.value if got[0].error else "error",
                },
            )
    return settle(ex, decision, outcomes)


def settle(
    ex: Execution, decision: RoutingDecision, outcomes: list[Outcome]
) -> AgentResponse:
    """The answer of DIRECT or FALLBACK once the last agent it will run has run."""
    last = outcomes[-1]
    if last.ok:
        return _answer(ex, decision, outcomes, last.payload, None, last.agent)
    return _answer(ex, decision, outcomes, None, _all_failed(outcomes))


def _start(
    ex: Execution,
    agents: tuple[RegisteredAgent, ...],
    race: bool,
    first_attempt: int,
) -> Run:
    if ex.observers.members:
        for number, agent in enumerate(agents, first_attempt):
            ex.observers.attempt_started(ex.execution_id, agent.name, number)
    recorder = ex.recorder
    if recorder is not None:
        for number, agent in enumerate(agents, first_attempt):
            recorder.event(
                "AGENT_ATTEMPT_START", {"agent": agent.name, "attempt": number}
            )
    return agents, race, first_attempt


def _no_agent(env: IntentEnvelope, decision: RoutingDecision) -> ErrorInfo:
    intent = f"{env.intent.name!r} v{env.intent.version}"
    if decision.skipped:
        why = "; ".join(f"{k}: {v}" for k, v in decision.skipped.items())
        message = f"no agent can handle intent {intent} ({why})"
    else:
        message = f"no agent is registered for intent {intent}"
    return _error(ErrorCode.NO_AGENT, message)


def _answer(
    ex: Execution,
    decision: RoutingDecision,
    outcomes: list[Outcome],
    payload: JSONObject | None,
    error: ErrorInfo | None,
    agent: str | None = None,
) -> AgentResponse:
    if error is not None and agent is None:
        agent = error.agent
    # One validation builds the answer, its metadata and its attempts. The
    # payload was checked where it entered (by ``from_result``, the agent's own
    # ``AgentResponse``, or ``check_json`` for a broadcast), and the error and
    # decision are validated models: ``JSON_CHECKED`` says so, so the payload
    # is not walked a second time per route.
    return AgentResponse.model_validate(
        {
            "status": "error" if error is not None else "success",
            "payload": payload,
            "error": error,
            "metadata": {
                "executionId": ex.execution_id,
                "agent": agent,
                "strategy": decision.strategy,
                "decision": decision,
                "attempts": [
                    {
                        "agent": o.agent,
                        "outcome": o.outcome,
                        "durationMs": o.duration_ms,
                        "errorCode": None if o.error is None else o.error.code,
                    }
                    for o in outcomes
                ],
                "durationMs": ms_since(ex.started),
                "envelopeHash": ex.envelope_hash,
            },
        },
        context=JSON_CHECKED,
    )


def interrupted(ex: Execution, exc: BaseException) -> AgentResponse:
    """What observers are told when a routing call is cancelled or interrupted.

    Nobody receives it (the caller gets the exception) and it is not
    recorded: the record is closed unfinished. It lets an observer end what it
    opened for the execution (a span) with the reason.
    """
    error = _error(
        ErrorCode.CANCELLED,
        f"the routing call was cancelled or interrupted ({type(exc).__name__}) "
        "before an answer; its record is incomplete",
    )
    return _answer(ex, _undecided(), [], None, error)


def queue_timed_out(ex: Execution, queue: str, waited_ms: float) -> AgentResponse:
    """The answer of an execution whose queue gave it no turn in its time."""
    error = _error(
        ErrorCode.QUEUE_TIMEOUT,
        f"queue {queue!r} had no free turn within {waited_ms:.0f} ms (the "
        "envelope's timeoutMs); no agent ran",
        retryable=True,
        details={"queue": queue, "waitedMs": round(waited_ms, 3)},
    )
    return _answer(ex, _undecided(), [], None, error)


def internal_error(ex: Execution, exc: Exception) -> AgentResponse:
    """The answer when IntentusNet itself fails mid-execution: data, with the trace."""
    if ex.recorder is not None:
        ex.recorder.event(
            "RECORDING_FAILURE",
            {"error": f"internal error: {type(exc).__name__}: {exc}"},
        )
    error = _error(
        ErrorCode.INTERNAL_ERROR,
        f"internal error in IntentusNet ({type(exc).__name__}: {exc}); "
        "please report it with the traceback in details",
        details={"traceback": "".join(traceback.format_exception(exc))},
    )
    return _answer(ex, _undecided(), [], None, error)
