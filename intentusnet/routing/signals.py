"""Delivering a signal to an execution: ``router.signal``, ``intentusnet signal``.

:func:`signal` checks the name and payload, refuses an execution that
finished (or is unknown, or keeps ``MAX_SIGNALS`` already), keeps the signal
for the execution's resume chain in the store (``WaitStore``) and asks
recovery to wake the chain's newest record now, unless it waits for
something else (a sleep, another signal): then the signal waits for the wait
that takes it (``waits.wait_for``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.ids import uuid7_hex
from .._util.jsonvalue import JSONObject, JSONValue
from .._util.time import utc_now
from ..errors import EnvelopeValidationError, InvalidSignal, SignalRefused
from ..hashing import canonical_json
from ..record.durable import resume_origin
from ..record.model import RecordStatus
from ..store.durable import WaitStore
from .durable import FINISHED, StoreHolder, unfinished_head
from .waiting import waiting_of
from .waits import MAX_SIGNAL_BYTES, MAX_SIGNALS, check_signal_name

if TYPE_CHECKING:
    from ..record.model import ExecutionRecord

__all__ = ["signal"]


def signal(
    router: StoreHolder,
    execution_id: str,
    name: object,
    payload: JSONValue,
    *,
    by: str,
    via: str,
) -> str:
    """Deliver signal ``name`` with ``payload`` to an execution; return its id.

    Kept for the chain in the store (``WaitStore``), then the newest record
    of the chain is asked to wake now: unless it waits for something else (a
    sleep, another signal), whichever recovery scan comes next resumes it,
    and its wait takes the signal.

    Raises:
        InvalidSignal: ``name`` is not a signal name, or ``payload`` is not
            JSON or larger than ``MAX_SIGNAL_BYTES``.
        SignalRefused: ``finished``, ``full``, ``no_store``.
        RecordNotFound, InvalidExecutionId: no such execution.
    """
    check_signal_name(name)
    assert isinstance(name, str)
    try:
        size = len(canonical_json(payload))
    except EnvelopeValidationError as exc:
        raise InvalidSignal(f"the payload is not JSON: {exc}") from None
    if size > MAX_SIGNAL_BYTES:
        raise InvalidSignal(
            f"the payload is {size} bytes of JSON; at most {MAX_SIGNAL_BYTES}"
        )
    store = router.durable_store
    if not isinstance(store, WaitStore):
        raise SignalRefused("no_store", execution_id, "the store keeps no signals")
    head, record = unfinished_head(
        router, execution_id, SignalRefused, FINISHED, "nothing waits for a signal"
    )
    at, micros = utc_now()
    sent: JSONObject = {
        "id": f"sig-{uuid7_hex()}",
        "name": name,
        "payload": payload,
        "by": by,
        "via": via,
        "atUtc": at,
    }
    if not store.add_signal(resume_origin(record), sent, cap=MAX_SIGNALS):
        raise SignalRefused(
            "full",
            execution_id,
            f"it keeps {MAX_SIGNALS} signals already, the most one execution may",
        )
    if _wakes(record, name):
        store.add_wakeup(head, micros)
    return str(sent["id"])


def _wakes(record: ExecutionRecord, name: str) -> bool:
    """Whether a signal ``name`` should wake ``record`` now.

    A record that runs (its wait may start any moment) or waits for this
    signal does; one that sleeps or waits for another does not.
    """
    if record.header.status is not RecordStatus.WAITING:
        return True
    waiting = waiting_of(record) or {}
    return waiting.get("waitingFor") == "signal" and waiting.get("name") == name
