"""Which recorded sessions answer a replayed or cached MCP session.

An upstream is named by its session envelope (the transport, the program and
the hash of its command line, or the URL without its credentials), so the
sessions of one upstream are the ``mcp.session`` records whose envelope hash
is the same. Every one of them answers, through the store's step index
(``--record ID`` narrows it to one); nothing is read until a call asks.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...errors import RecordNotFound, ReplayNotAllowed
from ...store.filters import ListFilters
from .calls import RecordedCalls
from .recorded import Clock
from .view import SESSION_INTENT as INTENT

if TYPE_CHECKING:
    from ...store.protocol import ExecutionStore

__all__ = ["INTENT", "recorded_calls"]


def recorded_calls(
    store: ExecutionStore,
    envelope_hash: str | None,
    record_id: str | None,
    *,
    force: bool,
    required: bool,
    clock: Clock | None = None,
) -> RecordedCalls:
    """The recorded calls a replay or a cache session answers from.

    A cache session with none to answer from gets an empty set: it forwards
    everything, and learns from its own calls.

    Args:
        store: where the sessions are (a store keeping a step index).
        envelope_hash: the upstream's session envelope hash; ``None`` (a
            replay given no upstream) takes the upstream of the newest MCP
            session in the store.
        record_id: one session to answer from alone; ``None`` for every
            session of the upstream.
        force: sessions that are not replayable (cut short) answer too.
        required: a replay: no session to answer from is an error, and each
            call gets its turn's answer (``RecordedCalls``' ``replay``).
        clock: a cache session's clock (``time.time``): a recorded answer
            whose ``ttlMs`` ran out is not served. ``None``: never expire.

    Raises:
        RecordNotFound: no recorded session (``required``), or no record
            ``record_id``.
        ReplayNotAllowed: ``record_id``, or the newest session when none is
            replayable, is not replayable and ``force`` is not given
            (``required``).
        StoreError: the store keeps no step index.
    """
    if record_id is not None:
        header = store.load(record_id).header
        envelope_hash, newest = header.envelope_hash, record_id
        ok, reason = header.replayable, header.replayable_reason
    else:
        if envelope_hash is None:
            found = store.list(ListFilters(intent=INTENT, limit=1))
            envelope_hash = found[0].envelope_hash if found else None
        sessions = ListFilters(intent=INTENT, envelope_hash=envelope_hash, limit=1)
        found = [] if envelope_hash is None else store.list(sessions)
        if not found:
            if required:
                raise RecordNotFound(
                    "no recorded MCP session of this upstream in the store "
                    "(record one with --mode record, or name it with --record ID)"
                )
            return RecordedCalls(
                store, envelope_hash or "", "", clock=clock, replay=required
            )
        newest, reason = found[0].execution_id, found[0].replayable_reason
        ok = bool(store.list(replace(sessions, replayable=True)))
    if required and not ok and not force:
        why = "not replayable" if reason is None else reason.value
        raise ReplayNotAllowed(why, newest)
    assert envelope_hash is not None
    return RecordedCalls(
        store,
        envelope_hash,
        newest,
        only=record_id,
        force=force,
        clock=clock,
        replay=required,
    )
