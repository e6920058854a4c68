"""Step retries: ``ctx.step(..., retries=N, backoff=exponential(...), retry_on=...)``.

Each attempt of a retried step is a step of its own, under the step's name,
so each failure is in the record (its ``STEP_END`` holds the error). After a
failed attempt that may be retried, the decision is recorded as the step
``retry:NAME`` (``{"attempt": K}``), whose output says why and until when it
waits (``error``, ``delayS``, ``retryAfterS``, ``dueUtc``): a resume serves the
attempts and decisions already made, so it never retries more than ``retries``
times in all, nor waits again a wait that ended. The wait is
:func:`waits.in_place`'s: in place when short (``time.sleep``, or
``asyncio.sleep`` for ``ctx.astep``: :meth:`Retrying.after` is the one logic
both loops run), durable (the execution waits, its process may exit) when
``DURABLE_WAIT_S`` or longer.

The delay is the backoff's for the attempt or, when the failure carries an
HTTP ``429`` or ``503`` answer with ``Retry-After`` (an ``httpx``
``HTTPStatusError`` raised for an answer the recording transport recorded,
say), whichever is longer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final, TypeAlias, TypeVar

from .._util.flow import Flow
from .._util.jsonvalue import JSONObject
from .._util.time import utc_text
from ..errors import (
    CassetteMiss,
    ExecutionCancelled,
    ExecutionWaiting,
    ReplayedStepError,
    SideEffectRefused,
)
from .execution import Execution, record_value
from .waits import in_place

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = [
    "RETRY_PREFIX",
    "Backoff",
    "RetryOn",
    "Retrying",
    "exponential",
    "retried",
]

_T = TypeVar("_T")
#: The decision after a failed attempt is recorded as a step so named.
RETRY_PREFIX: Final = "retry:"
#: What ``retry_on`` takes: exception classes, or a predicate of the error.
RetryOn: TypeAlias = (
    "type[BaseException] | tuple[type[BaseException], ...] | "
    "Callable[[BaseException], bool]"
)
#: Never retried: the execution is stopped, waits, or its journal refused it.
_NEVER: Final = (ExecutionCancelled, ExecutionWaiting, CassetteMiss, SideEffectRefused)
_RETRY_AFTER_STATUS: Final = frozenset({429, 503})


@dataclass(frozen=True, slots=True)
class Backoff:
    """The wait before each retry: ``base * factor ** (n - 1)``, at most ``cap``.

    Made by :func:`exponential`. Added in 0.1.0.
    """

    base: float
    cap: float
    factor: float = 2.0

    def delay(self, retry: int) -> float:
        """Seconds to wait before retry number ``retry`` (1 for the first)."""
        return min(self.cap, self.base * self.factor ** (retry - 1))


def exponential(base: float = 0.5, cap: float = 30.0, factor: float = 2.0) -> Backoff:
    """An exponential backoff: ``base`` s, times ``factor`` each retry, up to ``cap``.

    Added in 0.1.0.

    Raises:
        ValueError: ``base`` is not above 0, ``cap`` below ``base`` or
            ``factor`` below 1.
    """
    if not (base > 0 and cap >= base and factor >= 1):
        raise ValueError(
            f"a backoff needs base > 0, cap >= base and factor >= 1, not "
            f"base={base}, cap={cap}, factor={factor}"
        )
    return Backoff(float(base), float(cap), float(factor))


def check_retries(
    retries: int, side_effect: bool, idempotent: bool, retry_on: RetryOn | None
) -> None:
    """Check a step's retry options where they enter.

    Raises:
        ValueError: ``retries`` is below 0, or a side effect not declared
            ``idempotent=True`` is to be retried.
        TypeError: ``retries`` is not an int, or ``retry_on`` is neither
            exception classes nor a callable.
    """
    if type(retries) is not int:
        raise TypeError(f"retries is an int, not {type(retries).__name__}")
    if retries < 0:
        raise ValueError(f"retries is 0 or more, not {retries}")
    if retries and side_effect and not idempotent:
        raise ValueError(
            "a side-effect step is retried only when declared idempotent=True "
            "(making it twice must do no harm)"
        )
    if retry_on is None or (callable(retry_on) and not isinstance(retry_on, type)):
        return
    classes = retry_on if isinstance(retry_on, tuple) else (retry_on,)
    if not all(isinstance(c, type) and issubclass(c, BaseException) for c in classes):
        raise TypeError("retry_on is exception classes or a callable of the error")


def _matches(exc: BaseException, retry_on: RetryOn | None) -> bool:
    """Whether ``retry_on`` retries ``exc`` (any ``Exception`` by default).

    A failure a resume raised again from the record (``ReplayedStepError``)
    matches a class of its recorded type's name.
    """
    if isinstance(exc, _NEVER) or not isinstance(exc, Exception):
        return False
    if retry_on is None:
        return True
    if callable(retry_on) and not isinstance(retry_on, type):
        return bool(retry_on(exc))
    classes: Sequence[type[BaseException]] = (
        retry_on if isinstance(retry_on, tuple) else (retry_on,)
    )
    if isinstance(exc, tuple(classes)):
        return True
    if isinstance(exc, ReplayedStepError):
        kind = exc.error_type
        return any(c.__name__ == kind for c in classes)
    return False


def retry_after(exc: BaseException) -> float | None:
    """Seconds a ``429``/``503`` answer carried by ``exc`` asks to wait, if any."""
    response = getattr(exc, "response", None)
    if getattr(response, "status_code", None) not in _RETRY_AFTER_STATUS:
        return None
    headers = getattr(response, "headers", None)
    value = headers.get("retry-after") if headers is not None else None
    if not isinstance(value, str):
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    import email.utils  # an HTTP date: rare, and the module is not light

    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


@dataclass(frozen=True, slots=True)
class Retrying:
    """A step's retry options, and where its decisions are recorded."""

    ex: Execution | None
    name: str
    agent: str
    attempt: int
    retries: int
    backoff: Backoff
    retry_on: RetryOn | None

    def after(self, error: BaseException, tries: int) -> float:
        """After failed attempt ``tries``: the seconds to wait in place first.

        Records the decision (``retry:NAME``) when the step is retried.

        Raises:
            ``error``: it is not retried (the last attempt, or not ``retry_on``).
            ExecutionWaiting: the wait is long: the execution waits durably.
        """
        if tries > self.retries or not _matches(error, self.retry_on):
            raise error
        decided = _decision(error, self.backoff.delay(tries))
        ex = self.ex
        decision = record_value(
            ex,
            self.agent,
            self.attempt,
            RETRY_PREFIX + self.name,
            {"attempt": tries},
            lambda: decided,
        )
        if ex is None or ex.steps() is None:
            return float(decided["delayS"])  # type: ignore[arg-type]
        return in_place(ex, decision, "retry", self.name)


