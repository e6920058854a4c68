"""Who may see the explorer's pages and who may invalidate from them.

Under ``intentusnet serve`` with API keys, a browser cannot send an
``Authorization`` header, so ``/ui/login`` takes a key once and keeps it in a
cookie that only ``/ui`` paths receive (``HttpOnly``, ``SameSite=Strict``,
``Secure`` over HTTPS); the JSON API never reads it. A read key shows the pages;
a key that may route (not ``ro:``) may also invalidate a record from its page.
Without keys, and in ``intentusnet ui``, the pages are read-only.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Request
from starlette.responses import RedirectResponse, Response

from ...errors import Forbidden, RequestTooLarge, Unauthorized
from ..auth import Access
from .render import render

__all__ = ["COOKIE", "Gate", "access_router", "form"]

#: The cookie that carries a browser's key, sent back only to ``/ui`` paths.
COOKIE: Final = "intentusnet_ui_key"
_MAX_FORM: Final = 8 * 1024


@dataclass(frozen=True, slots=True)
class Gate:
    """The explorer's access rules, as the app that mounts it sets them. Added in 0.1.0.

    Attributes:
        check: raises ``Unauthorized`` or ``Forbidden`` unless the request (its
            ``Authorization`` header, else the key of the cookie given) has the
            access asked for.
        key_access: the access a key grants, ``None`` for an unknown key;
            ``None`` itself when the service has no keys (there is no login).
        invalidation: whether pages may offer to invalidate at all.
    """

    check: Callable[[Request, Access, str | None], None]
    key_access: Callable[[str], Access | None] | None = None
    invalidation: bool = False

    def authorize(self, request: Request, needed: Access = Access.READ) -> None:
        """Allow the request ``needed`` access, or raise."""
        self.check(request, needed, request.cookies.get(COOKIE))

    def may_invalidate(self, request: Request) -> bool:
        """Whether this request may invalidate: a key with write scope."""
        if not self.invalidation or self.key_access is None:
            return False
        try:
            self.authorize(request, Access.ROUTE)
        except (Unauthorized, Forbidden):
            return False
        return True


async def form(request: Request) -> dict[str, str]:
    """A small ``application/x-www-form-urlencoded`` body, first value of each."""
    body = await request.body()
    if len(body) > _MAX_FORM:
        raise RequestTooLarge("the form is too large")
    fields = parse_qs(body.decode("utf-8", "replace"), max_num_fields=20)
    return {name: values[0] for name, values in fields.items()}


def same_origin(request: Request) -> None:
    """Refuse a form posted from another site (the cookie is SameSite too)."""
    origin = request.headers.get("origin")
    if origin is not None and origin != f"{request.url.scheme}://{request.url.netloc}":
        raise Forbidden("this form may only be sent from the explorer's own pages")


def _next(target: str) -> str:
    # Only back into the explorer: never an open redirect.
    return target if target.startswith("/ui") and not target.startswith("//") else "/ui"


def login_redirect(request: Request) -> Response:
    """Send a browser without a key to the login page, and back afterwards."""
    back = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    return RedirectResponse(f"/ui/login?next={quote(back, safe='')}", status_code=303)


def access_router(gate: Gate) -> APIRouter:
    """``/ui/login`` and ``/ui/logout``. Added in 0.1.0."""
    pages = APIRouter(include_in_schema=False)

    @pages.get("/ui/login")
    def login_page(request: Request, next: str = "/ui") -> Response:
        if gate.key_access is None:
            return RedirectResponse(_next(next), status_code=303)
        return render("login.html", request, next=_next(next), failed=False)

    @pages.post("/ui/login")
    async def login(request: Request) -> Response:
        same_origin(request)
        fields = await form(request)
        target = _next(fields.get("next", "/ui"))
        if gate.key_access is None:
            return RedirectResponse(target, status_code=303)
        key = fields.get("key", "").strip()
        if not key or gate.key_access(key) is None:
            return render("login.html", request, status=401, next=target, failed=True)
        response = RedirectResponse(target, status_code=303)
        response.set_cookie(
            COOKIE,
            key,
            path="/ui",
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response

    @pages.post("/ui/logout")
    def logout(request: Request) -> Response:
        same_origin(request)
        response = RedirectResponse("/ui/login", status_code=303)
        response.delete_cookie(COOKIE, path="/ui", httponly=True, samesite="strict")
        return response

    return pages
