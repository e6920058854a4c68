"""One flow for sync and async callers: a generator and its two drivers.

A flow is a generator that yields the calls it needs made, each a function of
no arguments, and is sent what each returned; what a call raises is thrown
into it at its ``yield``. It returns the flow's result. :func:`drive` makes the
calls in this thread; :func:`adrive` awaits what they return when it is
awaitable. So logic that sync and async callers share is written once, and
only the calls it yields differ by colour (``routing.strategies.plan`` is the
same idea, with runs of agents for calls).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Generator
from typing import TypeAlias, TypeVar, cast

__all__ = ["Flow", "adrive", "drive"]

_R = TypeVar("_R")

#: Yields calls to make, is sent what they returned, returns its result.
Flow: TypeAlias = Generator[Callable[[], object], object, _R]


def drive(flow: Flow[_R]) -> _R:
    """Run ``flow`` to its end, making its calls in this thread."""
    try:
        call = next(flow)
        while True:
            try:
                got = call()
            except BaseException as exc:
                call = flow.throw(exc)
            else:
                call = flow.send(got)
    except StopIteration as stop:
        return cast(_R, stop.value)


async def adrive(flow: Flow[_R]) -> _R:
    """Run ``flow`` to its end, awaiting what its calls return when awaitable."""
    try:
        call = next(flow)
        while True:
            try:
                got = call()
                if inspect.isawaitable(got):
                    got = await got
            except BaseException as exc:
                call = flow.throw(exc)
            else:
                call = flow.send(got)
    except StopIteration as stop:
        return cast(_R, stop.value)
