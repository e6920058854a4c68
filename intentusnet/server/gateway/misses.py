"""What a replay answers for a request no record holds: the nearest recorded one.

The recorded requests of the same tenant are read newest first (at most
:data:`SCANNED`); those with the same method and URL come first, ranked by how
few places their JSON bodies differ from the request's, then those of the same
method and host. Each is named by its record and its request hash; only body
paths are named, never values. The answer is written for the caller: it says
why nothing was forwarded in the gateway's words, and names no file, no path
and no Python argument (the operator's log gets the details).
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


#: Why a miss is not forwarded, in the caller's words: by what answered it.
WHY: Final = {
    "replay": "this gateway runs in replay mode: it answers from its records only "
    "and never forwards a request",
    "read-only": "your gateway key is read-only: its requests are answered from "
    "the records only and never forwarded",
}


def miss_body(
    miss: CacheMiss,
    store: ExecutionStore,
    tenant: str | None,
    body: bytes,
    mode: str,
) -> JSONObject:
    """The JSON error body of a replay miss, naming the nearest recorded requests.

    ``mode`` is ``replay`` (the gateway's mode) or ``read-only`` (a
    read-only key in another mode): a key of :data:`WHY`.
    """
    nearest = nearest_requests(store, tenant, miss.request, body)
    shown = "; ".join(nearest) if nearest else "none"
    return {
        "error": {
            "type": "intentusnet_cache_miss",
            "message": f"no recorded answer for {miss.request} (request hash "
            f"{miss.envelope_hash}); {WHY[mode]}; nearest recorded: {shown}",
            "mode": mode,
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
                    f"{summary.execution_id} (request hash "
                    f"{summary.envelope_hash}; {method} {other}; "
                    f"body differs at {differ})",
                )
            )
        elif urlsplit(other).netloc == host:
            ranked.append(
                (
                    1000,
                    order,
                    f"{summary.execution_id} (request hash {summary.envelope_hash}; "
                    f"{method} {other})",
                )
            )
    ranked.sort()
    return [text for _, _, text in ranked[:SHOWN]]


def _json(body: bytes) -> JSONValue:
    if not body:
        return None
    try:
        return parse_json(body)
    except ValueError:
        return None
