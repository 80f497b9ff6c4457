"""The web console: pages for people, served by the same process as the JSON API.

``console_router()`` serves one HTML shell at every page path (``/``, ``/runs``, ``/runs/{run_id}``,
``/approvals``, ``/tools``, ``/tools/{name}``) and the static assets under ``/static/``. The
pages are drawn in the browser by ``static/console.js`` from the API under ``/api``; nothing is
loaded from another origin, so the console works offline.

The token: ``actionspace serve`` prints ``http://host:port/?token=...``; the page moves the token
into the tab's sessionStorage, removes it from the address bar, and sends it as ``Authorization:
Bearer``. The pages themselves carry no data and need no token. Every response of this router
sends a Content-Security-Policy that allows scripts, styles and requests to this origin only.

``/docs`` (Swagger UI) shows the API's OpenAPI document with the bundle vendored in
``static/vendor/`` (see its README), so it works offline too; ReDoc is not served (its bundle
loads its logo from a CDN).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final

from fastapi import APIRouter
from fastapi.responses import FileResponse, HTMLResponse, Response

from actionspace.errors import ApiError

__all__ = ["CONSOLE_PAGES", "STATIC_DIR", "console_router"]

STATIC_DIR: Final = Path(__file__).with_name("static")
"""The console's assets (HTML shell, JavaScript, CSS, icon), shipped inside the package."""
VENDOR_DIR: Final = STATIC_DIR / "vendor"
"""Third-party bundles of the API docs pages, as published on the npm registry."""

_DOCS_PAGES: Final[Mapping[str, str]] = {
    "/docs": (
        '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>actionspace API</title>'
        '<link rel="icon" href="/static/favicon.svg">'
        '<link rel="stylesheet" href="/static/vendor/swagger-ui.css">'
        '</head><body><div id="swagger-ui"></div><script src="/static/vendor/swagger-ui-bundle.js"></script>'
        '<script src="/static/api-docs.js"></script></body></html>'
    ),
}
"""The API docs page; the bundle styles itself inline, so its CSP allows inline styles (never scripts)."""

_DOCS_CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)

CONSOLE_PAGES: Final = ("/", "/runs", "/runs/{run_id}", "/approvals", "/tools", "/tools/{name}", "/ledger")
"""Paths that answer with the console's HTML shell."""

_MEDIA_TYPES: Final[Mapping[str, str]] = {
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".html": "text/html; charset=utf-8",
}

_SECURITY_HEADERS: Final[Mapping[str, str]] = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    # The first page load carries the token in its query string: never pass it on.
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def _assets() -> dict[str, Path]:
    """Asset name → file, for the files directly in :data:`STATIC_DIR` with a known media type."""
    return {p.name: p for p in sorted(STATIC_DIR.iterdir()) if p.is_file() and p.suffix in _MEDIA_TYPES}


def console_router() -> APIRouter:
    """The console's routes: the page shell at :data:`CONSOLE_PAGES`, assets at ``/static/{name}``.

    The asset list is read once, here; a name not in it answers 404 (so no path outside the
    static folder can be reached). Pages are sent with ``Cache-Control: no-cache`` so a new
    version of the console is picked up at the next load.
    """
    assets = _assets()
    shell = (STATIC_DIR / "index.html").read_text(encoding="utf-8")
    router = APIRouter(include_in_schema=False)

    def page() -> HTMLResponse:
        return HTMLResponse(shell, headers={**_SECURITY_HEADERS, "Cache-Control": "no-cache"})

    for path in CONSOLE_PAGES:
        router.add_api_route(path, page, methods=["GET"], response_class=HTMLResponse, name=f"console:{path}")
    _docs_routes(router)

    @router.get("/static/{name}", name="console:static")
    def static(name: str) -> Response:
        path = assets.get(name)
        if path is None:
            raise ApiError(404, "no such console asset")  # the API's error body, category and all
        return FileResponse(
            path,
            media_type=_MEDIA_TYPES[path.suffix],
            headers={**_SECURITY_HEADERS, "Cache-Control": "no-cache"},
        )

    return router


def _fixed_page(html: str) -> Callable[[], HTMLResponse]:
    """An endpoint answering ``html``; it takes no parameter (a parameter with a default would be
    read from the query string, letting a link choose the page's markup)."""

    def docs_page() -> HTMLResponse:
        return HTMLResponse(html, headers={"Content-Security-Policy": _DOCS_CSP, "Cache-Control": "no-cache"})

    return docs_page


def _docs_routes(router: APIRouter) -> None:
    """``/docs`` and its vendored bundle at ``/static/vendor/{name}``."""
    vendored = {p.name: p for p in sorted(VENDOR_DIR.iterdir()) if p.suffix in (".js", ".css")}

    for path, html in _DOCS_PAGES.items():
        router.add_api_route(
            path, _fixed_page(html), methods=["GET"], response_class=HTMLResponse, name=f"docs:{path}"
        )

    @router.get("/static/vendor/{name}", name="console:vendor")
    def vendor(name: str) -> Response:
        path = vendored.get(name)
        if path is None:
            raise ApiError(404, "no such console asset")  # the API's error body, category and all
        return FileResponse(
            path, media_type=_MEDIA_TYPES[path.suffix], headers={"X-Content-Type-Options": "nosniff"}
        )
