"""The gateway's log: one JSON object a line on stderr, from its first line.

``intentusnet gateway`` configures logging with :func:`log_config` before it
says anything, and hands the same configuration to uvicorn, so uvicorn's own
lines, the gateway's and any library's are all written by
:class:`JSONFormatter`::

    {"time": "...Z", "level": "info", "logger": "uvicorn.error",
     "message": "Started server process [4242]"}

A record logged with ``extra={FIELDS: {...}}`` has those fields too (the
gateway's ``event``, ``upstream``, ``record``...); an exception's traceback is
one string field, ``exception``, so it stays on the line.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Final

from ..._util.time import utc_text

__all__ = ["FIELDS", "JSONFormatter", "log_config"]

#: The ``extra`` key whose dict is written as fields of the line.
FIELDS: Final = "intentusnet_fields"
_NAMES: Final = ("time", "level", "logger", "message")


class JSONFormatter(logging.Formatter):
    """A log record as one line of JSON: time, level, logger, message, fields."""

    def format(self, record: logging.LogRecord) -> str:
        """The record's line (no newline)."""
        entry: dict[str, object] = {
            "time": utc_text(int(record.created * 1_000_000)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, FIELDS, None)
        if isinstance(fields, dict):
            entry.update((k, v) for k, v in fields.items() if k not in _NAMES)
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, separators=(",", ":"), default=str)


def log_config(level: str) -> dict[str, Any]:
    """A ``logging.config.dictConfig`` writing every logger as JSON to stderr.

    ``level`` (``info``, ``warning``...) is the gateway's and uvicorn's; other
    libraries' loggers write warnings and errors only (an HTTP client's debug
    lines name URLs with their query strings, and headers).
    """
    handler = {"class": "logging.StreamHandler", "formatter": "json"}
    chosen = {"level": level.upper()}
    uvicorn = {"handlers": ["stderr"], "propagate": False, **chosen}
    return {
        "version": 1,
        "disable_existing_loggers": False,
        "formatters": {"json": {"()": JSONFormatter}},
        "handlers": {"stderr": {**handler, "stream": "ext://sys.stderr"}},
        "loggers": {
            "intentusnet": chosen,
            "uvicorn": uvicorn,
            "uvicorn.error": chosen,
            "uvicorn.access": uvicorn,
        },
        "root": {"handlers": ["stderr"], "level": "WARNING"},
    }
