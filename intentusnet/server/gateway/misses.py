"""What a replay answers for a request no record holds: the nearest recorded one.

The recorded requests of the same tenant are read newest first (at most
:data:`SCANNED`); those with the same method and URL come first, ranked by how
few places their JSON bodies differ from the request's, then those of the same
method and host. Only paths are named, never values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final
from urllib.parse import urlsplit

from ..._util.jsonvalue import JSONObject, JSONValue, parse_json
from ...errors import CacheMiss, IntentusNetError
from ...replay import diff_paths
from ...store.filters import ListFilters

if TYPE_CHECKING:
    from ...store import ExecutionStore

#: The newest recorded requests looked at for the nearest one.
SCANNED: Final = 200
#: Nearest requests described.
SHOWN: Final = 3
_INTENT: Final = "http.request"


def miss_body(
    miss: CacheMiss, store: ExecutionStore, tenant: str | None, body: bytes
) -> JSONObject:
    """The JSON error body of a replay miss, naming the nearest recorded requests."""
    nearest = nearest_requests(store, tenant, miss.request, body)
    shown = "; ".join(nearest) if nearest else "none"
    return {
        "error": {
            "type": "intentusnet_cache_miss",
            "message": f"{miss}; nearest recorded: {shown}",
            "request": miss.request,
            "envelopeHash": miss.envelope_hash,
            "nearest": list(nearest),
        }
    }


def nearest_requests(
    store: ExecutionStore, tenant: str | None, request: str, body: bytes
) -> list[str]:
    """Describe the recorded requests of ``tenant`` most like ``request``.

    ``request`` is ``METHOD URL`` as a ``CacheMiss`` names it; ``body`` the
    request's body (compared when both are JSON).
    """
    method, _, url = request.partition(" ")
    host = urlsplit(url).netloc
    given = _json(body)
    ranked: list[tuple[int, int, str]] = []
    for order, summary in enumerate(
        store.list(ListFilters(intent=_INTENT, limit=SCANNED))
    ):
        try:
            envelope = store.load(summary.execution_id).envelope
        except (IntentusNetError, OSError):  # unreadable: no candidate
            continue
        context, payload = envelope.get("context"), envelope.get("payload")
        if not isinstance(payload, dict) or not isinstance(context, dict):
            continue
        if context.get("tenant") != tenant or payload.get("method") != method:
            continue
        other = str(payload.get("url", ""))
        if other == url:
            paths = diff_paths(payload.get("json"), given, limit=5)
            differ = ", ".join(paths) if paths else "nothing in the JSON body"
            ranked.append(
                (
                    len(paths),
                    order,
                    f"{summary.execution_id} ({method} {other}; "
                    f"body differs at {differ})",
                )
            )
        elif urlsplit(other).netloc == host:
            ranked.append((1000, order, f"{summary.execution_id} ({method} {other})"))
    ranked.sort()
    return [text for _, _, text in ranked[:SHOWN]]


def _json(body: bytes) -> JSONValue:
    if not body:
        return None
    try:
        return parse_json(body)
    except ValueError:
        return None
