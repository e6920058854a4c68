"""The router as an HTTP service (``intentusnet serve``; docs/serve.md).

Needs the ``server`` extra (``pip install 'intentusnet[server]'``): FastAPI and
uvicorn. Nothing outside this package imports it, so the core stays light.

Names load lazily (PEP 562), as the store's do: the gateway (``gateway/``, on
Starlette alone) and ``intentusnet gateway``'s checks of its command line import
modules of this package without loading FastAPI, which ``create_app`` needs.
"""

from typing import TYPE_CHECKING

from .._util.lazy import lazy_exports

# name -> module of this package that defines it
_EXPORTS: dict[str, str] = {
    "DEFAULT_MAX_BODY": "bodies",
    "Access": "auth",
    "KeyRing": "auth",
    "create_app": "app",
}

__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from .app import create_app as create_app
    from .auth import Access as Access
    from .auth import KeyRing as KeyRing
    from .bodies import DEFAULT_MAX_BODY as DEFAULT_MAX_BODY

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
