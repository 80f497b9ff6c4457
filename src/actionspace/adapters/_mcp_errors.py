"""The MCP client adapter's one mapping from MCP failures to the error taxonomy.

Three kinds of failure reach an MCP tool call, and all of them end here:

* a ``CallToolResult`` with ``isError`` (the tool ran and reported a failure),
* a JSON-RPC error response, raised by the SDK as ``MCPError`` with a numeric ``code``,
* a local failure of the connection (the server process died, the stream closed, the server
  could not be started, the result broke the tool's own output schema).

Each known case has two categories: one for tools without side effects (``none`` / ``read``)
and one for ``write`` / ``external`` tools, where a request that may have reached the server
can have committed. What is not known for sure is ``unclassified`` (never retried).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

import anyio
from mcp import InputRequiredRoundsExceededError
from mcp.shared.exceptions import MCPError
from mcp_types import (
    CONNECTION_CLOSED,
    HEADER_MISMATCH,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    INVALID_REQUEST,
    METHOD_NOT_FOUND,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    PARSE_ERROR,
    REQUEST_TIMEOUT,
    UNSUPPORTED_PROTOCOL_VERSION,
    URL_ELICITATION_REQUIRED,
)
from pydantic import ValidationError

from actionspace.errors import CATEGORIES, ActionError, Category, said_safely

__all__ = [
    "JSONRPC_CODES",
    "LOCAL_FAILURES",
    "MALFORMED_ANSWER",
    "REDIRECT_REFUSED",
    "RESOURCE_NOT_FOUND",
    "RESULT_TOO_LARGE",
    "UNDELIVERED",
    "UNSENT",
    "InputRefused",
    "Reconnecting",
    "ServerUnavailable",
    "SessionExpired",
    "ToolChanged",
    "ToolChangedDuringCall",
    "map_call_error",
    "map_jsonrpc_error",
    "map_tool_error_result",
]

_OUTPUT_CHECK: Final = re.compile(r"structured content|invalid schema for tool", re.IGNORECASE)
"""What the SDK's ``RuntimeError`` says when a result fails its check against the output schema."""

RESOURCE_NOT_FOUND: Final = -32002
"""Retired by newer protocol revisions, still sent by older servers."""
RESULT_TOO_LARGE: Final = -32090
"""Raised by the client's own transports (``_mcp_stdio``, ``_mcp_http``): the server's answer was
larger than the bound and was dropped unread. A server sending it gains nothing: it is never retryable."""
MALFORMED_ANSWER: Final = -32091
"""Raised by the client's own HTTP transport (``_mcp_http``): the server answered with something
that is not a JSON-RPC answer to the request (invalid UTF-8 or JSON, another request's id)."""
REDIRECT_REFUSED: Final = -32092
"""Raised by the client's own HTTP transport (``_mcp_http``): the server answered with a redirect (or
another 3xx) that is not followed, so the request was answered before it was processed."""


UNDELIVERED: Final = -32093
"""Raised by the client's own HTTP transport (``_mcp_http``): the request reached no session of the server
(its connection could not be made, or the server answered ``404`` to the session id: it restarted), so
it was not processed; the session is opened again (``_mcp_reconnect``)."""
UNSENT: Final = -32094
"""Raised by the client's own stdio transport (``_mcp_pipe``): the server did not read its input, and not a
byte of the request went to it within its bound (or its input closed first), so it was not sent."""


class SessionExpired(Exception):
    """Raised inside the HTTP transport (``_mcp_http``) for a request answered ``404`` to the session id:
    the request's answer is then ``UNDELIVERED``."""


class ServerUnavailable(Exception):
    """The MCP server is not connected (never started, or its connection ended): nothing was sent."""


