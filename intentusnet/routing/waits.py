"""Durable sleep and waiting for signals: ``ctx.sleep`` and ``ctx.wait_for``.

A sleep is recorded as the step ``intentusnet.sleep`` (``{"seconds": S}``)
whose output is its due time: a resume serves it, so the due time never moves
and a sleep that ended is never slept again. Until then, a wait shorter than
``DURABLE_WAIT_S`` waits in place; a longer one lets the execution go
(``WaitState.wait``): the router closes its record ``waiting`` with a wake-up
at the due time, and recovery resumes it then.

A wait for a signal is recorded as the step ``intentusnet.wait_for``
(``{"name", "timeoutS"}``, output: its due time, or none) and, once a signal
came or the timeout passed, the step ``intentusnet.signal`` (``{"name"}``)
whose output is the signal taken (``{"signal": {...}}``) or ``{"timedOut":
true}``. A signal is kept in the store per resume chain (``WaitStore``) until
a wait takes it: the n-th wait for a name takes the oldest signal of that name
no earlier wait of the execution took, so a signal sent before the wait began
is kept for it. Its payload is sealed into the chain (and signed, when the
store signs) in the ``intentusnet.signal`` step's end.

``signals.py`` delivers them.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Final

from .._util.jsonvalue import JSONObject, JSONValue
from .._util.time import utc_text
from ..errors import (
    InvalidSignal,
    SignalRefused,
    WaitTimedOut,
)
from ..store.durable import WaitStore
from .execution import Execution, record_value
from .waiting import DURABLE_WAIT_S

__all__ = [
    "MAX_SIGNALS",
    "MAX_SIGNAL_BYTES",
    "SIGNAL_STEP",
    "SLEEP_STEP",
    "WAIT_STEP",
    "check_signal_name",
    "in_place",
    "seconds_of",
    "sleep",
    "wait_for",
]

SLEEP_STEP: Final = "intentusnet.sleep"
WAIT_STEP: Final = "intentusnet.wait_for"
SIGNAL_STEP: Final = "intentusnet.signal"
#: The most signals one execution (its resume chain) keeps.
MAX_SIGNALS: Final = 100
#: The largest signal payload, as canonical JSON bytes.
MAX_SIGNAL_BYTES: Final = 64 * 1024
#: A wait this much under ``DURABLE_WAIT_S`` is still durable (see sleep_until).
_SLACK_S: Final = 0.05
#: The longest signal name, in characters.
MAX_NAME: Final = 200


def seconds_of(duration: float | timedelta, what: str) -> float:
    """``duration`` in seconds (a number or a ``timedelta``), at least 0.

    Raises:
        TypeError: it is neither.
        ValueError: it is negative, or not finite.
    """
    if isinstance(duration, timedelta):
        seconds = duration.total_seconds()
    elif isinstance(duration, int | float) and not isinstance(duration, bool):
        seconds = float(duration)
    else:
        raise TypeError(
            f"{what} is seconds or a timedelta, not {type(duration).__name__}"
        )
    if not 0 <= seconds < float("inf"):
        raise ValueError(f"{what} is a finite duration >= 0, not {seconds}")
    return seconds


def check_signal_name(name: object) -> str:
    """Return ``name`` if it is a signal name: 1 to 200 printable characters.

    Raises:
        InvalidSignal: it is not a string, is empty or blank, too long, or not
            printable.
    """
    if not isinstance(name, str):
        raise InvalidSignal(f"a signal name is a string, not {type(name).__name__}")
    if not name.strip() or len(name) > MAX_NAME or not name.isprintable():
        raise InvalidSignal(
            f"a signal name is 1 to {MAX_NAME} printable characters, not {name!r}"
        )
    return name


def _due(seconds: float) -> JSONObject:
    due_us = time.time_ns() // 1000 + round(seconds * 1_000_000)
    return {"dueUtc": utc_text(due_us), "dueUs": due_us}


def in_place(ex: Execution, due: object, waiting_for: str, name: str) -> float:
    """Seconds to wait in place until ``due`` (a timer step's output), maybe 0.

    The caller sleeps them (``time.sleep``, or ``asyncio.sleep`` in a loop).

    Raises:
        ExecutionWaiting: the wait is long: the execution waits durably.
    """
    due_us = due.get("dueUs") if isinstance(due, dict) else None
    if not isinstance(due_us, int):
        return 0.0  # no due time recorded: nothing to wait for
    remaining = due_us / 1_000_000 - time.time()
    if remaining <= 0:
        return 0.0
    # the time spent recording the timer step does not make a 1 s sleep short
    if remaining < DURABLE_WAIT_S - _SLACK_S or not isinstance(ex.store, WaitStore):
        return remaining
    ex.waits.wait(
        ex.execution_id,
        {
            "waitingFor": waiting_for,
            "name": name,
            "dueUtc": due.get("dueUtc") if isinstance(due, dict) else None,
            "dueUs": due_us,
        },
    )


def sleep(
    ex: Execution | None, agent: str, attempt: int, duration: float | timedelta
) -> float:
    """``ctx.sleep``: record the timer step; the seconds left to wait in place.

    The caller sleeps them (``ctx.sleep`` with ``time.sleep``, ``ctx.asleep``
    with ``asyncio.sleep``).

    Raises:
        TypeError, ValueError: ``duration`` is not a duration.
        ExecutionWaiting: the execution waits durably.
    """
    seconds = seconds_of(duration, "a sleep")
    if ex is None or ex.steps() is None:
        return seconds  # nothing is recorded: a plain sleep
    due = record_value(
        ex, agent, attempt, SLEEP_STEP, {"seconds": seconds}, lambda: _due(seconds)
    )
    return in_place(ex, due, "sleep", "sleep")


def wait_for(
    ex: Execution | None,
    agent: str,
    attempt: int,
    name: str,
    timeout: float | timedelta | None,
) -> JSONValue:
    """``ctx.wait_for``: the payload of the next signal ``name``.

    Raises:
        InvalidSignal: ``name`` is not a signal name.
        TypeError, ValueError: ``timeout`` is not a duration.
        SignalRefused: ``no_store``, the execution is not recorded in a store
            that keeps signals.
        ExecutionWaiting: no signal yet: the execution waits durably.
        WaitTimedOut: the timeout passed with no signal.
    """
    check_signal_name(name)
    seconds = None if timeout is None else seconds_of(timeout, "a timeout")
    store = None if ex is None else ex.store
    if ex is None or ex.steps() is None or not isinstance(store, WaitStore):
        raise SignalRefused(
            "no_store",
            "the execution" if ex is None else ex.execution_id,
            "waiting for a signal needs a router whose store keeps signals "
            "(the file, memory and PostgreSQL stores do)",
        )
    due = record_value(
        ex,
        agent,
        attempt,
        WAIT_STEP,
        {"name": name, "timeoutS": seconds},
        lambda: _due(seconds) if seconds is not None else {"dueUtc": None},
    )
    due_us = due.get("dueUs") if isinstance(due, dict) else None
    taken = ex.waits.taken
    found = next(
        (
            s
            for s in store.signals(ex.origin_id)
            if s.get("name") == name and s.get("id") not in taken
        ),
        None,
    )
    expired = isinstance(due_us, int) and time.time_ns() // 1000 >= due_us
    if found is None and not expired:
        ex.waits.wait(
            ex.execution_id,
            {
                "waitingFor": "signal",
                "name": name,
                "dueUtc": due.get("dueUtc") if isinstance(due, dict) else None,
                "dueUs": due_us,
            },
        )
    answer = record_value(
        ex,
        agent,
        attempt,
        SIGNAL_STEP,
        {"name": name},
        lambda: {"signal": found} if found is not None else {"timedOut": True},
    )
    taken_signal = answer.get("signal") if isinstance(answer, dict) else None
    if isinstance(taken_signal, dict):
        taken.add(str(taken_signal.get("id")))
        return taken_signal.get("payload")
    raise WaitTimedOut(name, str(due.get("dueUtc") if isinstance(due, dict) else ""))
