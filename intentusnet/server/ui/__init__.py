"""The record explorer: pages under ``/ui`` (docs/ui.md).

``intentusnet serve`` mounts them beside the JSON API; ``intentusnet ui``
serves them alone, over a store, on loopback. The templates, the stylesheet and
the one small script ship inside this package: no build step, no CDN.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from fastapi import FastAPI
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.staticfiles import StaticFiles

from ... import __version__
from ...errors import Forbidden
from ..auth import Access, is_loopback
from .access import Gate, access_router
from .operate import Operator, operate_router
from .pages import ui_router
from .reask import reask_router

if TYPE_CHECKING:
    from ...cache.prices import PriceTable
    from ...record.signing import KeyRing
    from ...store import ExecutionStore

__all__ = ["Gate", "Operator", "add_ui", "create_ui_app"]

_STATIC = Path(__file__).parent / "static"


def add_ui(
    app: FastAPI,
    store: ExecutionStore | None,
    gate: Gate,
    signature_keys: KeyRing | None = None,
    *,
    app_ref: str | None = None,
    prices: PriceTable | None = None,
    operator: Operator | None = None,
) -> None:
    """Mount the explorer on ``app``: pages under ``/ui``, files under ``/ui/static``.

    ``signature_keys`` (trusted public keys) checks each record's signatures
    on its page; ``app_ref``, the ``MODULE:ATTR`` of the application, goes
    into the commands the pages show; ``prices`` prices LLM calls (a record's,
    the list's and the overview's); ``operator`` (under ``serve``) gives an
    execution's page its levers as buttons, for a write key. Added in 0.1.0.
    """
    app.mount("/ui/static", StaticFiles(directory=_STATIC), name="ui-static")
    app.include_router(access_router(gate))
    app.include_router(
        ui_router(
            store,
            gate,
            signature_keys,
            app_ref=app_ref,
            prices=prices,
            operator=operator,
        )
    )
    app.include_router(reask_router(store, gate))
    if operator is not None:
        app.include_router(operate_router(gate, operator))


def _loopback_only(request: Request, needed: Access, key: str | None) -> None:
    server = request.scope.get("server")
    host = server[0] if isinstance(server, tuple | list) and server else ""
    if not is_loopback(str(host)):
        raise Forbidden("the explorer answers only on loopback")


def create_ui_app(
    store: ExecutionStore,
    *,
    signature_keys: KeyRing | None = None,
    app_ref: str | None = None,
    prices: PriceTable | None = None,
) -> FastAPI:
    """The explorer alone over ``store``, read-only, for loopback callers.

    What ``intentusnet ui`` serves. ``signature_keys``, the trusted public
    keys (``intentusnet ui --key``/``--keys``), checks each record's
    signatures on its page; ``app_ref``, the application's ``MODULE:ATTR``,
    goes into the commands the pages show; ``prices`` prices LLM calls (a
    record's, the list's and the overview's). Added in 0.1.0.
    """
    app = FastAPI(
        title="IntentusNet explorer",
        version=__version__,
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
    )

    @app.get("/", include_in_schema=False)
    def home() -> Response:
        return RedirectResponse("/ui", status_code=307)

    @app.get("/healthz", include_in_schema=False)
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    @app.exception_handler(Forbidden)
    def forbidden(request: Request, exc: Exception) -> Response:
        return PlainTextResponse(str(exc), status_code=403)

    add_ui(
        app,
        store,
        Gate(_loopback_only),
        signature_keys,
        app_ref=app_ref,
        prices=prices,
    )
    return app
