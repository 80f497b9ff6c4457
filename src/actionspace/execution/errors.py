"""The exception mapper the executor is handed, and the mapping for plain Python tools.

The executor never decides what an exception means: it applies the :class:`ErrorMapper` it was
given. :func:`map_exception` is the Python-function tools' mapping (the runtime hands it to its
executor; ``actionspace.adapters.python`` re-exports it). It is deliberately small: what is not
known for sure is ``unclassified`` (never retried), not "transient for convenience".

HTTP errors raised by a tool through urllib, httpx or requests are mapped in one place,
:func:`map_http_error`, by duck typing (a status code on the exception or on its ``response``), so
none of those libraries is imported here:

======================  ===========================================================
status                  category
======================  ===========================================================
429                     ``rate_limited``, ``retry_after`` from the ``Retry-After`` header
408, 502, 503, 504      ``transient`` (a write's 504 is a timeout: ``unknown_commit``)
401, 403                ``permission_denied``
404, 410                ``permanent``; ``stale_reference`` when the tool acted on a bound resource
409                     ``conflict``
400, 405, 422           ``permanent``
anything else           ``unclassified``
======================  ===========================================================

Transport failures keep the Python rules: a connect timeout or a refused connection sent nothing
(``transient``); any other timeout or broken connection of a write may have committed
(``unknown_commit``).
"""

from __future__ import annotations

import asyncio
import email.utils
import time
from collections.abc import Mapping
from typing import Any, Protocol

from actionspace.errors import ActionError, Category, ToolError, said_safely

__all__ = [
    "HTTP_STATUS_CATEGORIES",
    "KNOWN_EXCEPTIONS",
    "ErrorMapper",
    "http_status",
    "map_exception",
    "map_http_error",
    "retry_after_seconds",
]


class ErrorMapper(Protocol):
    """Maps an exception a tool raised to its ``ActionError``.

    ``side_effects`` is True for tools that write or leave the system, where an interrupted call
    may have committed (so a mapper answers ``unknown_commit`` rather than ``transient``).
    """

    def __call__(self, exc: BaseException, *, side_effects: bool) -> ActionError: ...


KNOWN_EXCEPTIONS: tuple[tuple[type[BaseException], Category, Category], ...] = (
    # Refused before anything was sent: nothing can have been committed.
    (ConnectionRefusedError, "transient", "transient"),
    # Broken mid-way: a write may or may not have landed.
    (ConnectionError, "transient", "unknown_commit"),
    (TimeoutError, "transient", "unknown_commit"),
    (PermissionError, "permission_denied", "permission_denied"),
    (asyncio.CancelledError, "cancelled", "unknown_commit"),
)
"""(exception type, category for pure/read tools, category for side-effecting tools); first match wins."""

HTTP_STATUS_CATEGORIES: Mapping[int, Category] = {
    400: "permanent",
    401: "permission_denied",
    403: "permission_denied",
    404: "permanent",
    405: "permanent",
    408: "transient",
    409: "conflict",
    410: "permanent",
    422: "permanent",
    429: "rate_limited",
    502: "transient",
    503: "transient",
    504: "transient",
}
"""Category of each HTTP status a tool's HTTP client may raise; any other status is ``unclassified``."""

_GONE = frozenset({404, 410})
_NOTHING_SENT = ("ConnectTimeout", "PoolTimeout", "ConnectError", "NewConnectionError")
"""Transport exception class names (httpx, requests, urllib3) raised before a request was sent."""
_TIMEOUTS = ("Timeout", "TimeoutException", "ReadTimeout", "WriteTimeout", "timeout")
_BROKEN = ("ConnectionError", "ReadError", "WriteError", "RemoteProtocolError", "NetworkError")


def http_status(exc: BaseException) -> int | None:
    """The HTTP status an exception carries: ``exc.response.status_code`` (httpx, requests),
    ``exc.status_code``, or ``exc.code`` beside ``exc.headers`` (urllib's ``HTTPError``)."""
    response = getattr(exc, "response", None)
    candidates = (
        getattr(response, "status_code", None) if response is not None else None,
        getattr(exc, "status_code", None),
        getattr(exc, "code", None) if getattr(exc, "headers", None) is not None else None,
    )
    for value in candidates:
        if isinstance(value, int) and not isinstance(value, bool) and 100 <= value <= 599:
            return value
    return None


