"""Child intents: ``ctx.route`` inside an agent, recorded as a step of the parent.

The child gets its own execution and record, linked both ways: the parent's
``route:INTENT`` step names the child's id (chosen here, so that the parent
records it before the child starts), and the child's record names its parent.
In a re-run of the parent, the step is served from the record, or the child is
routed again as a re-run of the child it recorded.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Protocol, cast

from .._util.flow import Flow
from .._util.ids import new_execution_id
from .._util.jsonvalue import JSONObject, JSONValue
from ..envelope import AgentResponse, IntentEnvelope
from ..hashing import hashed_view
from .execution import Execution, OpenStep, StepSession, enter_step, leave_step
from .seams import Cassette, ExecutionOptions

if TYPE_CHECKING:
    from ..store.durable import RecordHold

__all__ = ["Router", "child_route"]


class Router(Protocol):
    """What an agent may ask of the router running it: to route another intent."""

    def route_intent(
        self,
        envelope: IntentEnvelope | Mapping[str, JSONValue],
        *,
        options: ExecutionOptions | None = None,
    ) -> AgentResponse:
        """Route an intent and return the answer (blocking)."""

    def route(
        self,
        envelope: IntentEnvelope | Mapping[str, JSONValue],
        *,
        options: ExecutionOptions | None = None,
    ) -> Awaitable[AgentResponse]:
        """Route an intent and return the answer."""


class _ChildRoute:
    """One ``ctx.route`` call: the parent's ``route:`` step and the child's options."""

    __slots__ = ("env", "hold", "opened", "options", "recorded", "session")

    def __init__(
        self,
        ex: Execution | None,
        agent: str,
        attempt: int,
        parent_id: str,
        envelope: IntentEnvelope | Mapping[str, JSONValue],
    ) -> None:
        env = (
            envelope
            if isinstance(envelope, IntentEnvelope)
            else IntentEnvelope.model_validate(envelope)
        )
        self.env = env
        self.session = session = None if ex is None else ex.steps()
        redaction = None if ex is None else ex.redaction
        child_id = new_execution_id()
        self.opened: OpenStep | None = None
        if session is not None:
            # The child's envelope as its own record will hold it.
            shown = env if redaction is None else redaction.envelope(env)
            self.opened = session.open(
                agent,
                attempt,
                f"route:{env.intent.name}",
                hashed_view(shown.to_wire()),
                side_effect=False,
                child=child_id,
            )
        recorded_child, cassette = _rerun_of_child(session, self.opened)
        received: JSONObject | None = (
            None if recorded_child is None else {"replayOf": recorded_child}
        )
        origin = None
        #: the newest record of the child's chain, held while a resume continues it
        self.hold: RecordHold | None = None
        from .journal import Journal  # imported by a first child route, not at start

        if isinstance(cassette, Journal):  # a resumed parent: resume the child too
            received, origin = cassette.resumption(), cassette.origin
            self.hold = cassette.continue_as(child_id)
        #: the child's answer as its record holds it, once it is routed
        self.recorded: list[AgentResponse] = []
        self.options = ExecutionOptions(
            execution_id=child_id,
            parent_execution_id=parent_id,
            received=received,
            store=None if ex is None else ex.store,
            cassette=cassette,
            redaction=redaction,
            recorded=self.recorded.append,
            origin_execution_id=origin,
        )

    def routing(self, route: Callable[..., object]) -> Flow[AgentResponse]:
        """The call: served from the record, or ``route`` made as the step.

        ``route`` is the router's ``route_intent`` or ``route``.
        """
        session, opened = self.session, self.opened
        if session is None or opened is None:
            token = None
        elif opened.served:
            return _served_response(opened, session.serve(opened))
        else:  # a step inside the child is not the step's child
            token = enter_step(session, opened.number)
        try:
            got = yield partial(route, self.env, options=self.options)
        except BaseException as exc:
            if session is not None and opened is not None:
                session.failed(opened, exc)
            raise
        finally:
            hold, self.hold = self.hold, None
            if hold is not None:  # the child chain's record a resume held
                hold.release()
            if token is not None:
                leave_step(token)
        response = cast(AgentResponse, got)
        if session is not None and opened is not None:
            # the child's answer as the child's record has it (redacted)
            session.routed(opened, self.recorded[0] if self.recorded else response)
        return response


def _rerun_of_child(
    session: StepSession | None, opened: OpenStep | None
) -> tuple[str | None, Cassette | None]:
    """The recorded child and its cassette, when a re-run's child re-runs too.

    That is when the ``route:`` step runs live in a re-run; else (or when the
    child cannot be loaded) the child runs live, as a new execution.
    """
    cassette = None if session is None else session.cassette
    decision = None if opened is None else opened.decision
    recorded = None if decision is None else decision.recorded
    child_id = None if recorded is None else recorded.child_execution_id
    if cassette is None or child_id is None or opened is None or opened.served:
        return None, None
    child = cassette.child(child_id)
    return (None, None) if child is None else (child_id, child)


def _served_response(opened: OpenStep, output: JSONValue) -> AgentResponse:
    summary = output if isinstance(output, dict) else {}
    child = opened.child
    return AgentResponse.model_validate(
        {
            "status": summary.get("status", "error"),
            "payload": summary.get("payload"),
            "error": summary.get("error"),
            "metadata": {
                "executionId": child,
                "fromReplay": True,
                "originalExecutionId": child,
            },
        }
    )


def child_route(
    router: Router,
    ex: Execution | None,
    agent: str,
    attempt: int,
    parent_id: str,
    envelope: IntentEnvelope | Mapping[str, JSONValue],
    *,
    blocking: bool,
) -> Flow[AgentResponse]:
    """Route a child intent from inside an agent, as a step of the parent.

    ``blocking``: by ``route_intent`` (``ctx.route``), else by ``route``.
    """
    if blocking and _in_a_coroutine():
        raise RuntimeError(
            "ctx.route() blocks and cannot run inside a coroutine; "
            "use `await ctx.aroute(envelope)`"
        )
    child = _ChildRoute(ex, agent, attempt, parent_id, envelope)
    return child.routing(router.route_intent if blocking else router.route)


def _in_a_coroutine() -> bool:
    """Whether this thread runs an event loop (only once asyncio is loaded)."""
    aio = sys.modules.get("asyncio")
    if aio is None:
        return False  # a sync route never loads it (see routing.router)
    try:
        aio.get_running_loop()
    except RuntimeError:
        return False
    return True
