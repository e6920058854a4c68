"""Cancelling a running execution from anywhere: a request in the store, seen at a step.

``intentusnet cancel`` (``durable.cancel``) writes a cancel request into the
store, keyed by the first execution of the resume chain, so that it reaches
whichever record of the chain runs now or later, on any host. A router
running an execution does not ask the store at each step: it keeps a
:class:`CancelFlag` per execution, which a :class:`CancelWatch` thread sets
when it finds a request, polling the store every ``POLL_S`` seconds for the
executions the router runs (one query for all of them on PostgreSQL, one
``stat`` each on the file store). At its next step boundary the execution
finds the flag set (an attribute read), raises :class:`ExecutionCancelled` and
from then on refuses every step; the router records it ``cancelled``.
"""

from __future__ import annotations

import os
import threading
from typing import Final

from .._util.jsonvalue import JSONObject
from ..errors import ExecutionCancelled, IntentusNetError
from ..store.durable import CancelStore

__all__ = ["POLL_S", "CancelFlag", "CancelWatch"]

#: How often a router asks the store for cancel requests, in seconds.
POLL_S: Final = 0.2


class CancelFlag:
    """Whether one running execution was asked to stop.

    Attributes:
        request: the cancel request found (``by``, ``via``, ``atUtc``), or
            ``None``.
        observed: the execution stopped at a step boundary for it.
    """

    __slots__ = ("execution_id", "observed", "request")

    def __init__(self, execution_id: str) -> None:
        self.execution_id = execution_id
        self.request: JSONObject | None = None
        self.observed = False

    def check(self) -> None:
        """At a step boundary: stop if asked to.

        Raises:
            ExecutionCancelled: a cancel request was found.
        """
        request = self.request
        if request is not None:
            self.observed = True
            raise ExecutionCancelled(self.execution_id, request)


class CancelWatch:
    """The executions a router runs, and a thread polling the store for them.

    The thread starts with the first execution watched (again in a forked
    child) and stops with :meth:`close`.
    """

    def __init__(self, store: CancelStore) -> None:
        self._store = store
        self._running: dict[str, list[CancelFlag]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._pid = 0

    def watch(self, origin: str, execution_id: str) -> CancelFlag:
        """A flag for an execution of the chain that began with ``origin``."""
        flag = CancelFlag(execution_id)
        with self._lock:
            self._running.setdefault(origin, []).append(flag)
            if self._pid != os.getpid() and not self._stop.is_set():
                self._start()
        return flag

    def unwatch(self, origin: str, flag: CancelFlag) -> None:
        """The execution ended: stop looking for its requests."""
        with self._lock:
            flags = self._running.get(origin)
            if flags is not None and flag in flags:
                flags.remove(flag)
                if not flags:
                    del self._running[origin]

    def close(self) -> None:
        """Stop the thread (idempotent)."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None and self._pid == os.getpid():
            thread.join()

    def _start(self) -> None:
        self._pid = os.getpid()
        self._thread = threading.Thread(
            target=self._poll, name="intentusnet-cancels", daemon=True
        )
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.wait(POLL_S):
            with self._lock:
                origins = list(self._running)
            if not origins:
                continue
            try:
                found = self._store.cancel_requests(origins)
            except IntentusNetError:
                continue  # the store is away: asked again next time
            if found:
                with self._lock:
                    for origin, request in found.items():
                        for flag in self._running.get(origin, ()):
                            flag.request = request
