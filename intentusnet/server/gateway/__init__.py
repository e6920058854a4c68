"""A recording gateway for LLM (and any HTTP) APIs: ``intentusnet gateway``.

Clients in any language reach an upstream API through it by changing their
base URL to ``http://HOST:PORT/NAME``; the httpx recording transports do the
hashing, redaction, recording and answering (docs/gateway.md).

Names load lazily (PEP 562): ``intentusnet gateway`` reads its upstreams with
``upstream`` before it imports the app (Starlette, httpx).
"""

from typing import TYPE_CHECKING

from ..._util.lazy import lazy_exports

# name -> module of this package that defines it
_EXPORTS: dict[str, str] = {
    "GatewaySettings": "settings",
    "Upstream": "upstream",
    "create_gateway": "app",
    "tenant_key": "settings",
    "tenant_of": "settings",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .app import create_gateway as create_gateway
    from .settings import GatewaySettings as GatewaySettings
    from .settings import tenant_key as tenant_key
    from .settings import tenant_of as tenant_of
    from .upstream import Upstream as Upstream

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
