"""A test seam: the process SIGKILLs itself at one exact record write.

The crash tests (tests/routing/test_crash_points.py) start a process with
``INTENTUSNET_KILL_AT=N`` in its environment; it then kills itself with
SIGKILL at the N-th fault point it passes, counted over every record it
writes. Each write of a record has two points, just before it and just after
it: the header that opens a record, and each piece of lines its writer emits
(lines the writer holds for the next write go out with it, in one piece, so a
crash can never fall between them). Counting them in order enumerates every
place a crash can leave the store in a different state: after a line, and
between a step's start and its end (its code ran, its end is not written).

Read once, when the module is imported. Unset, empty or ``0`` (always, but in
those tests), :data:`KILL_AT` is ``0`` and a writer's only cost is checking it.
"""

from __future__ import annotations

import os
import threading
from typing import Final

__all__ = ["KILL_AT", "point"]

#: The fault point to die at (1 is the first); 0: never.
KILL_AT: Final = int(os.environ.get("INTENTUSNET_KILL_AT") or 0)

_passed = 0
_lock = threading.Lock()


def point() -> None:
    """Count one fault point; at the ``KILL_AT``-th, SIGKILL this process.

    Callers check ``KILL_AT`` first (``if faults.KILL_AT: faults.point()``).
    """
    global _passed
    with _lock:
        _passed += 1
        if _passed == KILL_AT:
            import signal  # only in the crash tests: a writer never loads it

            os.kill(os.getpid(), signal.SIGKILL)