class Reconnecting(ServerUnavailable):
    """The session ended and is being opened again (``_mcp_reconnect``): nothing was sent; worth a retry
    after ``retry_after`` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ToolChanged(Exception):
    """The server's listing changed a tool (or dropped it) after a call of it was made, perhaps approved,
    and before it was sent: the call is not sent, since it would run a definition nobody was shown."""


class ToolChangedDuringCall(Exception):
    """The server announced a change of the tool while a call of it ran, and the listing that followed
    holds another definition (or none, or could not be read): which definition ran is not known."""


class InputRefused(Exception):
    """A call was answered ``input_required`` (the 2026 revision) with a request for input this client
    never offered (sampling, elicitation, roots), which the SDK refused here: the call cannot go on.
    The SDK reports it as the ``INVALID_REQUEST`` error a server sends, which would make it ``internal``
    and a write known not to have committed; but the server had the request, and may have acted on it."""


# code → (name for diagnostics, category without side effects, category with side effects)
JSONRPC_CODES: Final[Mapping[int, tuple[str, Category, Category]]] = {
    # The request never reached a tool: nothing can have committed.
    PARSE_ERROR: ("parse_error", "internal", "internal"),
    INVALID_REQUEST: ("invalid_request", "internal", "internal"),
    METHOD_NOT_FOUND: ("method_not_found", "permanent", "permanent"),
    INVALID_PARAMS: ("invalid_params", "invalid_arguments", "invalid_arguments"),
    HEADER_MISMATCH: ("header_mismatch", "version_mismatch", "version_mismatch"),
    MISSING_REQUIRED_CLIENT_CAPABILITY: ("missing_client_capability", "permanent", "permanent"),
    UNSUPPORTED_PROTOCOL_VERSION: ("unsupported_protocol_version", "permanent", "permanent"),
    URL_ELICITATION_REQUIRED: ("url_elicitation_required", "permission_denied", "permission_denied"),
    RESOURCE_NOT_FOUND: ("resource_not_found", "permanent", "permanent"),
    # The server failed while handling it: a write may have landed before the failure.
    INTERNAL_ERROR: ("internal_error", "unclassified", "unknown_commit"),
    # Raised by the SDK itself: the answer was lost, not refused.
    CONNECTION_CLOSED: ("connection_closed", "transient", "unknown_commit"),
    REQUEST_TIMEOUT: ("request_timeout", "transient", "unknown_commit"),
    # The server answered, but too much to take: a write it answered may have committed.
    RESULT_TOO_LARGE: ("result_too_large", "permanent", "unknown_commit"),
    MALFORMED_ANSWER: ("malformed_answer", "permanent", "unknown_commit"),
    # A 3xx answer is given instead of processing the request: a write cannot have committed.
    REDIRECT_REFUSED: ("redirect_refused", "permanent", "permanent"),
    # The request reached no session of the server: it was not processed.
    UNDELIVERED: ("undelivered", "transient", "transient"),
    # Not a byte of it was written to a stdio server's input: it was not sent.
    UNSENT: ("unsent", "transient", "transient"),
}

# exception type → (name, category without side effects, category with side effects)
LOCAL_FAILURES: Final[tuple[tuple[type[BaseException], str, Category, Category], ...]] = (
    (ServerUnavailable, "server_unavailable", "transient", "transient"),
    (ToolChanged, "tool_changed", "version_mismatch", "version_mismatch"),
    # Sent and answered, but under which definition is unknown: a read is asked again, a write is in doubt.
    (ToolChangedDuringCall, "tool_changed_during_call", "version_mismatch", "unknown_commit"),
    (anyio.ClosedResourceError, "stream_closed", "transient", "unknown_commit"),
    (anyio.BrokenResourceError, "stream_broken", "transient", "unknown_commit"),
    (anyio.EndOfStream, "end_of_stream", "transient", "unknown_commit"),
    (ConnectionError, "connection_lost", "transient", "unknown_commit"),
    # The server answered, but the answer broke its declared contract.
    (ValidationError, "malformed_result", "permanent", "unknown_commit"),
    # The server answered ``input_required``: for input never offered (a read cannot be served), or
    # with a request state round after round, past the SDK's bound (a read may be served later).
    (InputRefused, "input_refused", "permanent", "unknown_commit"),
    (InputRequiredRoundsExceededError, "input_rounds_exceeded", "transient", "unknown_commit"),
)


def map_jsonrpc_error(exc: MCPError, *, side_effects: bool) -> ActionError:
    """The ActionError for a JSON-RPC error response (``vendor_code`` = ``jsonrpc:<code>``)."""
    known = JSONRPC_CODES.get(exc.code)
    details: dict[str, Any] = {"jsonrpc_code": exc.code}
    if exc.data is not None:
        details["data"] = _safe(exc.data)
    message = said_safely(exc.message, 500) or f"JSON-RPC error {exc.code}"
    if known is None:
        return ActionError.of(
            "unclassified", message, vendor_code=f"jsonrpc:{exc.code}", details={**details, "known": False}
        )
    name, read_category, write_category = known
    category = write_category if side_effects else read_category
    return ActionError.of(
        category, message, vendor_code=f"jsonrpc:{exc.code}", details={**details, "error": name}
    )


def map_call_error(exc: BaseException, *, side_effects: bool) -> ActionError:
    """The ActionError for anything raised while calling an MCP tool."""
    if isinstance(exc, MCPError):
        return map_jsonrpc_error(exc, side_effects=side_effects)
    for exc_type, name, read_category, write_category in LOCAL_FAILURES:
        if isinstance(exc, exc_type):
            category = write_category if side_effects else read_category
            message = f"{name}: {said_safely(exc, 400)}" if str(exc) else name
            if isinstance(exc, Reconnecting):  # when the next attempt to connect is due
                details = {"error": name, "reconnecting": True}
                return ActionError.of(
                    category, message, vendor_code=name, details=details, retry_after=exc.retry_after
                )
            return ActionError.of(category, message, vendor_code=name, details={"error": name})
    if isinstance(exc, RuntimeError) and _OUTPUT_CHECK.search(str(exc)):
        # The SDK's output-schema check, made once the server answered: the data breaks the
        # tool's own schema, is missing, or the schema itself cannot be used.
        return ActionError.of(
            "unknown_commit" if side_effects else "permanent",
            said_safely(exc, 500),
            vendor_code="output_schema",
            details={"error": "output_schema"},
        )
    vendor = type(exc).__name__
    return ActionError.of(
        "unclassified",
        f"{vendor}: {said_safely(exc, 400)}",
        vendor_code=vendor,
        details={"exception": vendor},
    )


def map_tool_error_result(text: str, structured: Any, *, trusted: bool) -> ActionError:
    """The ActionError for a ``CallToolResult`` with ``isError`` set.

    The tool itself reported the failure, in words the model may read (``message``). A trusted
    (allowlisted) server may name a taxonomy category in its structured content (``{"category":
    ...}``, as the actionspace gateway does); an untrusted server's claim is kept in ``details``
    only, so it can never make a call retryable. Anything else is ``unclassified``.
    """
    message = said_safely(text, 1000) or "the tool reported an error without a message"
    details: dict[str, Any] = {"error": "tool_error"}
    claimed = structured.get("category") if isinstance(structured, Mapping) else None
    if isinstance(claimed, str) and claimed in CATEGORIES:
        if trusted:
            try:
                return ActionError.from_dict(
                    {**dict(structured), "message": structured.get("message") or message}
                )
            except (TypeError, ValueError, KeyError):
                pass  # a malformed error object: fall through to unclassified
        details["claimed_category"] = claimed
    if structured is not None:
        details["structured_content"] = _safe(structured)
    return ActionError.of("unclassified", message, vendor_code="isError", details=details)


def _safe(value: Any) -> Any:
    """A JSON-safe, bounded copy of vendor data for ``details``."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value if not isinstance(value, str) else said_safely(value, 500)
    if isinstance(value, Mapping):
        return {str(k)[:100]: _safe(v) for k, v in list(value.items())[:50]}
    if isinstance(value, list | tuple):
        return [_safe(v) for v in value[:50]]
    return said_safely(value, 500)
