"""The Python-function adapter's one mapping from exceptions to the error taxonomy.

Every exception a plain Python tool can raise ends here. The mapping is deliberately small:
what is not known for sure is ``unclassified`` (never retried), not "transient for convenience".
"""

from __future__ import annotations

import asyncio

from actionspace.errors import ActionError, ToolError

__all__ = ["KNOWN_EXCEPTIONS", "map_exception"]

# (exception type, category for pure/read tools, category for side-effecting tools)
KNOWN_EXCEPTIONS: tuple[tuple[type[BaseException], str, str], ...] = (
    # Refused before anything was sent: nothing can have been committed.
    (ConnectionRefusedError, "transient", "transient"),
    # Broken mid-way: a write may or may not have landed.
    (ConnectionError, "transient", "unknown_commit"),
    (TimeoutError, "transient", "unknown_commit"),
    (PermissionError, "permission_denied", "permission_denied"),
    (asyncio.CancelledError, "cancelled", "unknown_commit"),
)


def map_exception(exc: BaseException, *, side_effects: bool) -> ActionError:
    """The ActionError for an exception a tool raised (its class name kept as ``vendor_code``)."""
    if isinstance(exc, ToolError):
        return exc.error
    vendor = type(exc).__name__
    message = str(exc)[:500] or vendor
    for exc_type, read_category, write_category in KNOWN_EXCEPTIONS:
        if isinstance(exc, exc_type):
            category = write_category if side_effects else read_category
            return ActionError.of(category, message, vendor_code=vendor)  # type: ignore[arg-type]
    return ActionError.of(
        "unclassified",
        f"{vendor}: {message}",
        vendor_code=vendor,
        details={"exception": vendor},
    )
