"""The ``@step`` decorator: every call of a function, recorded as a step.

A function decorated with :func:`step` finds the agent it runs in through
``current_context()`` (the router sets it for every attempt, in worker threads
too) and is called as ``ctx.step`` would call it: a ``STEP_START`` and a
``STEP_END`` line in the record, and in a re-run (``intentusnet.rerun``) the
record answers the call instead. Outside an agent it is a plain call, unless a
cassette is active (``with Cassette.from_store(store, id):``): then the
cassette answers it, as a re-run would.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Collection
from typing import Any, TypeVar, cast, overload

from ..routing.agents import current_context
from .cassette import active_cassette

__all__ = ["step"]

_F = TypeVar("_F", bound=Callable[..., object])
#: Parameter names not recorded as arguments of a decorated method.
_SELF_NAMES = frozenset({"self", "cls"})


# -- the decorator -----------------------------------------------------------------


def _recorded_args(
    signature: inspect.Signature,
    skip: frozenset[str],
    args: tuple[object, ...],
    kwargs: dict[str, object],
) -> dict[str, object] | None:
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return None  # let the call itself raise its usual error
    bound.apply_defaults()
    return {k: v for k, v in bound.arguments.items() if k not in skip}


def _decorate(
    fn: _F,
    name: str | None,
    side_effect: bool,
    exclude: frozenset[str],
    idempotent: bool = False,
) -> _F:
    label = name or f"{fn.__module__}.{fn.__qualname__}"
    signature = inspect.signature(fn)
    params = list(signature.parameters)
    skip = exclude | (frozenset(params[:1]) & _SELF_NAMES)

    def call(args: tuple[object, ...], kwargs: dict[str, object]) -> Callable[[], Any]:
        """The call to make: plain, answered by the active cassette, or a step."""
        ctx = current_context()
        cassette = None if ctx is not None else active_cassette()
        recorded = None
        if ctx is not None or cassette is not None:
            recorded = _recorded_args(signature, skip, args, kwargs)
        if recorded is None:
            return functools.partial(fn, *args, **kwargs)
        record: Callable[..., Any]
        if cassette is not None:
            record = functools.partial(
                cassette.acall if is_async else cassette.call, side_effect=side_effect
            )
        else:
            assert ctx is not None
            record = functools.partial(
                ctx.astep if is_async else ctx.step,
                side_effect=side_effect,
                idempotent=idempotent,
            )
        return functools.partial(
            record, label, recorded, lambda **_: fn(*args, **kwargs)
        )

    is_async = inspect.iscoroutinefunction(fn)
    if is_async:

        @functools.wraps(fn)
        async def async_wrapper(*args: object, **kwargs: object) -> object:
            return await call(args, kwargs)()

        return cast(_F, async_wrapper)

    @functools.wraps(fn)
    def wrapper(*args: object, **kwargs: object) -> object:
        return call(args, kwargs)()

    return cast(_F, wrapper)


@overload
def step(name: _F, /) -> _F: ...


@overload
def step(
    name: str | None = None,
    /,
    *,
    side_effect: bool = False,
    exclude: Collection[str] = (),
    idempotent: bool = False,
) -> Callable[[_F], _F]: ...


def step(
    name: str | _F | None = None,
    /,
    *,
    side_effect: bool = False,
    exclude: Collection[str] = (),
    idempotent: bool = False,
) -> _F | Callable[[_F], _F]:
    """Record every call of the decorated function made while an agent runs.

    The call's arguments, bound to the function's parameters with defaults
    applied, are the step's args (a first parameter ``self`` or ``cls`` is
    left out, and so are those named in ``exclude``). Called outside an agent,
    the function runs as if undecorated. Works on async functions too.
    Added in 0.1.0.

    Example::

        @step("tools.weather")
        def weather(city: str) -> dict[str, object]:
            return httpx.get(URL, params={"q": city}).json()

        @step("mail.send", side_effect=True)  # never sent again by a re-run
        def send(to: str, body: str) -> None: ...

    Args:
        name: the step's name; ``module.qualname`` of the function by default.
            ``@step`` without parentheses takes the default.
        side_effect: the call changes the world (sends, writes): a re-run
            never makes it again but serves it from the record, and stops with
            ``SideEffectMismatch`` if it would be needed with other arguments.
        exclude: parameters not recorded (clients, connections, secrets).
        idempotent: making the call twice does no harm: a resumed execution
            runs it again when it started and never ended, instead of parking
            ``needs_attention`` (added in 0.1.0; see ``ctx.idempotency_key``).
    """
    skip = frozenset(exclude)
    if callable(name):
        return _decorate(name, None, side_effect, skip)

    def decorate(fn: _F) -> _F:
        return _decorate(fn, name, side_effect, skip, idempotent)

    return decorate
