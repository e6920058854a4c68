"""Why a replay missed, when the tenant is why: the request recorded for another.

A request's tenant is hashed with it, so a transport given another tenant
than the recorder's (another key, another credential, a tenant key read with
its trailing newline) misses every request with nothing else to say. On a
replay miss the tenants of the newest recorded requests (at most
:data:`SCANNED`) are tried with the request: one whose hash a record holds is
named in the miss's message. A transport given a tenant function serves many
tenants (the gateway's): it never tells one of another's records, and does
not look.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from ..errors import IntentusNetError
from ..store.filters import ListFilters

if TYPE_CHECKING:
    from ..envelope import CacheDirective
    from ..store import ExecutionStore
    from ._http import HTTPRequest
    from ._key import RequestKeys

__all__ = ["SCANNED", "tenant_hint"]

#: The newest recorded requests whose tenants are tried.
SCANNED: Final = 100


def tenant_hint(
    store: ExecutionStore,
    keys: RequestKeys,
    request: HTTPRequest,
    body: bytes,
    directive: CacheDirective,
) -> str:
    """What to add to a replay miss's message: a record of it for another tenant.

    An empty text when no recorded request is this one for another tenant, or
    when the transport has a tenant function.
    """
    if callable(keys.tenant):
        return ""
    payload, _, _, _, tenant = keys.payload(request, body, directive)
    calls = keys.calls
    tried: set[str | None] = {tenant}
    for summary in store.list(ListFilters(intent=calls.intent, limit=SCANNED)):
        try:
            context = store.load(summary.execution_id).envelope.get("context")
        except (IntentusNetError, OSError):  # unreadable: no tenant to try
            continue
        other = context.get("tenant") if isinstance(context, dict) else None
        if (other is not None and not isinstance(other, str)) or other in tried:
            continue
        tried.add(other)
        hashed = calls.key(payload, directive, other).envelope_hash
        if hashed == summary.envelope_hash or store.list(
            ListFilters(envelope_hash=hashed, limit=1)
        ):
            return (
                f"; this request is recorded for tenant {other!r}, not for this "
                f"transport's {tenant!r}: give the transport the tenant it was "
                "recorded with (a gateway's: tenant_of(tenant_key(path), ...), "
                "docs/gateway.md)"
            )
    return ""
