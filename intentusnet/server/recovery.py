"""Recovery in the background of the service: ``create_app(..., recovery=)``.

While the app runs, a thread of each worker scans for interrupted executions
(``Recovery.run_once``) every second and finishes them; between two scans it
looks for waiting executions due (``Recovery.wake``: a sleep that ended, a
signal sent) every quarter second, so that one resumes within a second.
Claims are the store's, exactly once across processes, so every worker may
scan. Each scan's counts go
to the service's metrics (summed over workers, like the others). A scan that
fails (the store could not be read) is logged and the next one tries again,
which is why this loop is the service's own rather than ``run_forever``'s.
Shutdown stops the scans and waits, bounded, for a resume in progress.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Final

from ..errors import IntentusNetError

if TYPE_CHECKING:
    from ..routing.recovery import Recovery
    from .metrics import Metrics

__all__ = ["SCAN_INTERVAL", "BackgroundRecovery"]

#: Seconds between two scans of one worker.
SCAN_INTERVAL: Final = 1.0
#: Seconds between two looks for waiting executions due.
WAKE_INTERVAL: Final = 0.25
_log = logging.getLogger("intentusnet.server")


class BackgroundRecovery:
    """Runs ``recovery`` on a thread, reporting to ``metrics``, until stopped."""

    def __init__(
        self, recovery: Recovery, metrics: Metrics, interval: float = SCAN_INTERVAL
    ) -> None:
        self._recovery = recovery
        self._metrics = metrics
        self._interval = interval
        self._stop = threading.Event()
        self._seen = len(recovery.completion_seconds)
        self._thread = threading.Thread(
            target=self._run, name="intentusnet-recovery", daemon=True
        )

    def start(self) -> None:
        """Start scanning."""
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop scanning; wait up to ``timeout`` s for a resume in progress."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)
            if self._thread.is_alive():
                _log.warning(
                    "recovery still resuming after %.1f s; that execution stays "
                    "incomplete and is recovered again",
                    timeout,
                )

    def _run(self) -> None:
        wake = min(WAKE_INTERVAL, self._interval)
        while not self._stop.is_set():
            self._scan(full=True)
            waited = 0.0
            while waited < self._interval and not self._stop.wait(wake):
                waited += wake
                if waited < self._interval:
                    self._scan(full=False)

    def _scan(self, *, full: bool) -> None:
        recovery = self._recovery
        try:
            report = recovery.run_once() if full else recovery.wake()
        except (IntentusNetError, OSError) as exc:
            _log.warning("recovery: the scan failed, trying again: %s", exc)
            return
        times = recovery.completion_seconds[self._seen :]
        self._seen += len(times)
        self._metrics.recovered(len(report.resumed), len(report.parked), times)
        for outcome in (*report.resumed, *report.parked):
            _log.info(
                "recovery: %s %s (%s) as %s",
                outcome.action,
                outcome.execution_id,
                outcome.reason,
                outcome.resumed_as,
            )
