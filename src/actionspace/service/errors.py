"""The API's error bodies: ``{"error": {"category", "message"}}`` for every error the API answers.

A route names the category of its refusal when one is more precise (``conflict``, ``unknown_tool``,
``permission_denied`` of the four-eyes rule); any other answer names the category of its status
(:func:`~actionspace.service.limits.category_of`), so a client can act on every refusal by it.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match

from actionspace.errors import ApiError, ToolError, redact, store_unavailable
from actionspace.service.limits import category_of
from actionspace.service.models import ErrorResponse

__all__ = ["BAD_BODY", "ERRORS", "ApiError", "error_response", "install_handlers"]

_log = logging.getLogger("actionspace.service")

ERRORS: Final[dict[int | str, dict[str, Any]]] = {
    400: {"model": ErrorResponse, "description": "The request carries more than one Authorization header."},
    401: {"model": ErrorResponse, "description": "Missing or unknown bearer token."},
    403: {"model": ErrorResponse, "description": "The token's principal lacks the route's scope."},
    429: {
        "model": ErrorResponse,
        "description": "Too many unknown tokens from this address, requests from this principal, or (on"
        " starting a run) runs of this principal live: wait.",
    },
    422: {"model": ErrorResponse, "description": "The request does not match the route's parameters."},
}
"""Responses every authenticated route declares (the spec must list what the API may answer)."""

BAD_BODY: Final[dict[int | str, dict[str, Any]]] = {
    400: {
        "model": ErrorResponse,
        "description": "The body is not UTF-8 JSON, holds NaN/Infinity, names a member twice or nests too"
        " deep; or the request carries more than one Authorization header.",
    },
    413: {"model": ErrorResponse, "description": "The body is larger than the service accepts."},
}
"""What a route that reads a JSON body declares besides :data:`ERRORS`."""


def _body(message: str, category: str) -> dict[str, Any]:
    return {"error": {"message": message, "category": category}}


def error_response(exc: StarletteHTTPException) -> JSONResponse:
    """The error body of an HTTP error, with its headers; its category is its status's."""
    body = _body(str(exc.detail), category_of(exc.status_code))
    return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)


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
        response = error_response(exc)
        if exc.status_code == 405:
            response.headers["Allow"] = ", ".join(_allowed(app, request))
        return response

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        problems = []
        for err in exc.errors()[:20]:
            where = "/".join(str(part) for part in err.get("loc", ()))
            problems.append(f"{where}: {err.get('msg', 'invalid')}")
        return JSONResponse(_body("; ".join(problems) or "invalid request", "invalid_arguments"), 422)

    async def api_error(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, ApiError)
        category = exc.category or category_of(exc.status)
        return JSONResponse(_body(exc.message, category), status_code=exc.status)

    async def crashed(request: Request, exc: Exception) -> JSONResponse:
        if store_unavailable(exc):  # not a failure of the service: ask again
            # the driver's words (host, port, user, conninfo) stay in the server's log
            _log.warning("actionspace: the store did not answer: %s", redact(str(exc)))
            message = f"the store did not answer ({type(exc).__name__}); try again"
            return JSONResponse(_body(message, "transient"), status_code=503, headers={"Retry-After": "1"})
        if isinstance(exc, ToolError) and exc.error.category == "unknown_commit":
            # a store's COMMIT whose end could not be learnt: it may be recorded; never a blind resend
            _log.warning("actionspace: a store write may or may not have landed: %s", redact(str(exc)))
            message = "the store could not tell whether this was recorded; read it back before asking again"
            return JSONResponse(_body(message, "unknown_commit"), status_code=500)
        message = f"the service failed: {type(exc).__name__}"  # details stay in the server's log
        return JSONResponse(_body(message, "internal"), status_code=500)

    app.add_exception_handler(Exception, crashed)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)
    app.add_exception_handler(ApiError, api_error)
