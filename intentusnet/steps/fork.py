"""Forking an execution: today's code from a step on, what came before served.

``fork(router, execution_id, from_step)`` is a re-run from a step
(``rerun(..., RerunOptions(from_step=...))``) whose record is the execution's
whole resume chain: the steps before ``from_step`` are served from whichever
record of the chain ended them (a side effect is never made again), the rest
runs live with today's agents, as a new execution recorded in the router's
store. Its ``INTENT_RECEIVED`` names the chain's newest record (``replayOf``,
the re-run's link), the step it started at (``rerunFrom``) and the chain
(``rerunChain``). It works on any execution: completed, failed, parked or
interrupted. The store counts it, for ``/metrics`` (``DecisionTally``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import CassetteMiss
from ..replay import ReplayEngine
from ..routing.durable import chain_head, chain_of, count_decision, load_record
from .options import RerunOptions, StepRef
from .rerun import RerunResult, rerun

if TYPE_CHECKING:
    from ..routing.router import IntentRouter

__all__ = ["fork"]


def fork(
    router: IntentRouter,
    execution_id: str,
    from_step: StepRef,
    *,
    allow_live: bool = False,
) -> RerunResult:
    """Run execution ``execution_id`` again from ``from_step`` with today's code.

    ``execution_id`` may be any record of the execution's resume chain; the
    chain is the router's store's. See docs/durability.md ("Operating").
    Added in 0.1.0.

    Args:
        router: today's router and agents; its store holds the execution, and
            records the fork.
        execution_id: the execution to fork.
        from_step: the step (its number, kept through every resume, or its
            name: the first so named) from which the fork runs live.
        allow_live: a step before ``from_step`` that the chain cannot answer
            runs live instead of stopping the fork.

    Returns:
        The re-run's result: ``execution_id`` is the fork's record,
        ``original_execution_id`` the chain's newest record.

    Raises:
        InvalidRerunOption: the chain holds no such step (nothing is written).
        ResumeRefused: ``no_store``, the router's store keeps no resume links;
            ``chain_broken``, a record of the chain is gone.
        RecordNotFound, InvalidExecutionId: no such record.
        CassetteMiss, SideEffectMismatch: as for ``rerun``.
    """
    record = load_record(router, chain_head(router, execution_id))
    chain = chain_of(router, record)
    options = RerunOptions(from_step=from_step, allow_live=allow_live)
    engine = ReplayEngine(record, store=router.store)
    try:
        result = rerun(engine, router, options, chain=chain)
    except CassetteMiss as miss:  # it ran, and stopped: a fork all the same
        if miss.rerun_execution_id is not None:
            count_decision(router, "fork", miss.rerun_execution_id)
        raise
    if result.execution_id is not None:
        count_decision(router, "fork", result.execution_id)
    return result
