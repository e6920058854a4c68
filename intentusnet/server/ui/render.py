"""Jinja2 rendering for the explorer: autoescaped templates, strict headers.

Autoescaping is on for every template, so payload text — HTML, script tags —
reaches the browser as text. The Content-Security-Policy allows scripts and
styles only from the service itself (``/ui/static``): even markup that slipped
through could not run a script, and nothing is fetched from elsewhere, so the
pages work offline.
"""

from __future__ import annotations

import math
from decimal import ROUND_HALF_UP, Decimal
from functools import cache
from typing import Final
from urllib.parse import urlencode

import orjson
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ... import __version__
from ..._util.jsonvalue import JSONValue

__all__ = [
    "HEADERS",
    "NONE",
    "duration_text",
    "money",
    "pretty_json",
    "render",
    "render_text",
]

#: What every page shows for "none": one dash.
NONE: Final = "\u2013"

#: Sent with every page.
HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; "
        "img-src 'self' data:; object-src 'none'; base-uri 'none'; "
        "form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # Not no-referrer: under it a browser sends ``Origin: null`` with the
    # pages' own forms, which the same-origin check must then refuse. No
    # address leaves for another site either way.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


def _query(values: dict[str, str], **changes: str) -> str:
    """``?a=1&b=2`` of the non-empty values, with ``changes`` applied."""
    merged = {**values, **changes}
    kept = {k: v for k, v in merged.items() if v}
    return "?" + urlencode(kept) if kept else ""


def pretty_json(value: JSONValue) -> str:
    """A recorded value as every page shows it: indented JSON."""
    return orjson.dumps(value, option=orjson.OPT_INDENT_2).decode()


def duration_text(value: float | None) -> str:
    """A duration in one precision everywhere: microseconds, as records keep it."""
    if value is None:
        return NONE
    if value >= 1000:
        return f"{value / 1000:.3f} s"
    return f"{value:.3f} ms"


def money(value: float, currency: str) -> str:
    """An amount as text, in one form on every page: the list, overview and panel.

    From 1 up, two decimals with thousands separators; below 1, two
    significant digits (``0.030``, ``0.0000059``), so a tiny cost never shows
    as zero; zero is ``0.00``. Rounded half up from the shortest decimal form
    of the float (5.85e-06 is 0.0000059, as a person rounds it).
    """
    decimals = 2
    if 0 < value < 1:
        decimals = max(2, 1 - math.floor(math.log10(value)))
    exact = Decimal(repr(value)).quantize(Decimal(1).scaleb(-decimals), ROUND_HALF_UP)
    return f"{exact:,f} {currency}"


@cache
def _environment() -> Environment:
    environment = Environment(
        loader=PackageLoader("intentusnet.server.ui", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.globals["query"] = _query
    environment.globals["version"] = __version__
    environment.filters["ms"] = duration_text
    environment.globals["money"] = money
    environment.globals["dash"] = NONE
    return environment


def render_text(name: str, **context: object) -> str:
    """Render template ``name`` with ``context``: a page, or a part of one."""
    return _environment().get_template(name).render(**context)


def render(
    name: str, request: Request, *, status: int = 200, **context: object
) -> HTMLResponse:
    """Render template ``name`` with ``context`` as a page."""
    html = render_text(name, request=request, path=request.url.path, **context)
    return HTMLResponse(html, status_code=status, headers=HEADERS)
