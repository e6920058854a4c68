"""What a replay cache keeps and serves (its policy), its keys and its counts."""

from __future__ import annotations

import math
from collections.abc import Callable, Collection
from datetime import timedelta
from typing import NamedTuple

from ..envelope import CacheDirective

__all__ = ["CacheKey", "CachePolicy", "seconds"]


class CacheKey(NamedTuple):
    """What a lookup is about: the envelope's hash and what the trace records."""

    envelope_hash: str
    intent: str
    intent_version: str
    directive: CacheDirective = CacheDirective.DEFAULT
    request_id: str | None = None


class CachePolicy:
    """Which answers a cache keeps and serves.

    Args:
        intents: the intent names that are cached: ``None`` (all), a collection
            of names, or a predicate called with an intent name (its answer is
            remembered per name, so it must not change).
        serve_errors: cache error responses too. Off by default: a failure is
            usually worth trying again.
        max_age: never serve an answer whose record is older than this
            (a ``timedelta`` or seconds).

    Added in 0.1.0.
    """

    __slots__ = ("_known", "_test", "intents", "max_age", "serve_errors")

    def __init__(
        self,
        *,
        intents: Collection[str] | Callable[[str], bool] | None = None,
        serve_errors: bool = False,
        max_age: timedelta | float | None = None,
    ) -> None:
        if isinstance(intents, str):
            intents = (intents,)  # a lone name, not a collection of letters
        self.intents = intents
        self.serve_errors = serve_errors
        self.max_age = seconds(max_age, "max_age")
        self._known: dict[str, bool] = {}
        if intents is None:
            self._test: Callable[[str], bool] = lambda _name: True
        elif callable(intents):
            self._test = intents
        else:
            names = frozenset(intents)
            self._test = names.__contains__

    def allows(self, intent: str) -> bool:
        """Whether answers to ``intent`` are cached."""
        known = self._known.get(intent)
        if known is None:
            known = self._known[intent] = bool(self._test(intent))
        return known

    def __repr__(self) -> str:
        return (
            f"CachePolicy(intents={self.intents!r}, serve_errors={self.serve_errors}, "
            f"max_age={self.max_age})"
        )


def seconds(value: timedelta | float | None, name: str) -> float | None:
    """``value`` in seconds; a positive finite duration or ``None``."""
    if value is None:
        return None
    total = value.total_seconds() if isinstance(value, timedelta) else float(value)
    if not total > 0 or math.isinf(total):
        raise ValueError(f"{name} must be a positive duration, not {value!r}")
    return total
