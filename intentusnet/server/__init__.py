"""The router as an HTTP service (``intentusnet serve``; docs/serve.md).

Needs the ``server`` extra (``pip install 'intentusnet[server]'``): FastAPI and
uvicorn. Nothing outside this package imports it, so the core stays light.
"""

from .app import create_app as create_app
from .auth import Access as Access
from .auth import KeyRing as KeyRing
from .bodies import DEFAULT_MAX_BODY as DEFAULT_MAX_BODY

__all__ = ["DEFAULT_MAX_BODY", "Access", "KeyRing", "create_app"]
