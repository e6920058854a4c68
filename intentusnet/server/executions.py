"""Asynchronous submit and reading an execution as it finishes.

``POST /v1/intents`` with ``Prefer: respond-async`` starts the execution with
``ExecutionOptions(opened=...)`` (or the key's equivalent) and answers ``202
Accepted`` once the router says the record is open in the store: the
envelope and header are on disk, so if this worker dies now, recovery in any
process finishes the execution. An answer that comes first (a repeated key's
recorded answer, an error, a router that records nothing) is sent as it is,
``200``, without ``Preference-Applied``, as RFC 7240 allows.

``GET /v1/executions/{id}`` (and ``GET /v1/idempotency-keys/{key}``, by the
key the execution was sent with) follows the execution's resume links to the newest
record of its chain (the one that finished it, or is finishing it), and with
``?wait=SECONDS`` polls the store until that record is finished or the time
is up: any worker answers for any execution.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

from starlette.concurrency import run_in_threadpool

from ..errors import RecordNotFound
from ..routing.durable import FINISHED, chain_head
from ..routing.queued import ExecutionQueued
from ..store.durable import DurableStore

if TYPE_CHECKING:
    from ..envelope import AgentResponse
    from ..record.model import ExecutionRecord
    from ..routing.router import IntentRouter
    from ..store import ExecutionStore

__all__ = ["keyed_execution", "location", "newest_record", "submit"]

_POLL_FIRST_S: Final = 0.02
_POLL_MAX_S: Final = 0.25
_log = logging.getLogger("intentusnet.server")

#: Starts an execution, telling the callable given when its record is open.
Start = Callable[[Callable[[str], None]], "asyncio.Future[AgentResponse]"]


def location(execution_id: str) -> str:
    """Where an execution is read: ``/v1/executions/<id>``."""
    return f"/v1/executions/{execution_id}"


async def submit(start: Start) -> AgentResponse | str:
    """Start an execution; its answer if it came first, else its id once open.

    Raises:
        IntentusNetError: what the execution raised before its record opened
            (``IdempotencyConflict``, ...).
    """
    loop = asyncio.get_running_loop()
    opened: asyncio.Future[str] = loop.create_future()

    def settle(execution_id: str) -> None:
        if not opened.done():
            opened.set_result(execution_id)

    def tell(execution_id: str) -> None:
        # From the loop's thread or a worker thread (a keyed execution's).
        with contextlib.suppress(RuntimeError):  # closed: no one waits for a 202
            loop.call_soon_threadsafe(settle, execution_id)

    task = start(tell)
    either: set[asyncio.Future[object]] = {task, opened}  # type: ignore[arg-type]
    await asyncio.wait(either, return_when=asyncio.FIRST_COMPLETED)
    if task.done() and not _queued(task):
        return task.result()
    task.add_done_callback(_log_failure)
    if not opened.done():  # queued: told from a worker thread, on its way
        await opened
    return opened.result()


def _queued(task: asyncio.Future[AgentResponse]) -> bool:
    """Whether the execution was queued in the store (its record reads queued)."""
    return not task.cancelled() and isinstance(task.exception(), ExecutionQueued)


def _log_failure(task: asyncio.Future[AgentResponse]) -> None:
    """An execution answered 202 that raised: its caller reads the record."""
    if _queued(task):
        return  # a router sharing the store starts it when its turn comes
    if not task.cancelled() and (exc := task.exception()) is not None:
        _log.warning("an execution submitted asynchronously raised: %s", exc)


def keyed_execution(store: ExecutionStore, key: str) -> str:
    """The execution idempotency key ``key`` names in ``store``.

    Raises:
        InvalidIdempotencyKey: the key is malformed.
        RecordNotFound: the store keeps no keys, or none is ``key``.
    """
    found = (
        store.find_by_idempotency_key(key) if isinstance(store, DurableStore) else None
    )
    if found is None:
        raise RecordNotFound(f"no execution has idempotency key {key!r}")
    return found


def _newest(router: IntentRouter, store: ExecutionStore, execution_id: str) -> str:
    """The newest record of ``execution_id``'s resume chain, in the router's store.

    Resume links are the router's: they are followed in its own store only.
    """
    if store is router.store and router.durable_store is not None:
        return chain_head(router, execution_id)
    return execution_id


async def newest_record(
    router: IntentRouter,
    store: ExecutionStore,
    execution_id: str,
    *,
    follow: bool,
    wait: float,
    stopping: Callable[[], bool],
) -> ExecutionRecord:
    """The execution's record (its chain's newest with ``follow``).

    With ``wait`` > 0, polls until that record is finished (completed, failed,
    needs_attention or cancelled), ``wait`` seconds pass, or ``stopping()``
    says the service is shutting down; then answers with the record as it is.

    Raises:
        RecordNotFound, InvalidExecutionId, RecordIntegrityError: as the store.
    """

    def read() -> ExecutionRecord:
        head = _newest(router, store, execution_id) if follow else execution_id
        return store.load(head)

    loop = asyncio.get_running_loop()
    deadline = loop.time() + wait
    delay = _POLL_FIRST_S
    while True:
        record = await run_in_threadpool(read)
        left = deadline - loop.time()
        if record.header.status in FINISHED or left <= 0 or stopping():
            return record
        await asyncio.sleep(min(delay, left))
        delay = min(delay * 2, _POLL_MAX_S)
