"""The web page for people at `/`: one HTML page, a style sheet and a script, served from the
package (app/webui/), with nothing loaded from elsewhere.

The page talks to the same HTTP API as any client (/languages, /translate, /translate_file,
/download_file, and /frontend/settings where the server has it). The limits it shows (characters
per request, alternatives) are written into the page by the server from its settings, so the
page works on a server without /frontend/settings too. A Content-Security-Policy header lets
the page load and call only its own origin.
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, Response

from .formats import supported
from .translate import ApiError

router = APIRouter(include_in_schema=False)

ASSETS = {  # served name -> content type; nothing else under /static/ exists
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data: blob:; object-src 'none'; "
        "base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidate, so an upgraded server serves its own page
}


@cache
def asset(name: str) -> str:
    return resources.files("app").joinpath("webui", name).read_text(encoding="utf-8")


def page(settings) -> str:
    """index.html with the server's limits filled in."""
    values = {
        "char_limit": settings.max_request_chars,
        "max_alternatives": settings.max_alternatives,
        "max_file_bytes": settings.max_file_bytes,
        "file_types": ",".join(supported()),
        "file_types_text": ", ".join(supported()),
    }
    out = asset("index.html")
    for name, value in values.items():
        out = out.replace("{{" + name + "}}", html.escape(str(value)))
    return out


@router.get("/")
async def index(request: Request) -> HTMLResponse:
    """The translation page."""
    return HTMLResponse(page(request.app.state.settings), headers=HEADERS)


@router.get("/static/{name}")
async def static(name: str) -> Response:
    """The page's style sheet and script."""
    if name not in ASSETS:
        raise ApiError(404, f"no such path: /static/{name}")
    return Response(asset(name), media_type=ASSETS[name], headers=HEADERS)
