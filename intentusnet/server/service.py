"""What the service's endpoints share: the router, the store, keys, metrics, work.

Routing runs on the server's event loop (``router.route``). An execution, once
started, runs to its end even if its caller goes away; shutdown waits for
every execution in flight (and a resume of the background recovery), so no
record is left unfinished by a graceful stop.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ..cache.savings import UsageLedger
from ..errors import Forbidden, RecordNotFound, ServiceUnavailable
from ..routing.seams import ExecutionOptions
from ..store.durable import DecisionTally
from .auth import Access, KeyRing, is_loopback
from .metrics import Metrics
from .recovery import BackgroundRecovery

if TYPE_CHECKING:
    from starlette.requests import Request

    from ..cache.prices import PriceTable
    from ..cache.savings import SavingsReport
    from ..envelope import AgentResponse, IntentEnvelope
    from ..routing.recovery import Recovery
    from ..routing.router import IntentRouter
    from ..store import ExecutionStore

__all__ = ["Service"]

_log = logging.getLogger("intentusnet.server")


class Service:
    """What the endpoints share: the router, the store, keys, metrics, work."""

    def __init__(
        self,
        router: IntentRouter,
        store: ExecutionStore | None,
        keys: KeyRing,
        max_body_bytes: int,
        prices: PriceTable | None,
        recovery: Recovery | None,
    ) -> None:
        self.router = router
        self.store = store
        self.keys = keys
        self.max_body_bytes = max_body_bytes
        self.metrics = Metrics()
        self.prices = prices
        self.ledger = None if store is None else UsageLedger(store)
        if self.ledger is not None:
            self.metrics.watch(self.savings)
        if isinstance(store, DecisionTally):
            self.metrics.watch_decisions(store.decision_counts)
        self.in_flight: set[asyncio.Future[AgentResponse]] = set()
        self.draining = False
        self.recovery = (
            None if recovery is None else BackgroundRecovery(recovery, self.metrics)
        )

    def authorize(
        self, request: Request, needed: Access, fallback_key: str | None = None
    ) -> None:
        """Refuse the request unless its key (or loopback, with no keys) allows."""
        if self.keys:
            header = request.headers.get("authorization")
            if header is None and fallback_key:
                # the explorer's login cookie (sent to /ui paths only)
                header = f"Bearer {fallback_key}"
            self.keys.authorize(header, needed)
            return
        # No key configured: this service is for this machine only.
        server = request.scope.get("server")
        host = server[0] if isinstance(server, tuple | list) and server else ""
        if not is_loopback(str(host)):
            raise Forbidden(
                "no API key is configured, so this service answers only on loopback"
            )

    def who(self, request: Request, fallback_key: str | None = None) -> str:
        """Who makes a request, as an operator's decision records it.

        The API key, named by the first 12 hex digits of its SHA-256 (the
        key itself is never recorded); ``loopback`` with no key configured.
        ``fallback_key``: the explorer's login cookie, when no header came.
        """
        if not self.keys:
            return "loopback (no API key)"
        header = request.headers.get("authorization")
        if header is None and fallback_key:
            header = f"Bearer {fallback_key}"
        return self.keys.name_of(header) or "unknown"

    def start(
        self,
        envelope: IntentEnvelope,
        key: str | None,
        opened: Callable[[str], None] | None = None,
    ) -> asyncio.Future[AgentResponse]:
        """Start routing ``envelope`` (under ``key``); it runs to its end."""
        if self.draining:
            raise ServiceUnavailable("the service is shutting down")
        started = time.perf_counter()
        self.metrics.route_started()
        options = None if opened is None else ExecutionOptions(opened=opened)
        task = asyncio.ensure_future(
            self.router.route(envelope, options=options, idempotency_key=key)
        )
        self.in_flight.add(task)
        task.add_done_callback(lambda done: self._finished(done, started))
        return task

    async def route(self, envelope: IntentEnvelope, key: str | None) -> AgentResponse:
        """Route ``envelope`` (under ``key``) and return its answer."""
        # The caller may go away; the execution still runs to its end.
        return await asyncio.shield(self.start(envelope, key))

    def _finished(self, task: asyncio.Future[AgentResponse], started: float) -> None:
        self.in_flight.discard(task)
        if task.cancelled() or task.exception() is not None:
            self.metrics.route_abandoned()
            return
        response = task.result()
        error = response.error
        self.metrics.route_finished(
            time.perf_counter() - started,
            response.status,
            None if error is None else error.code.value,
            response.metadata.from_replay,
        )

    async def drain(self, timeout: float) -> None:
        """Take no more work; wait up to ``timeout`` s for the work started."""
        self.draining = True
        if self.recovery is None:
            await self._wait_in_flight(timeout)
        else:  # no new scan; a resume in progress is waited for as the rest
            await asyncio.gather(
                asyncio.to_thread(self.recovery.stop, timeout),
                self._wait_in_flight(timeout),
            )

    async def _wait_in_flight(self, timeout: float) -> None:
        if self.in_flight:
            _log.info("waiting for %d executions in flight", len(self.in_flight))
            _, pending = await asyncio.wait(set(self.in_flight), timeout=timeout)
            if pending:
                _log.warning(
                    "%d executions still running after %.1f s; their records stay "
                    "incomplete",
                    len(pending),
                    timeout,
                )

    def savings(self) -> SavingsReport:
        """What caching saved over the store (each record read once)."""
        if self.ledger is None:
            raise RecordNotFound("this service records no executions (no store)")
        return self.ledger.report(self.prices)

    def require_store(self) -> ExecutionStore:
        """The store executions are read from.

        Raises:
            RecordNotFound: the service has none.
        """
        if self.store is None:
            raise RecordNotFound("this service records no executions (no store)")
        return self.store
