"""Which recorded sessions answer a replayed or cached MCP session.

An upstream is named by its session envelope (the transport, the program and
the hash of its command line, or the URL without its credentials), so the
sessions of one upstream are the ``mcp.session`` records whose envelope hash
is the same. A session answers from the newest of them, at most
:data:`SESSIONS` (``--record ID`` narrows it to one).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ...errors import RecordNotFound, ReplayNotAllowed
from ...replay import ReplayEngine
from ...store.filters import ListFilters
from .calls import RecordedCalls

if TYPE_CHECKING:
    from ...record.model import ExecutionRecord
    from ...store.protocol import ExecutionStore

__all__ = ["SESSIONS", "recorded_calls"]

#: The most recorded sessions of an upstream a session answers from, newest first.
SESSIONS: Final = 50
#: The intent of every MCP session record.
INTENT: Final = "mcp.session"


def recorded_calls(
    store: ExecutionStore,
    envelope_hash: str | None,
    record_id: str | None,
    *,
    force: bool,
    required: bool,
) -> RecordedCalls:
    """The recorded calls a replay or a cache session answers from.

    A cache session with none to answer from gets an empty set: it forwards
    everything, and learns from its own calls.

    Args:
        store: where the sessions are.
        envelope_hash: the upstream's session envelope hash; ``None`` (a
            replay given no upstream) takes the upstream of the newest MCP
            session in the store.
        record_id: one session to answer from alone; ``None`` for the newest
            :data:`SESSIONS` of the upstream.
        force: sessions that are not replayable (cut short) answer too.
        required: a replay: no session to answer from is an error.

    Raises:
        RecordNotFound: no recorded session (``required``), or no record
            ``record_id``.
        ReplayNotAllowed: ``record_id``, or the newest session when none is
            replayable, is not replayable and ``force`` is not given
            (``required``).
    """
    if record_id is not None:
        records = [store.load(record_id)]
    else:
        if envelope_hash is None:
            newest = store.list(ListFilters(intent=INTENT, limit=1))
            envelope_hash = newest[0].envelope_hash if newest else None
        found = (
            []
            if envelope_hash is None
            else store.list(
                ListFilters(intent=INTENT, envelope_hash=envelope_hash, limit=SESSIONS)
            )
        )
        records = [store.load(summary.execution_id) for summary in found]
    if not records and required:
        raise RecordNotFound(
            "no recorded MCP session of this upstream in the store "
            "(record one with --mode record, or name it with --record ID)"
        )
    usable = [r for r in records if force or _replayable(r) is None]
    if records and not usable and required:
        reason = _replayable(records[0])
        raise ReplayNotAllowed(reason or "not replayable", records[0].execution_id)
    return RecordedCalls(usable)


def _replayable(record: ExecutionRecord) -> str | None:
    """Why ``record`` is not replayable; ``None`` when it is."""
    ok, reason = ReplayEngine(record).is_replayable()
    return None if ok else (reason or "not replayable")
