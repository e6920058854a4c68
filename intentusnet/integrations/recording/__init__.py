"""The recording core the httpx and httpx2 transports share.

``intentusnet.integrations.httpx`` and ``.httpx2`` name only their library; the
transports, their modes and their headers are written once here (docs/cache.md,
"The httpx and httpx2 transports").
"""

from ._http import Library, TransportMode
from ._key import DEFAULT_HASH_HEADERS
from ._served import CACHE_HEADER, RECORD_HEADER, STEP_HEADER
from ._shell import AsyncTransport, SyncTransport

__all__ = [
    "CACHE_HEADER",
    "DEFAULT_HASH_HEADERS",
    "RECORD_HEADER",
    "STEP_HEADER",
    "AsyncTransport",
    "Library",
    "SyncTransport",
    "TransportMode",
]
