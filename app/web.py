"""The web page for people at `/`: one HTML page, a style sheet and a script, served from the
package (app/webui/), with nothing loaded from elsewhere.

The page talks to the same HTTP API as any client (/languages, /translate, /translate_file,
/download_file, and /frontend/settings where the server has it). The limits it shows (characters
per request, alternatives) are written into the page by the server from its settings, so the
page works on a server without /frontend/settings too. A Content-Security-Policy header lets
the page load and call only its own origin.

The API's interactive documentation (`/docs`, Swagger UI) is served the same way: its script
and style sheet are the ones the fastapi-offline package ships, under /static/docs/, so it works
without internet access too. (FastAPI's ReDoc page is left out: it loads its logo from ReDoc's
site whatever its options.)
"""

from __future__ import annotations

import html
from functools import cache
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

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
        "file_ttl": settings.file_ttl_s,
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


# Swagger UI's files (fastapi-offline ships them; its FastAPI factory is not used)
DOCS_FILES = StaticFiles(directory=str(resources.files("fastapi_offline").joinpath("static")))
DOCS_PATH = "/static/docs"  # where create_app mounts DOCS_FILES


@router.get("/docs")
async def docs(request: Request) -> HTMLResponse:
    """Swagger UI. Its URLs are relative to the page, as the translation page's are, so that it
    also works behind a proxy that serves the service under a path."""
    return get_swagger_ui_html(
        openapi_url="openapi.json",
        title=f"{request.app.title} - API",
        swagger_js_url=f"{DOCS_PATH[1:]}/swagger-ui-bundle.js",
        swagger_css_url=f"{DOCS_PATH[1:]}/swagger-ui.css",
        swagger_favicon_url=f"{DOCS_PATH[1:]}/favicon.png",
        # no schema validation badge: Swagger UI would send the schema to validator.swagger.io
        swagger_ui_parameters={"validatorUrl": None},
    )
