"""The API's error bodies: ``{"error": {"category"?, "message"}}`` for every 4xx the API answers."""

from __future__ import annotations

import sqlite3
import sys
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from actionspace.errors import ApiError
from actionspace.service.models import ErrorResponse

__all__ = ["BAD_BODY", "ERRORS", "ApiError", "install_handlers", "store_unavailable"]

ERRORS: Final[dict[int | str, dict[str, Any]]] = {
    401: {"model": ErrorResponse, "description": "Missing or unknown bearer token."},
    403: {"model": ErrorResponse, "description": "The token's principal lacks the route's scope."},
    422: {"model": ErrorResponse, "description": "The request does not match the route's parameters."},
}
"""Responses every authenticated route declares (the spec must list what the API may answer)."""

BAD_BODY: Final[dict[int | str, dict[str, Any]]] = {
    400: {
        "model": ErrorResponse,
        "description": "The body is not JSON, holds NaN/Infinity, or nests too deep.",
    },
    413: {"model": ErrorResponse, "description": "The body is larger than the service accepts."},
}
"""What a route that reads a JSON body declares besides :data:`ERRORS`."""


def _body(message: str, category: str | None = None) -> dict[str, Any]:
    error: dict[str, Any] = {"message": message}
    if category is not None:
        error["category"] = category
    return {"error": error}


_SQLITE_BUSY: Final = ("locked", "busy", "disk i/o error", "unable to open")
"""What SQLite says when the file did not answer (another writer past the busy timeout, the disk)."""


def store_unavailable(exc: BaseException) -> bool:
    """True when ``exc`` is a store's driver saying its database did not answer: SQLite locked or
    busy past its timeout, or its file unreadable; PostgreSQL's connection lost or refused, or its
    pool out of connections. A request that failed so may succeed when asked again."""
    if isinstance(exc, sqlite3.OperationalError):
        text = str(exc).lower()
        return any(word in text for word in _SQLITE_BUSY)
    psycopg = sys.modules.get("psycopg")  # loaded only where a PostgreSQL store is in use
    return psycopg is not None and isinstance(exc, psycopg.OperationalError)


def _allowed(app: FastAPI, request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette names only the first route's)."""
    methods: set[str] = set()
    for route in app.router.routes:
        match, _ = route.matches(request.scope)
        if match != Match.NONE:
            methods.update(getattr(route, "methods", None) or ())
    return sorted(methods)


def install_handlers(app: FastAPI) -> None:
    """Answer HTTP, validation and API errors with the error body."""

    async def http_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            headers["Allow"] = ", ".join(_allowed(app, request))
        return JSONResponse(_body(str(exc.detail)), status_code=exc.status_code, headers=headers)

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = []
        for err in exc.errors()[:20]:
            where = "/".join(str(part) for part in err.get("loc", ()))
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        return JSONResponse(_body("; ".join(problems) or "invalid request", "invalid_arguments"), 422)

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        return JSONResponse(_body(exc.message, exc.category), status_code=exc.status)

    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        if store_unavailable(exc):  # not a failure of the service: ask again
            message = f"the store did not answer ({type(exc).__name__}: {exc}); try again"
            return JSONResponse(_body(message, "transient"), status_code=503, headers={"Retry-After": "1"})
        message = f"the service failed: {type(exc).__name__}"  # details stay in the server's log
        return JSONResponse(_body(message, "internal"), status_code=500)

    app.add_exception_handler(Exception, crashed)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(ApiError, api_error)
