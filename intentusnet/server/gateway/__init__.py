"""A recording gateway for LLM (and any HTTP) APIs: ``intentusnet gateway``.

Clients in any language reach an upstream API through it by changing their
base URL to ``http://HOST:PORT/NAME``; the httpx recording transports do the
hashing, redaction, recording and answering (docs/gateway.md).
"""

from .app import create_gateway as create_gateway
from .settings import GatewaySettings as GatewaySettings
from .settings import Upstream as Upstream
from .settings import tenant_of as tenant_of

__all__ = ["GatewaySettings", "Upstream", "create_gateway", "tenant_of"]
