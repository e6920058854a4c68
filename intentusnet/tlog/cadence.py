"""LogCadence: how often a store's log publishes a signed checkpoint."""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEFAULT_CADENCE", "LogCadence"]


class LogCadence(NamedTuple):
    """How often the store's log publishes a checkpoint. Added in 0.1.0.

    A batch of queued leaves is appended, with one new signed checkpoint,
    when its oldest leaf has waited ``seconds`` or ``leaves`` leaves are
    waiting, whichever comes first (docs/log.md, "Operating it", says how the
    defaults were measured).
    """

    seconds: float = 0.5
    leaves: int = 256


#: The default pace: 0.5 s or 256 leaves.
DEFAULT_CADENCE = LogCadence()