def _headers(exc: BaseException) -> Any:
    response = getattr(exc, "response", None)
    for holder in (response, exc):
        headers = getattr(holder, "headers", None) if holder is not None else None
        if headers is not None and hasattr(headers, "get"):
            return headers
    return None


def retry_after_seconds(value: Any, *, now: float | None = None) -> float | None:
    """Seconds from a ``Retry-After`` header value (delta-seconds or an HTTP date); None if unreadable."""
    if value is None:
        return None
    text = str(value).strip()
    try:
        seconds = float(text)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(text)
        except (TypeError, ValueError):
            return None
        seconds = when.timestamp() - (time.time() if now is None else now)
    return max(0.0, seconds)


def _names(exc: BaseException) -> set[str]:
    return {klass.__name__ for klass in type(exc).__mro__}


def map_http_error(exc: BaseException, *, side_effects: bool, bound: bool = False) -> ActionError | None:
    """The ActionError for an HTTP client's exception (urllib, httpx, requests), else None.

    ``bound``: the call acted on a resource the model bound earlier, so a 404/410 means the
    reference went stale (``stale_reference``) rather than a permanent failure.
    """
    status = http_status(exc)
    vendor = type(exc).__name__
    if status is None:
        return _transport_error(exc, side_effects=side_effects)
    category: Category = HTTP_STATUS_CATEGORIES.get(status, "unclassified")
    if status == 504 and side_effects:
        category = "unknown_commit"  # a gateway timeout: the write may have landed behind it
    if status in _GONE and bound:
        category = "stale_reference"
    details: dict[str, Any] = {"status": status, "exception": vendor}
    fields: dict[str, Any] = {"vendor_code": f"http_{status}", "details": details}
    if category == "rate_limited":
        headers = _headers(exc)
        wait = retry_after_seconds(headers.get("Retry-After") if headers is not None else None)
        fields["retry_after"] = wait
        if wait is not None:
            details["retry_after_s"] = wait
    message = said_safely(exc, 300) or vendor
    return ActionError.of(category, f"HTTP {status}: {message}", **fields)


def _transport_error(exc: BaseException, *, side_effects: bool) -> ActionError | None:
    """An HTTP library's transport failure (no status), by class name; None if not one."""
    module = type(exc).__module__.split(".")[0]
    reason = getattr(exc, "reason", None)
    if module == "urllib" and isinstance(reason, BaseException):  # URLError wraps the socket error
        inner = map_exception(reason, side_effects=side_effects)
        return ActionError.of(inner.category, said_safely(exc, 300), vendor_code=type(exc).__name__)
    if module not in ("httpx", "requests", "urllib3", "httpcore"):
        return None
    names = _names(exc)
    vendor = type(exc).__name__
    if names & set(_NOTHING_SENT):
        return ActionError.of(
            "transient", f"{vendor}: nothing was sent ({said_safely(exc, 200)})", vendor_code=vendor
        )
    if names & set(_TIMEOUTS) or names & set(_BROKEN):
        category: Category = "unknown_commit" if side_effects else "transient"
        return ActionError.of(category, f"{vendor}: {said_safely(exc, 300)}", vendor_code=vendor)
    return None


def map_exception(exc: BaseException, *, side_effects: bool) -> ActionError:
    """The ActionError for an exception a Python tool raised (its class name kept as ``vendor_code``).

    ``ToolError`` keeps its own error; HTTP client errors map by :func:`map_http_error`;
    :data:`KNOWN_EXCEPTIONS` map by type; anything else is ``unclassified``. No credential in the
    exception's text is kept (:func:`~actionspace.errors.redact`).
    """
    if isinstance(exc, ToolError):
        return exc.error.checked().redacted()  # the tool's own fields, as the stores write them
    try:
        http = map_http_error(exc, side_effects=side_effects)
    except Exception:  # an attribute of the exception raised when read: mapped by its type below
        http = None
    if http is not None:
        return http
    vendor = type(exc).__name__
    message = said_safely(exc, 500) or vendor
    for exc_type, read_category, write_category in KNOWN_EXCEPTIONS:
        if isinstance(exc, exc_type):
            category = write_category if side_effects else read_category
            return ActionError.of(category, message, vendor_code=vendor)
    return ActionError.of(
        "unclassified",
        f"{vendor}: {message}",
        vendor_code=vendor,
        details={"exception": vendor},
    )
