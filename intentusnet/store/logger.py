"""The store's log, ``logging.getLogger("intentusnet.store")``, imported lazily.

Only failures are logged, so reading a record never pays for importing
``logging``; ``warning`` looks the logger up when there is something to say.
"""

from __future__ import annotations

__all__ = ["warning"]


def warning(message: str, *args: object) -> None:
    """Log ``message % args`` at WARNING on the ``intentusnet.store`` logger."""
    import logging

    logging.getLogger("intentusnet.store").warning(message, *args)
