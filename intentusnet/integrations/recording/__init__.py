"""The recording core the httpx and httpx2 transports share.

``intentusnet.integrations.httpx`` and ``.httpx2`` name only their library; the
transports, their modes and their headers are written once here: ``_key`` (a
request as hashed and recorded), ``_response`` (a response as recorded, and
the one ``Response`` served), ``_serve`` (the serve flow: a record, a hit or a
call), ``_passthrough`` (a live body passed to the client while it is
recorded) and ``_transport`` (the four transports over a library's names).
"""

from ._key import DEFAULT_HASH_HEADERS
from ._response import CACHE_HEADER, RECORD_HEADER, STEP_HEADER
from ._serve import TransportMode
from ._transport import AsyncTransport, Library, SyncTransport

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
