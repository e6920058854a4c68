"""The router as an HTTP service (``intentusnet serve``; docs/serve.md).

Needs the ``server`` extra (``pip install 'intentusnet[server]'``): FastAPI and
uvicorn. Nothing outside this package imports it, so the core stays light.
Names load on first use (PEP 562): the API keys (``auth``), which ``mcp proxy
--listen`` checks too, need no FastAPI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

# name -> module that defines it
_EXPORTS: dict[str, str] = {
    "DEFAULT_MAX_BODY": "bodies",
    "Access": "auth",
    "KeyRing": "auth",
    "create_app": "app",
}

__all__ = ["DEFAULT_MAX_BODY", "Access", "KeyRing", "create_app"]

if TYPE_CHECKING:
    from .app import create_app as create_app
    from .auth import Access as Access
    from .auth import KeyRing as KeyRing
    from .bodies import DEFAULT_MAX_BODY as DEFAULT_MAX_BODY

__getattr__ = lazy_exports(__name__, _EXPORTS, globals())