def retried(
    retrying: Retrying,
    attempt_step: Callable[[], object],
    pause: Callable[[float], object],
) -> Flow[object]:
    """Make ``attempt_step`` (one recorded attempt) until it succeeds or gives up.

    A flow (``_util.flow``): ``ctx.step`` drives it with ``time.sleep`` for
    ``pause``, ``ctx.astep`` awaits each attempt and ``asyncio.sleep``.

    Raises:
        The last attempt's error, or the first one ``retry_on`` does not retry.
        ExecutionWaiting: a retry's wait is long: the execution waits durably.
    """
    tries = 0
    while True:
        try:
            return (yield attempt_step)
        except BaseException as exc:
            tries += 1
            wait = retrying.after(exc, tries)
        yield partial(pause, wait)


def _decision(error: BaseException, delay: float) -> JSONObject:
    """The recorded decision to retry after ``error``: why, and until when."""
    asked = retry_after(error)
    wait = delay if asked is None else max(delay, asked)
    due_us = time.time_ns() // 1000 + round(wait * 1_000_000)
    if isinstance(error, ReplayedStepError):
        kind = error.error_type
    else:
        kind = type(error).__name__
    return {
        "error": {"type": kind, "message": str(error)},
        "delayS": wait,
        "retryAfterS": asked,
        "dueUtc": utc_text(due_us),
        "dueUs": due_us,
    }
